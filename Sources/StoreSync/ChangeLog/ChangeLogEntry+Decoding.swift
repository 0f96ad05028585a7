import Foundation

// The change log's JSON shape read back: the daemon's `log` stream
// (docs/CONTROL.md) sends entries in the CHANGELOG-FORMAT shape, and
// storesyncctl prints them exactly as it prints entries it read from the
// files itself.

extension ChangeLogEntry {
    /// What JSON alone cannot tell of a value: for each change (in order),
    /// property name → the `StoredValue` kind of its old and new values when
    /// it is not the one the JSON type gives (`date`, `data`, `decimal`,
    /// `double`, `uuid`, `uri`, `object`, `other`). Strings, integers,
    /// booleans and nil need no entry; to-manys are global IDs already.
    ///
    /// ```swift
    /// let kinds = entry.valueKinds                      // [["due": "date", "folder": "object"]]
    /// let back = try ChangeLogEntry(jsonObject: entry.jsonObject, valueKinds: kinds)
    /// ```
    public var valueKinds: [[String: String]] {
        changes.map { change in
            var kinds: [String: String] = [:]
            for property in change.properties where !property.isToMany {
                if let kind = (property.new?.wireKind ?? property.old?.wireKind) { kinds[property.name] = kind }
            }
            return kinds
        }
    }

    /// Reads an entry back from `jsonObject`'s form and `valueKinds`. It
    /// prints as the original (`jsonLine`, and as people see it); times and
    /// date values come back to the millisecond, as JSON carries them.
    /// - Throws: `ChangeLogError.badEntry` naming the field that is missing
    ///   or of the wrong type.
    public init(jsonObject object: [String: Any], valueKinds: [[String: String]] = []) throws {
        func field<T>(_ name: String, _ type: T.Type, in object: [String: Any] = object) throws -> T {
            guard let value = object[name] as? T else { throw ChangeLogError.badEntry("field \(name) is missing or not a \(T.self)") }
            return value
        }
        func optional<T>(_ name: String, _ type: T.Type, in object: [String: Any] = object) throws -> T? {
            guard let value = object[name], !(value is NSNull) else { return nil }
            guard let typed = value as? T else { throw ChangeLogError.badEntry("field \(name) is not a \(T.self)") }
            return typed
        }
        func integer(_ value: Any?, _ name: String) throws -> Int64 {
            if let v = value as? Int64, type(of: value!) == Int64.self { return v }
            if let v = value as? Int, type(of: value!) == Int.self { return Int64(v) }
            if let number = value as? NSNumber, type(of: value!) != Bool.self, String(cString: number.objCType) != "c" { return number.int64Value }
            throw ChangeLogError.badEntry("field \(name) is not an integer")
        }
        func uuid(_ text: Any?, _ name: String) throws -> UUID {
            guard let text = text as? String, let id = UUID(uuidString: text) else { throw ChangeLogError.badEntry("field \(name) is not a global ID") }
            return id
        }
        let group = try optional("group", String.self)
        let store = try optional("store", String.self)
        guard group != nil || store != nil else { throw ChangeLogError.badEntry("fields group and store are both null: no source") }
        source = ChangeLogSource(group: group, store: store)
        position = try integer(object["position"], "position")
        cursor = try ChangeLogPosition(parsing: try field("cursor", String.self))
        guard let time = StoredValue.isoFormatter.date(from: try field("time", String.self)) else {
            throw ChangeLogError.badEntry("field time is not an ISO 8601 time")
        }
        timestamp = time
        author = try optional("author", String.self)
        contextName = try optional("context", String.self)
        transactionNumber = try object["transaction"].flatMap { $0 is NSNull ? nil : try integer($0, "transaction") }
        if let engine = try optional("engine", [String: Any].self) {
            switch try field("write", String.self, in: engine) {
            case "pull": engineWrite = .pull(store: try field("store", String.self, in: engine))
            case "push": engineWrite = .push(hubPosition: try integer(engine["hubPosition"], "engine.hubPosition"))
            case "hub": engineWrite = .hub
            default: engineWrite = .other(contextName)
            }
        } else {
            engineWrite = nil
        }
        conflicts = try (try field("conflicts", [Any].self)).map { try integer($0, "conflicts") }
        conflictEvents = try (try field("conflictEvents", [[String: Any]].self)).map { event in
            let id = try integer(event["id"], "conflictEvents.id")
            switch try field("event", String.self, in: event) {
            case "recorded":
                return .recorded(id: id, store: try field("store", String.self, in: event), object: try uuid(event["object"], "conflictEvents.object"),
                                 entity: try field("entity", String.self, in: event), kind: try field("kind", String.self, in: event))
            case "resolved":
                return .resolved(id: id, taking: try field("taking", String.self, in: event))
            case let other:
                throw ChangeLogError.badEntry("conflictEvents: unknown event \(other)")
            }
        }
        changes = try (try field("changes", [[String: Any]].self)).enumerated().map { index, change in
            guard let kind = ChangeLogChange.Kind(rawValue: try field("type", String.self, in: change)) else {
                throw ChangeLogError.badEntry("changes[\(index)].type is not insert, update or delete")
            }
            let kinds = index < valueKinds.count ? valueKinds[index] : [:]
            let properties = try field("properties", [String: [String: Any]].self, in: change)
            // The JSON object has no order; the log's own order is by name.
            let parts = try properties.keys.sorted().map { name -> ChangeLogPropertyChange in
                let part = properties[name]!
                if part["added"] != nil || part["removed"] != nil {
                    var positions: [UUID: Int] = [:]
                    for (id, position) in (part["positions"] as? [String: Any]) ?? [:] {
                        positions[try uuid(id, "\(name).positions")] = Int(try integer(position, "\(name).positions"))
                    }
                    return ChangeLogPropertyChange(name: name,
                                                   added: try ((part["added"] as? [Any]) ?? []).map { try uuid($0, "\(name).added") },
                                                   removed: try ((part["removed"] as? [Any]) ?? []).map { try uuid($0, "\(name).removed") },
                                                   positions: positions, isToMany: true)
                }
                return ChangeLogPropertyChange(name: name,
                                               old: try part["old"].map { try StoredValue(wire: $0, kind: kinds[name], property: name) },
                                               new: try part["new"].map { try StoredValue(wire: $0, kind: kinds[name], property: name) })
            }
            return ChangeLogChange(kind: kind, entity: try field("entity", String.self, in: change),
                                   globalIdentifier: try uuid(change["object"], "changes[\(index)].object"), properties: parts)
        }
    }
}

