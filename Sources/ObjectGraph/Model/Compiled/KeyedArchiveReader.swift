import Foundation

/// Reads an `NSKeyedArchiver` archive without an Objective-C runtime: the
/// property list is parsed by Foundation's `PropertyListSerialization`, and
/// the object graph (`$objects`, `$top`, `CF$UID` references, `$class` →
/// `$classname`/`$classes`) is walked here. Foundation's own value classes
/// (strings, numbers, data, dates, arrays, sets, dictionaries, UUIDs, URLs,
/// Core Data's `NSKnownKeysDictionary1`) become Swift values through
/// `value(_:)`; every other archived object is handed out as an
/// `ArchivedObject` for a class-specific decoder to read its keys.
///
/// Every lookup is checked: a reference past `$objects`, a key holding the
/// wrong kind of value, a class record without a name, nesting deeper than
/// `maximumDepth` or a collection that contains itself throws a
/// `CoreDataError` (259, `NSFileReadCorruptFileError`) naming `source` and
/// the object; nothing traps on a damaged archive.
///
/// ```swift
/// let archive = try KeyedArchiveReader(data: momData, source: "Model.mom")
/// let root = try archive.object(archive.root())
/// root.className                                  // "NSManagedObjectModel"
/// let versions = try archive.value(root.reference("NSVersionIdentifiers"))
/// ```
public final class KeyedArchiveReader {
    /// Where the archive came from, for error messages.
    public let source: String
    /// `$objects`: index 0 is the `$null` marker.
    private let objects: [Any]
    private let top: [String: Any]
    /// Nesting allowed in `value(_:)` before the archive is called corrupt.
    public var maximumDepth = 256
    /// References being decoded by `value(_:)`, to report cycles.
    private var inProgress = Set<Int>()

    /// Parses `data` as a keyed archive.
    public init(data: Data, source: String) throws {
        self.source = source
        if let problem = BinaryPlistPrecheck.problem(in: data) { throw KeyedArchiveReader.corrupt(source, problem) }
        let plist: Any
        do {
            plist = try PropertyListSerialization.propertyList(from: data, options: [], format: nil)
        } catch {
            throw KeyedArchiveReader.corrupt(source, "not a property list (\(data.count) bytes): \(error.localizedDescription)")
        }
        guard let dictionary = plist as? [String: Any] else {
            throw KeyedArchiveReader.corrupt(source, "the property list is a \(type(of: plist)), not a keyed archive's dictionary")
        }
        guard let archiver = dictionary["$archiver"] as? String, let objects = dictionary["$objects"] as? [Any],
              let top = dictionary["$top"] as? [String: Any] else {
            throw KeyedArchiveReader.corrupt(source, "not an NSKeyedArchiver archive (no $archiver, $objects and $top)")
        }
        guard archiver == "NSKeyedArchiver" else {
            throw KeyedArchiveReader.corrupt(source, "archived by '\(archiver)', not NSKeyedArchiver")
        }
        self.objects = objects
        self.top = top
    }

    /// The error every damage to the archive is reported with.
    static func corrupt(_ source: String, _ what: String) -> CoreDataError {
        CoreDataError(.fileReadCorruptFile, "\(source): corrupt keyed archive: \(what)",
                      userInfo: [CoreDataError.filePathErrorKey: source])
    }

    func corrupt(_ what: String) -> CoreDataError { KeyedArchiveReader.corrupt(source, what) }

    // MARK: - References

    /// A `CF$UID` reference as Foundation hands it over: in an XML archive a
    /// one-key dictionary, in a binary one an opaque UID object whose number
    /// is only reachable by reflection (swift-corelibs-foundation keeps
    /// `_NSKeyedArchiverUID` internal; its stored `value` is a `UInt32`).
    static func uid(_ any: Any) -> Int? {
        if let dictionary = any as? [String: Any], dictionary.count == 1, let n = dictionary["CF$UID"] {
            return (n as? NSNumber).map { $0.intValue }
        }
        guard String(describing: type(of: any)).hasSuffix("KeyedArchiverUID") else { return nil }
        for child in Mirror(reflecting: any).children where child.label == "value" {
            if let v = child.value as? UInt32 { return Int(v) }
            if let v = child.value as? Int { return v }
        }
        return nil
    }

