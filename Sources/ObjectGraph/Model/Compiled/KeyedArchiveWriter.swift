import Foundation

/// Builds an `NSKeyedArchiver` archive (`$archiver`, `$version` 100000,
/// `$top`, `$objects` with `$class` records) as Apple's archiver lays it out,
/// and serialises it as a binary property list.
///
/// References are written as `{"CF$UID": n}` dictionaries, serialised to
/// XML, and read back: Foundation's XML reader turns such dictionaries into
/// real UIDs, which its binary writer then emits with the UID marker Apple's
/// unarchiver expects (a dictionary would not do).
///
/// ```swift
/// let writer = KeyedArchiveWriter()
/// let root = writer.reserve()
/// writer.fill(root, className: "Thing", fields: ["name": writer.value("x")])
/// let data = try writer.finish(root: root)
/// ```
public final class KeyedArchiveWriter {
    private var objects: [Any] = ["$null"]
    private var classRecords: [String: Int] = [:]
    private var strings: [String: Int] = [:]

    public init() {}

    /// A reference to object `uid`, as stored in a field.
    public func reference(_ uid: Int) -> [String: Any] { ["CF$UID": uid] }

    /// The `$null` reference.
    public var null: [String: Any] { reference(0) }

    /// A slot for an object filled later, so objects can refer to each
    /// other (an entity to its properties and back).
    public func reserve() -> Int {
        objects.append("$null")
        return objects.count - 1
    }

    /// Fills a reserved slot with an instance of `className`; `superclasses`
    /// completes `$classes` (NSObject is added).
    public func fill(_ uid: Int, className: String, superclasses: [String] = [], fields: [String: Any]) {
        var record = fields
        record["$class"] = reference(classRecord(className, superclasses))
        objects[uid] = record
    }

    /// Appends a new instance and returns its reference.
    public func object(_ className: String, superclasses: [String] = [], fields: [String: Any]) -> [String: Any] {
        let uid = reserve()
        fill(uid, className: className, superclasses: superclasses, fields: fields)
        return reference(uid)
    }

    private func classRecord(_ name: String, _ superclasses: [String]) -> Int {
        if let uid = classRecords[name] { return uid }
        objects.append(["$classname": name, "$classes": [name] + superclasses + ["NSObject"]])
        classRecords[name] = objects.count - 1
        return objects.count - 1
    }

    /// A Foundation value as Apple's archiver writes it: strings, numbers and
    /// data inline in `$objects`; dates, UUIDs, URLs, decimals, arrays, sets
    /// and dictionaries as instances. Throws for anything else.
    public func value(_ value: Any?) throws -> [String: Any] {
        guard let value else { return null }
        switch value {
        case let s as String:
            if let uid = strings[s] { return reference(uid) }
            objects.append(s)
            strings[s] = objects.count - 1
            return reference(objects.count - 1)
        case let b as Bool: return inline(b)
        case let n as Int: return inline(n)
        case let n as Int16: return inline(Int(n))
        case let n as Int32: return inline(Int(n))
        case let n as Int64: return inline(n)
        case let d as Double: return inline(d)
        case let f as Float: return inline(Double(f))
        case let d as Data: return inline(d)
        case let d as Date: return object("NSDate", fields: ["NS.time": d.timeIntervalSinceReferenceDate])
        case let u as UUID:
            return object("NSUUID", fields: ["NS.uuidbytes": withUnsafeBytes(of: u.uuid) { Data($0) }])
        case let u as URL:
            return object("NSURL", fields: ["NS.base": null, "NS.relative": try self.value(u.absoluteString)])
        case let d as Decimal:
            return try decimal(d)
        case let list as [Any?]:
            return object("NSArray", fields: ["NS.objects": try list.map { try self.value($0) }])
        case let set as Set<AnyHashable>:
            return object("NSSet", fields: ["NS.objects": try set.map { try self.value($0.base) }])
        case let dictionary as [String: Any?]:
            let keys = dictionary.keys.sorted()
            return object("NSDictionary", fields: ["NS.keys": try keys.map { try self.value($0) },
                                                   "NS.objects": try keys.map { try self.value(dictionary[$0] ?? nil) }])
        default:
            throw CoreDataError(.coreData, "cannot archive a value of type \(type(of: value))")
        }
    }

    private func inline(_ v: Any) -> [String: Any] {
        objects.append(v)
        return reference(objects.count - 1)
    }

    /// `NSDecimalNumber`'s keyed form: exponent, length, sign, compactness
    /// and the 128-bit mantissa as little-endian bytes.
    private func decimal(_ d: Decimal) throws -> [String: Any] {
        // Decimal's stored fields are not public here: rebuild the mantissa
        // from the significand, which must fit 64 bits (defaults and bounds do).
        let significand = d.significand.magnitude
        let mantissa = NSDecimalNumber(decimal: significand).uint64Value
        guard Decimal(mantissa) == significand, d.exponent >= -128, d.exponent <= 127 else {
            throw CoreDataError(.coreData, "cannot archive decimal \(d): its significand needs more than 64 bits")
        }
        var bytes = Data()
        for shift in stride(from: 0, to: 128, by: 8) { bytes.append(shift < 64 ? UInt8(truncatingIfNeeded: mantissa >> UInt64(shift)) : 0) }
        let words = mantissa == 0 ? 0 : (64 - mantissa.leadingZeroBitCount + 15) / 16
        return object("NSDecimalNumber", superclasses: ["NSNumber", "NSValue"], fields: [
            "NS.exponent": d.exponent, "NS.length": words, "NS.negative": d.sign == .minus && !d.isZero,
            "NS.compact": true, "NS.mantissa.bo": 1, "NS.mantissa": bytes,
        ])
    }

    /// The archive as a binary property list, `root` under `$top`.
    public func finish(root: Int) throws -> Data {
        let plist: [String: Any] = [
            "$archiver": "NSKeyedArchiver", "$version": 100000,
            "$top": ["root": reference(root)], "$objects": objects,
        ]
        do {
            let xml = try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0)
            let withUIDs = try PropertyListSerialization.propertyList(from: xml, options: [], format: nil)
            return try PropertyListSerialization.data(fromPropertyList: withUIDs, format: .binary, options: 0)
        } catch {
            throw CoreDataError(.coreData, "cannot serialise the keyed archive: \(error)", userInfo: [CoreDataError.underlyingErrorKey: error])
        }
    }
}
