import Foundation

/// What goes into one record and how values are spelled in each format
/// (docs/EXTERNAL-RECORDS.md, "File contents").
///
/// A record is one dictionary: the header keys below, `indexed` (the names
/// of the properties indexers should index, PD-11) and `values` (exported
/// property name → value, PC-43). Values keep their type where the format
/// has one (numbers, booleans, strings; dates and data in property lists)
/// and are strings otherwise: decimals, UUIDs and URIs as text, dates in
/// JSON as ISO 8601 UTC with microseconds, data in JSON as base64,
/// relationships as the object URIs of their destinations (an array for a
/// to-many). A nil value is JSON null and left out of property lists,
/// which cannot hold one.
enum ExternalRecordContent {
    // Header keys.
    static let entityKey = "entity"
    static let uriKey = "uri"
    static let storeKey = "store"
    static let idKey = "id"
    static let globalIdentifierKey = "globalIdentifier"
    static let modifiedKey = "modified"
    static let indexedKey = "indexed"
    static let valuesKey = "values"

    /// The value of a property as the writer reads it: attribute values in
    /// their Swift types, to-one destinations as `ManagedObjectID`, to-many
    /// members as `[ManagedObjectID]`.
    struct Source {
        var objectID: ManagedObjectID
        var globalIdentifier: UUID?
        var values: [String: Any]
    }

    /// The record's `id`: the global identifier when the store records
    /// history (stable across stores and syncs), else `<store>_<Entity>_<pk>`;
    /// both use only the characters search engines allow in document ids.
    static func documentID(_ objectID: ManagedObjectID, globalIdentifier: UUID?) -> String {
        if let globalIdentifier { return globalIdentifier.uuidString }
        return "\(objectID.storeIdentifier ?? "")_\(objectID.entity.name)_\(objectID.primaryKey ?? 0)"
    }