    /// The reference `$top` holds under `key` (`root` for a model).
    public func root(_ key: String = "root") throws -> Int {
        guard let raw = top[key] else { throw corrupt("$top has no '\(key)'") }
        guard let uid = KeyedArchiveReader.uid(raw) else { throw corrupt("$top['\(key)'] is not an object reference") }
        try check(uid, "$top['\(key)']")
        return uid
    }

    func check(_ uid: Int, _ context: String) throws {
        guard uid >= 0 && uid < objects.count else {
            throw corrupt("\(context) refers to object \(uid), but the archive holds \(objects.count)")
        }
    }

    /// True for the `$null` reference (nil).
    public func isNull(_ uid: Int) -> Bool { uid == 0 }

    // MARK: - Objects

    /// The class name and keys of the archived object `uid`. Throws when it
    /// is a bare value (a string or number written inline) or has no class.
    public func object(_ uid: Int) throws -> ArchivedObject {
        try check(uid, "a reference")
        guard let fields = objects[uid] as? [String: Any] else {
            throw corrupt("object \(uid) is a \(describeKind(objects[uid])), not an archived object")
        }
        guard let classRef = fields["$class"], let classUID = KeyedArchiveReader.uid(classRef) else {
            throw corrupt("object \(uid) has no $class reference")
        }
        try check(classUID, "object \(uid)'s $class")
        guard let record = objects[classUID] as? [String: Any], let name = record["$classname"] as? String else {
            throw corrupt("object \(uid)'s class record \(classUID) has no $classname")
        }
        let chain = (record["$classes"] as? [Any])?.compactMap { $0 as? String } ?? [name]
        return ArchivedObject(reader: self, uid: uid, className: name, classChain: chain, fields: fields)
    }

    /// The class name of `uid`, or nil for a bare value or `$null`.
    public func className(_ uid: Int) throws -> String? {
        try check(uid, "a reference")
        guard uid != 0, objects[uid] is [String: Any] else { return nil }
        return try object(uid).className
    }

    private func describeKind(_ any: Any) -> String {
        switch any {
        case is String: return "string"
        case is NSNumber: return "number"
        case is Data: return "data"
        case is [Any]: return "array"
        case is [String: Any]: return "dictionary"
        default: return "\(type(of: any))"
        }
    }

    // MARK: - Foundation values

    /// Decodes the object at `uid` into Swift values: `nil` for `$null`;
    /// `String`, `Int64`/`Double`/`Bool` (from `NSNumber`), `Data`, `Date`,
    /// `UUID`, `URL`, `Decimal`; `[Any?]` for arrays and sets; `[AnyHashable: Any?]`
    /// for dictionaries; any other class as its `ArchivedObject`.
    public func value(_ uid: Int, depth: Int = 0) throws -> Any? {
        try check(uid, "a reference")
        if uid == 0 { return nil }
        guard depth < maximumDepth else { throw corrupt("objects nest deeper than \(maximumDepth) levels at object \(uid)") }
        let raw = objects[uid]
        if let s = raw as? String { return s }
        if let d = raw as? Data { return d }
        if let d = raw as? Date { return d }
        if let n = KeyedArchiveReader.number(raw) { return n }
        if KeyedArchiveReader.uid(raw) != nil { throw corrupt("object \(uid) is itself a reference") }
        guard raw is [String: Any] else { throw corrupt("object \(uid) is a \(describeKind(raw)), which a keyed archive does not hold") }
        guard inProgress.insert(uid).inserted else { throw corrupt("object \(uid) contains itself") }
        defer { inProgress.remove(uid) }
        let object = try self.object(uid)
        switch object.className {
        case "NSString", "NSMutableString":
            return try object.rawString("NS.string")
        case "NSArray", "NSMutableArray", "NSSet", "NSMutableSet", "NSOrderedSet", "NSMutableOrderedSet":
            return try object.references("NS.objects").map { try value($0, depth: depth + 1) }
        case "NSDictionary", "NSMutableDictionary":
            let keys = try object.references("NS.keys"), values = try object.references("NS.objects")
            guard keys.count == values.count else {
                throw corrupt("dictionary \(uid) has \(keys.count) keys and \(values.count) values")
            }
            return try dictionary(keys: keys, values: values, depth: depth, uid: uid)
        case "NSKnownKeysDictionary1":
            // Core Data's dictionary with a shared key list: the keys live in
            // `searchMapping.keys`, the values in `values`, in the same order.
            let mapping = try self.object(try object.reference("searchMapping"))
            let keys = try self.object(try mapping.reference("keys")).references("NS.objects")
            let values = try self.object(try object.reference("values")).references("NS.objects")
            guard keys.count == values.count else {
                throw corrupt("known-keys dictionary \(uid) has \(keys.count) keys and \(values.count) values")
            }
            return try dictionary(keys: keys, values: values, depth: depth, uid: uid)
        case "NSData", "NSMutableData":
            return try object.rawData("NS.data")
        case "NSDate":
            return Date(timeIntervalSinceReferenceDate: try object.double("NS.time"))
        case "NSUUID":
            let bytes = try object.rawData("NS.uuidbytes")
            guard bytes.count == 16 else { throw corrupt("UUID \(uid) has \(bytes.count) bytes, not 16") }
            let b = [UInt8](bytes)
            return UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
        case "NSURL":
            let relative = try object.rawString("NS.relative")
            let base = object.has("NS.base") ? try value(try object.reference("NS.base"), depth: depth + 1) as? URL : nil
            guard let url = URL(string: relative, relativeTo: base) else { throw corrupt("URL \(uid) '\(relative)' is not a URL") }
            return url
        case "NSDecimalNumber", "NSDecimalNumberPlaceholder":
            // Exponent, sign and a 128-bit mantissa of 16-bit words (NS.mantissa.bo 1: little-endian).
            let bytes = [UInt8](try object.rawData("NS.mantissa"))
            let exponent = try object.integer("NS.exponent", in: -128...127)
            let bigEndian = object.has("NS.mantissa.bo") ? try object.integer("NS.mantissa.bo") == 0 : false
            var magnitude = Decimal(0), scale = Decimal(1)
            for i in stride(from: 0, to: min(bytes.count, 16) & ~1, by: 2) {
                let word = bigEndian ? UInt16(bytes[i]) << 8 | UInt16(bytes[i + 1]) : UInt16(bytes[i + 1]) << 8 | UInt16(bytes[i])
                magnitude += Decimal(Int(word)) * scale
                scale *= 65536
            }
            let value = Decimal(sign: try object.bool("NS.negative") ? .minus : .plus, exponent: exponent, significand: magnitude)
            return value
        default:
            return object
        }
    }