extension StoredValue {
    /// The kind `valueKinds` names, or nil when the JSON type says it.
    var wireKind: String? {
        switch self {
        case .null, .bool, .integer, .string, .objects: return nil
        case .double: return "double"
        case .decimal: return "decimal"
        case .date: return "date"
        case .data: return "data"
        case .uuid: return "uuid"
        case .uri: return "uri"
        case .object: return "object"
        case .other: return "other"
        }
    }

    /// A value from `jsonValue`'s form and its `wireKind`.
    init(wire value: Any, kind: String?, property: String) throws {
        func bad() -> ChangeLogError { ChangeLogError.badEntry("property \(property): \(value) is not a value of kind \(kind ?? "(from JSON)")") }
        if value is NSNull { self = .null; return }
        switch kind {
        case nil:
            // Native values (a `jsonObject`, the daemon's client) say their
            // type; JSONSerialization's NSNumbers say it in `objCType`.
            switch value {
            case let v as Bool where type(of: value) == Bool.self: self = .bool(v)
            case let v as Int64 where type(of: value) == Int64.self: self = .integer(v)
            case let v as Int where type(of: value) == Int.self: self = .integer(Int64(v))
            case let number as NSNumber:
                self = String(cString: number.objCType) == "c" ? .bool(number.boolValue) : .integer(number.int64Value)
            case let text as String: self = .string(text)
            default: throw bad()
            }
        case "double"?:
            if let text = value as? String {
                switch text {
                case "nan": self = .double(.nan)
                case "inf": self = .double(.infinity)
                case "-inf": self = .double(-.infinity)
                default: throw bad()
                }
            } else if let number = value as? NSNumber {
                self = .double(number.doubleValue)
            } else {
                throw bad()
            }
        case "decimal"?:
            guard let text = value as? String, let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else { throw bad() }
            self = .decimal(decimal)
        case "date"?:
            guard let text = value as? String, let date = Self.isoFormatter.date(from: text) else { throw bad() }
            self = .date(date)
        case "data"?:
            guard let text = value as? String, let data = Data(base64Encoded: text) else { throw bad() }
            self = .data(data)
        case "uuid"?, "object"?:
            guard let text = value as? String, let id = UUID(uuidString: text) else { throw bad() }
            self = kind == "uuid" ? .uuid(id) : .object(id)
        case "uri"?:
            guard let text = value as? String, let url = URL(string: text) else { throw bad() }
            self = .uri(url)
        case "other"?:
            guard let text = value as? String else { throw bad() }
            self = .other(text)
        default:
            throw bad()
        }
    }
}
