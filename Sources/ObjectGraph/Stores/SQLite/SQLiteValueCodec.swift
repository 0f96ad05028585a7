import Foundation

/// Converts attribute values between their Swift types (see
/// `AttributeDescription`) and what Core Data's SQLite columns hold.
///
/// | Attribute | Column | Stored as |
/// |---|---|---|
/// | integer 16/32/64 | INTEGER | integer |
/// | boolean | INTEGER | 0 or 1 |
/// | decimal | DECIMAL | its decimal text (NUMERIC affinity keeps it exact or makes it a real) |
/// | double, float | FLOAT | real |
/// | date | TIMESTAMP | real, seconds since 2001-01-01 (as in Apple's fixtures) |
/// | string | VARCHAR | text |
/// | URI | VARCHAR | absolute string |
/// | UUID | BLOB | 16 bytes |
/// | binary | BLOB | bytes; with external storage allowed, framed (`ExternalBinaryFrame`) by the store |
/// | transformable | BLOB | the transformer's data |
///
/// ```swift
/// let stored = try SQLiteValueCodec.encode(Date(timeIntervalSinceReferenceDate: 60), for: lastUpdate)  // .real(60)
/// let value = try SQLiteValueCodec.decode(stored, for: lastUpdate) as? Date
/// ```
public enum SQLiteValueCodec {
    /// The column value for an attribute value (nil → NULL).
    /// - Throws: 134030 when the value is not of the attribute's type.
    public static func encode(_ value: Any?, for attribute: AttributeDescription) throws -> SQLiteValue {
        guard let value, !isNSNull(value) else { return .null }
        func mismatch() -> CoreDataError {
            CoreDataError(.persistentStoreSave,
                          "value \(value) (\(type(of: value))) cannot be stored in \(attribute.entity?.name ?? "?").\(attribute.name) of type \(attribute.attributeType.xcodeName)",
                          userInfo: [CoreDataError.propertyNameErrorKey: attribute.name])
        }
        switch attribute.attributeType {
        case .integer16, .integer32, .integer64:
            guard let n = integer(value) else { throw mismatch() }
            return .integer(n)
        case .boolean:
            if let b = value as? Bool { return .integer(b ? 1 : 0) }
            guard let n = integer(value) else { throw mismatch() }
            return .integer(n == 0 ? 0 : 1)
        case .decimal:
            if let d = value as? Decimal { return .text(NSDecimalNumber(decimal: d).stringValue) }
            if let n = integer(value) { return .text(String(n)) }
            if let d = value as? Double { return .real(d) }
            throw mismatch()
        case .double:
            if let d = value as? Double { return .real(d) }
            if let f = value as? Float { return .real(Double(f)) }
            if let n = value as? NSNumber { return .real(n.doubleValue) }
            throw mismatch()
        case .float:
            if let f = value as? Float { return .real(Double(f)) }
            if let d = value as? Double { return .real(Double(Float(d))) }
            if let n = value as? NSNumber { return .real(Double(n.floatValue)) }
            throw mismatch()
        case .string:
            guard let s = value as? String else { throw mismatch() }
            return .text(s)
        case .date:
            guard let d = value as? Date else { throw mismatch() }
            return .real(d.timeIntervalSinceReferenceDate)
        case .binaryData:
            guard let d = value as? Data else { throw mismatch() }
            return .blob(d)
        case .uuid:
            guard let u = value as? UUID else { throw mismatch() }
            return .blob(withUnsafeBytes(of: u.uuid) { Data($0) })
        case .uri:
            guard let u = value as? URL else { throw mismatch() }
            return .text(u.absoluteString)
        case .transformable:
            guard let transformer = ValueTransformerRegistry.shared.transformer(for: attribute) else {
                throw CoreDataError(.persistentStoreSave, "no value transformer named '\(attribute.valueTransformerName ?? "")' for \(attribute.name)")
            }
            do {
                return try transformer.transformedValue(value).map(SQLiteValue.blob) ?? .null
            } catch {
                throw CoreDataError(.persistentStoreSave, "transforming \(attribute.name) failed: \(error)",
                                    userInfo: [CoreDataError.underlyingErrorKey: error])
            }
        case .undefined, .objectID:
            throw mismatch()
        }
    }