    private func dictionary(keys: [Int], values: [Int], depth: Int, uid: Int) throws -> [AnyHashable: Any?] {
        var out: [AnyHashable: Any?] = [:]
        for (k, v) in zip(keys, values) {
            guard let key = try value(k, depth: depth + 1) as? AnyHashable else {
                throw corrupt("dictionary \(uid) has a key that is nil or not a plain value")
            }
            out[key] = .some(try value(v, depth: depth + 1))
        }
        return out
    }

    /// Foundation's plist reader gives `NSNumber` for integers, reals and
    /// booleans alike; this keeps which it was.
    static func number(_ raw: Any) -> Any? {
        let type = Swift.type(of: raw)
        if type == Bool.self { return raw as! Bool }
        if type == Int.self { return Int64(raw as! Int) }
        if type == Int64.self { return raw as! Int64 }
        if type == Double.self { return raw as! Double }
        if type == String.self || raw is Data || raw is Date { return nil }
        guard let n = raw as? NSNumber else { return nil }
        switch String(cString: n.objCType) {
        case "c", "B": return n.boolValue
        case "f", "d": return n.doubleValue
        default: return n.int64Value
        }
    }

    fileprivate func rawObject(_ uid: Int) -> Any { objects[uid] }
}

/// One archived object: its class and the keys it was encoded with. Each
/// accessor checks the key's kind and throws a corrupt-archive error naming
/// the object, class and key when it does not match.
public struct ArchivedObject {
    let reader: KeyedArchiveReader
    /// Index in `$objects`.
    public let uid: Int
    /// `$classname`, e.g. `NSAttributeDescription`.
    public let className: String
    /// `$classes`: the class and its superclasses, most derived first.
    public let classChain: [String]
    let fields: [String: Any]

    public var keys: [String] { fields.keys.filter { $0 != "$class" } }
    public func has(_ key: String) -> Bool { fields[key] != nil }

    func wrong(_ key: String, _ expected: String) -> CoreDataError {
        reader.corrupt("\(className) (object \(uid)) holds \(expected == "present" ? "no" : "a wrong kind of value at") '\(key)'\(expected == "present" ? "" : ", expected \(expected)")")
    }

    /// The reference stored at `key`; `0` (`$null`) when the key is absent.
    public func reference(_ key: String) throws -> Int {
        guard let raw = fields[key] else { return 0 }
        guard let uid = KeyedArchiveReader.uid(raw) else { throw wrong(key, "an object reference") }
        try reader.check(uid, "\(className).\(key)")
        return uid
    }