    /// `id.uriRepresentation.absoluteString` without making a URL (which
    /// cost more than the rest of a record): entity names that are plain
    /// identifiers need no escaping.
    static func uriString(_ id: ManagedObjectID) -> String {
        guard let key = id.primaryKey else { return id.uriRepresentation.absoluteString }
        let name = id.entity.name
        let plain = name.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F }
        guard plain else { return id.uriRepresentation.absoluteString }
        return "x-coredata://\(id.storeIdentifier ?? "")/\(name)/p\(key)"
    }

    /// What one entity exports.
    struct Plan {
        /// Exported properties, sorted by name.
        var properties: [PropertyDescription]
        var indexed: [String]
        /// The property whose value titles the plain-text rendering.
        var titleKey: String?
        var names: Set<String>
        var relationships: [RelationshipDescription] { properties.compactMap { $0 as? RelationshipDescription } }

        init(entity: EntityDescription, exportsAllAttributesWhenNoneFlagged: Bool) {
            // PD-12a: transients are never exported; the store ignores them too.
            let stored = entity.properties.filter { property in
                guard !property.isTransient, !(property is FetchedPropertyDescription) else { return false }
                if let attribute = property as? AttributeDescription { return Plan.isExportable(attribute.attributeType) }
                return true
            }
            let flagged = stored.filter { $0.isStoredInExternalRecord || $0.isIndexedBySpotlight }
            let chosen: [PropertyDescription]
            if !flagged.isEmpty {
                chosen = flagged
                indexed = flagged.filter(\.isIndexedBySpotlight).map(\.name).sorted()
            } else if exportsAllAttributesWhenNoneFlagged {
                chosen = stored.filter { $0 is AttributeDescription }
                // Nothing flagged either way: everything exported is for indexing.
                indexed = chosen.map(\.name).sorted()
            } else {
                chosen = []
                indexed = []
            }
            properties = chosen.sorted { $0.name < $1.name }
            names = Set(properties.map(\.name))
            let strings = properties.filter { ($0 as? AttributeDescription)?.attributeType == .string }
            titleKey = (strings.first { indexed.contains($0.name) } ?? strings.first)?.name
        }

        /// Object-ID attributes name objects of the exporting store, which an
        /// import cannot map; undefined attributes are transient.
        static func isExportable(_ type: AttributeType) -> Bool {
            type != .objectID && type != .undefined
        }
    }

    // MARK: - Building a record

    /// `modified` is the value to store: `modifiedValue(_:format:)`, made once per batch.
    static func record(for source: Source, plan: Plan, format: ExternalRecordFormat, modified: Any) -> [String: Any] {
        let id = source.objectID
        var values: [String: Any] = [:]
        for property in plan.properties {
            let value = encode(source.values[property.name], of: property, format: format)
            if let value { values[property.name] = value } else if format == .json { values[property.name] = NSNull() }
        }
        var record: [String: Any] = [
            entityKey: id.entity.name,
            uriKey: uriString(id),
            storeKey: id.storeIdentifier ?? "",
            idKey: documentID(id, globalIdentifier: source.globalIdentifier),
            modifiedKey: modified,
            indexedKey: plan.indexed,
            valuesKey: values,
        ]
        if let gid = source.globalIdentifier { record[globalIdentifierKey] = gid.uuidString }
        return record
    }

    static func modifiedValue(_ date: Date, format: ExternalRecordFormat) -> Any {
        format == .json ? ISO8601Microseconds.string(from: date) : date
    }

    /// One value in the format's spelling; nil for nil (and for a
    /// transformable value its transformer cannot turn into data).
    static func encode(_ value: Any?, of property: PropertyDescription, format: ExternalRecordFormat) -> Any? {
        guard let value = nilIfNSNull(value) else { return nil }
        if property is RelationshipDescription {
            if let target = value as? ManagedObjectID { return uriString(target) }
            if let targets = value as? [ManagedObjectID] { return targets.map(uriString) }
            return nil
        }
        let json = format == .json
        switch value {
        case let v as String: return v
        case let v as Bool: return v
        case let v as Int16: return Int(v)
        case let v as Int32: return Int(v)
        case let v as Int64: return Int(v)
        case let v as Int: return v
        case let v as Double: return json && !v.isFinite ? nonFinite(v) : v
        case let v as Float:
            // The shortest decimal that reads back as this Float, not its widened Double.
            return json && !v.isFinite ? nonFinite(Double(v)) : (Double(String(v)) ?? Double(v))
        case let v as Decimal: return NSDecimalNumber(decimal: v).description(withLocale: Locale(identifier: "en_US_POSIX"))
        case let v as Date: return json ? ISO8601Microseconds.string(from: v) : v
        case let v as Data: return json ? v.base64EncodedString() : v
        case let v as UUID: return v.uuidString
        case let v as URL: return v.absoluteString
        default:
            guard let attribute = property as? AttributeDescription, attribute.attributeType == .transformable,
                  let transformer = ValueTransformerRegistry.shared.transformer(for: attribute),
                  let data = try? transformer.transformedValue(value) else { return nil }
            return json ? data.base64EncodedString() : data
        }
    }

    private static func nonFinite(_ v: Double) -> String { v.isNaN ? "NaN" : (v > 0 ? "Infinity" : "-Infinity") }

    // MARK: - Serializing

    static func data(of record: [String: Any], format: ExternalRecordFormat) throws -> Data {
        switch format {
        case .json:
            if let data = RecordJSONWriter.data(of: record) { return data }
            var data = try JSONSerialization.data(withJSONObject: record, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
            data.append(0x0A)
            return data
        case .xml:
            return try PropertyListSerialization.data(fromPropertyList: record, format: .xml, options: 0)
        case .binary:
            return try PropertyListSerialization.data(fromPropertyList: record, format: .binary, options: 0)
        }
    }

    /// A record file's dictionary, whatever its format: JSON when it starts
    /// with `{`, else a property list (XML or binary).
    static func parse(_ data: Data) throws -> (record: [String: Any], format: ExternalRecordFormat) {
        let first = data.first { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }
        if first == UInt8(ascii: "{") {
            guard let record = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                throw CocoaError(.propertyListReadCorrupt)
            }
            return (record, .json)
        }
        var format = PropertyListSerialization.PropertyListFormat.xml
        guard let record = try PropertyListSerialization.propertyList(from: data, options: [], format: &format) as? [String: Any] else {
            throw CocoaError(.propertyListReadCorrupt)
        }
        return (record, format == .binary ? .binary : .xml)
    }

    /// The plain-text rendering: a title line, then `name: value` per exported
    /// property (values on one line), then the entity and URI.
    static func plainText(of record: [String: Any], plan: Plan) -> String {
        let values = record[valuesKey] as? [String: Any] ?? [:]
        let entity = record[entityKey] as? String ?? ""
        let uri = record[uriKey] as? String ?? ""
        var title = plan.titleKey.flatMap { values[$0] as? String } ?? ""
        if title.isEmpty { title = "\(entity) \(uri)" }
        var text = oneLine(title) + "\n\n"
        for property in plan.properties {
            guard let value = values[property.name], !isNSNull(value) else { continue }
            text += "\(property.name): \(oneLine(render(value)))\n"
        }
        text += "entity: \(entity)\nuri: \(uri)\n"
        return text
    }

    private static func render(_ value: Any) -> String {
        switch value {
        case let v as String: return v
        case let v as Date: return ISO8601Microseconds.string(from: v)
        case let v as Data: return "\(v.count) bytes"
        case let v as [String]: return v.joined(separator: " ")
        case let v as Bool: return v ? "true" : "false"
        default: return "\(value)"
        }
    }

    private static func oneLine(_ s: String) -> String {
        s.contains(where: \.isNewline) ? s.split(whereSeparator: \.isNewline).joined(separator: " ") : s
    }

    // MARK: - Reading values back (import)

    /// The value of `attribute` a record holds, in the attribute's Swift
    /// type; throws a message naming the problem for a value of the wrong form.
    static func decode(_ raw: Any, attribute: AttributeDescription) throws -> Any? {
        if isNSNull(raw) { return nil }
        func fail() -> ImportValueError { ImportValueError(message: "value \(String(describing: raw).prefix(80)) is not a valid \(attribute.attributeType.xcodeName) for '\(attribute.name)'") }
        func double() -> Double? {
            if let s = raw as? String {
                switch s {
                case "NaN": return .nan
                case "Infinity": return .infinity
                case "-Infinity": return -.infinity
                default: return Double(s)
                }
            }
            return (raw as? NSNumber)?.doubleValue
        }
        func integer<T: FixedWidthInteger>(_: T.Type) throws -> T {
            // JSON and property lists give NSNumber; exact integers only.
            if let n = raw as? NSNumber {
                let i = n.int64Value
                if Double(i) == n.doubleValue, let v = T(exactly: i) { return v }
            }
            if let s = raw as? String, let v = T(s) { return v }
            throw fail()
        }
        switch attribute.attributeType {
        case .integer16: return try integer(Int16.self)
        case .integer32: return try integer(Int32.self)
        case .integer64: return try integer(Int64.self)
        case .decimal:
            if let s = raw as? String, let d = Decimal(string: s, locale: Locale(identifier: "en_US_POSIX")) { return d }
            if let n = raw as? NSNumber { return n.decimalValue }
            throw fail()
        case .double:
            guard let d = double() else { throw fail() }
            return d
        case .float:
            guard let d = double() else { throw fail() }
            return Float(d)
        case .string:
            guard let s = raw as? String else { throw fail() }
            return s
        case .boolean:
            if let b = raw as? Bool { return b }
            if let n = raw as? NSNumber { return n.boolValue }
            throw fail()
        case .date:
            if let d = raw as? Date { return d }
            if let s = raw as? String, let d = ISO8601Microseconds.date(from: s) { return d }
            throw fail()
        case .binaryData:
            if let d = raw as? Data { return d }
            if let s = raw as? String, let d = Data(base64Encoded: s) { return d }
            throw fail()
        case .uuid:
            guard let s = raw as? String, let u = UUID(uuidString: s) else { throw fail() }
            return u
        case .uri:
            guard let s = raw as? String, let u = URL(string: s) else { throw fail() }
            return u
        case .transformable:
            let data: Data
            if let d = raw as? Data { data = d } else if let s = raw as? String, let d = Data(base64Encoded: s) { data = d } else { throw fail() }
            guard let transformer = ValueTransformerRegistry.shared.transformer(for: attribute) else {
                throw ImportValueError(message: "no value transformer for '\(attribute.name)'")
            }
            do { return try transformer.reverseTransformedValue(data) } catch { throw ImportValueError(message: "'\(attribute.name)': its transformer refused the data: \(error)") }
        case .objectID, .undefined:
            return nil
        }
    }

    struct ImportValueError: Error { var message: String }
}