    /// The attribute value for a column value (NULL → nil).
    /// - Throws: 134060 when the stored value cannot be read as the
    ///   attribute's type (a column written by something else).
    public static func decode(_ stored: SQLiteValue, for attribute: AttributeDescription) throws -> Any? {
        if stored.isNull { return nil }
        func unreadable() -> CoreDataError {
            CoreDataError(.coreData, "stored value \(stored) of \(attribute.entity?.name ?? "?").\(attribute.name) is not a \(attribute.attributeType.xcodeName)",
                          userInfo: [CoreDataError.propertyNameErrorKey: attribute.name])
        }
        switch attribute.attributeType {
        case .integer16:
            guard let n = storedInteger(stored) else { throw unreadable() }
            return Int16(truncatingIfNeeded: n)
        case .integer32:
            guard let n = storedInteger(stored) else { throw unreadable() }
            return Int32(truncatingIfNeeded: n)
        case .integer64:
            guard let n = storedInteger(stored) else { throw unreadable() }
            return n
        case .boolean:
            guard let n = storedInteger(stored) else { throw unreadable() }
            return n != 0
        case .decimal:
            switch stored {
            case .integer(let n): return Decimal(n)
            case .real(let d): return Decimal(string: String(d), locale: Locale(identifier: "en_US_POSIX")) ?? Decimal(d)
            case .text(let s):
                guard let d = Decimal(string: s, locale: Locale(identifier: "en_US_POSIX")) else { throw unreadable() }
                return d
            default: throw unreadable()
            }
        case .double:
            guard let d = stored.doubleValue ?? stored.stringValue.flatMap(Double.init) else { throw unreadable() }
            return d
        case .float:
            guard let d = stored.doubleValue ?? stored.stringValue.flatMap(Double.init) else { throw unreadable() }
            return Float(d)
        case .string:
            switch stored {
            case .text(let s): return s
            case .integer(let n): return String(n)
            case .real(let d): return String(d)
            case .blob(let data): return String(decoding: data, as: UTF8.self)
            case .null: return nil
            }
        case .date:
            guard let seconds = stored.doubleValue else { throw unreadable() }
            return Date(timeIntervalSinceReferenceDate: seconds)
        case .binaryData:
            switch stored {
            case .blob(let d): return d
            case .text(let s): return Data(s.utf8)
            default: throw unreadable()
            }
        case .uuid:
            switch stored {
            case .blob(let d) where d.count == 16:
                var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
                withUnsafeMutableBytes(of: &bytes) { $0.copyBytes(from: d) }
                return UUID(uuid: bytes)
            case .text(let s):
                guard let u = UUID(uuidString: s) else { throw unreadable() }
                return u
            default: throw unreadable()
            }
        case .uri:
            guard let s = stored.stringValue, let url = URL(string: s) else { throw unreadable() }
            return url
        case .transformable:
            guard let data = stored.dataValue else { throw unreadable() }
            guard let transformer = ValueTransformerRegistry.shared.transformer(for: attribute) else {
                throw CoreDataError(.coreData, "no value transformer named '\(attribute.valueTransformerName ?? "")' for \(attribute.name)")
            }
            do {
                return try transformer.reverseTransformedValue(data)
            } catch {
                throw CoreDataError(.coreData, "reverse-transforming \(attribute.name) failed: \(error)",
                                    userInfo: [CoreDataError.underlyingErrorKey: error])
            }
        case .undefined, .objectID:
            throw unreadable()
        }
    }

    // MARK: - External binary storage framing

    /// What the BLOB column of an attribute that allows external storage
    /// (`allowsExternalBinaryDataStorage`) holds, in Core Data's framing:
    /// a marker byte, then either the value's bytes (0x01) or the name of
    /// the file holding them (0x02: a UUID in ASCII, NUL-terminated) in the
    /// store's `.<StoreName>_SUPPORT/_EXTERNAL_DATA/` folder. See
    /// SQLITE-LAYOUT.md ("External binary storage") for the sources.
    ///
    /// ```swift
    /// let column = SQLiteValueCodec.ExternalBinaryFrame.inline(Data([7, 8])).encoded   // 01 07 08
    /// SQLiteValueCodec.ExternalBinaryFrame(decoding: column)                             // .inline(07 08)
    /// ```
    public enum ExternalBinaryFrame: Equatable, Sendable {
        case inline(Data)
        /// The external file's name (an uppercase UUID string).
        case external(String)

        public static let inlineMarker: UInt8 = 0x01
        public static let externalMarker: UInt8 = 0x02

        /// The framed column bytes.
        public var encoded: Data {
            switch self {
            case .inline(let bytes):
                var out = Data(capacity: bytes.count + 1)
                out.append(Self.inlineMarker)
                out.append(bytes)
                return out
            case .external(let name):
                var out = Data([Self.externalMarker])
                out.append(contentsOf: Array(name.utf8))
                out.append(0)
                return out
            }
        }

        /// Reads a framed column. Nil for bytes that are not framed: an
        /// empty BLOB, an unknown marker, or a reference that is not a UUID
        /// (a file name is never taken from the column unchecked, so a
        /// crafted row cannot point outside `_EXTERNAL_DATA`). A reference
        /// is accepted with or without its NUL terminator.
        public init?(decoding column: Data) {
            guard let marker = column.first else { return nil }
            let rest = column.dropFirst()
            switch marker {
            case Self.inlineMarker:
                self = .inline(Data(rest))
            case Self.externalMarker:
                let text = rest.last == 0 ? rest.dropLast() : rest
                guard let name = String(bytes: text, encoding: .ascii), UUID(uuidString: name) != nil else { return nil }
                self = .external(name)
            default:
                return nil
            }
        }
    }

    /// Whether `value` is `NSNull`, compared by type: on Linux `value is
    /// NSNull` tries to bridge a Swift number or string to an object first,
    /// which cost more than the rest of encoding a row put together.
    @inline(__always)
    static func isNSNull(_ value: Any) -> Bool {
        type(of: value) == NSNull.self
    }

    private static func integer(_ value: Any) -> Int64? {
        switch value {
        case let n as Int64: return n
        case let n as Int32: return Int64(n)
        case let n as Int16: return Int64(n)
        case let n as Int: return Int64(n)
        case let n as Int8: return Int64(n)
        case let n as UInt8: return Int64(n)
        case let n as UInt16: return Int64(n)
        case let n as UInt32: return Int64(n)
        case let b as Bool: return b ? 1 : 0
        case let n as NSNumber: return n.int64Value
        default: return nil
        }
    }

    private static func storedInteger(_ stored: SQLiteValue) -> Int64? {
        switch stored {
        case .integer(let n): return n
        case .real(let d): return Int64(exactly: d.rounded(.towardZero))
        case .text(let s): return Int64(s)
        default: return nil
        }
    }
}