    /// The object at `key` decoded as a Foundation value (see `KeyedArchiveReader.value`).
    public func value(_ key: String) throws -> Any? { try reader.value(try reference(key)) }

    /// The object at `key` as an archived object, or nil when absent or `$null`.
    public func object(_ key: String) throws -> ArchivedObject? {
        let uid = try reference(key)
        return uid == 0 ? nil : try reader.object(uid)
    }

    /// A string object at `key`, or nil when absent or `$null`.
    public func string(_ key: String) throws -> String? {
        let v = try value(key)
        guard let v else { return nil }
        guard let s = v as? String else { throw wrong(key, "a string") }
        return s
    }

    /// An inline integer (`encodeInt:`); 0 when absent, as NSCoder does.
    public func integer(_ key: String) throws -> Int64 {
        guard let raw = fields[key] else { return 0 }
        guard let n = raw as? NSNumber, !(raw is String) else { throw wrong(key, "an integer") }
        let d = n.doubleValue
        guard d.rounded() == d, d >= -9.3e18, d <= 9.3e18 else { throw wrong(key, "an integer in range") }
        return n.int64Value
    }

    /// An inline integer that must fit `Int` in `range`.
    public func integer(_ key: String, in range: ClosedRange<Int64>) throws -> Int {
        let n = try integer(key)
        guard range.contains(n) else { throw wrong(key, "an integer in \(range.lowerBound)...\(range.upperBound), not \(n)") }
        return Int(n)
    }

    /// An inline real (`encodeDouble:`); 0 when absent.
    public func double(_ key: String) throws -> Double {
        guard let raw = fields[key] else { return 0 }
        guard let n = raw as? NSNumber else { throw wrong(key, "a number") }
        return n.doubleValue
    }

    /// An inline boolean (`encodeBool:`); false when absent.
    public func bool(_ key: String) throws -> Bool {
        guard let raw = fields[key] else { return false }
        guard let n = raw as? NSNumber else { throw wrong(key, "a boolean") }
        return n.boolValue
    }

    /// An inline string (as `NSString` archives `NS.string`).
    func rawString(_ key: String) throws -> String {
        guard let raw = fields[key] else { throw wrong(key, "present") }
        if let s = raw as? String { return s }
        if let d = raw as? Data, let s = String(data: d, encoding: .utf8) { return s }
        // NSURL archives NS.relative as a reference to a string object.
        if let uid = KeyedArchiveReader.uid(raw) {
            try reader.check(uid, "\(className).\(key)")
            if let s = reader.rawObject(uid) as? String { return s }
        }
        throw wrong(key, "a string")
    }

    /// Inline bytes (`NS.data`), also accepted as a reference to a data object.
    func rawData(_ key: String) throws -> Data {
        guard let raw = fields[key] else { throw wrong(key, "present") }
        if let d = raw as? Data { return d }
        if let uid = KeyedArchiveReader.uid(raw) {
            try reader.check(uid, "\(className).\(key)")
            if let d = reader.rawObject(uid) as? Data { return d }
        }
        throw wrong(key, "data")
    }

    /// An array of references (`NS.objects`, `NS.keys`).
    func references(_ key: String) throws -> [Int] {
        guard let raw = fields[key] else { return [] }
        guard let array = raw as? [Any] else { throw wrong(key, "an array of references") }
        return try array.map { item in
            guard let uid = KeyedArchiveReader.uid(item) else { throw wrong(key, "an array of references") }
            try reader.check(uid, "\(className).\(key)")
            return uid
        }
    }

    /// The archived array, set or dictionary values at `key` as archived
    /// objects (each must be one), without decoding them to Swift values.
    public func objectList(_ key: String) throws -> [ArchivedObject] {
        guard let container = try object(key) else { return [] }
        switch container.className {
        case "NSArray", "NSMutableArray", "NSSet", "NSMutableSet", "NSOrderedSet", "NSMutableOrderedSet",
             "NSDictionary", "NSMutableDictionary":
            return try container.references("NS.objects").map { try reader.object($0) }
        case "NSKnownKeysDictionary1":
            return try reader.object(try container.reference("values")).references("NS.objects").map { try reader.object($0) }
        default:
            throw wrong(key, "an array, set or dictionary (found \(container.className))")
        }
    }
}