/// ISO 8601 in UTC with six fractional digits, written and read by hand:
/// `ISO8601DateFormatter` keeps milliseconds only, and instances are not
/// safe to share between threads writing records.
enum ISO8601Microseconds {
    static func string(from date: Date) -> String {
        let t = date.timeIntervalSince1970
        var seconds = t.rounded(.down)
        var micros = ((t - seconds) * 1_000_000).rounded()
        if micros >= 1_000_000 { seconds += 1; micros -= 1_000_000 }
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        func pad(_ n: Int, _ width: Int) -> String {
            let s = String(n)
            return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
        }
        return "\(pad(Int(parts.tm_year) + 1900, 4))-\(pad(Int(parts.tm_mon) + 1, 2))-\(pad(Int(parts.tm_mday), 2))T"
            + "\(pad(Int(parts.tm_hour), 2)):\(pad(Int(parts.tm_min), 2)):\(pad(Int(parts.tm_sec), 2)).\(pad(Int(micros), 6))Z"
    }

    /// Reads `YYYY-MM-DDTHH:MM:SS[.fraction]Z`; nil for anything else.
    static func date(from string: String) -> Date? {
        let s = Array(string.utf8)
        guard s.count >= 20, s.last == UInt8(ascii: "Z"), s[4] == UInt8(ascii: "-"), s[7] == UInt8(ascii: "-"),
              s[10] == UInt8(ascii: "T"), s[13] == UInt8(ascii: ":"), s[16] == UInt8(ascii: ":") else { return nil }
        func int(_ from: Int, _ to: Int) -> Int? { Int(String(decoding: s[from..<to], as: UTF8.self)) }
        guard let year = int(0, 4), let month = int(5, 7), let day = int(8, 10), let hour = int(11, 13),
              let minute = int(14, 16), let second = int(17, 19) else { return nil }
        var fraction = 0.0
        if s[19] == UInt8(ascii: ".") {
            guard let f = Double("0" + String(decoding: s[19..<(s.count - 1)], as: UTF8.self)) else { return nil }
            fraction = f
        } else if s.count != 20 {
            return nil
        }
        var parts = tm()
        parts.tm_year = Int32(year - 1900); parts.tm_mon = Int32(month - 1); parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour); parts.tm_min = Int32(minute); parts.tm_sec = Int32(second)
        let seconds = timegm(&parts)
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }
}
