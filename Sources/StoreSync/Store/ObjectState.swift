import Foundation
import ObjectGraph

/// A property value as the engine carries it between stores: attributes as
/// their values, relationships by global identifier.
public enum SyncValue: @unchecked Sendable {
    case attribute(Any?)
    case toOne(UUID?)
    /// The complete membership of a to-many (in order when ordered).
    case members([UUID])
    /// A change of a to-many's membership, and positions of an ordered one.
    case memberChange(added: [UUID], removed: [UUID], positions: [UUID: Int])
}

/// An object's entity and stored values (complete, or the changed ones).
public struct ObjectState: @unchecked Sendable {
    public var entityName: String
    public var values: [String: SyncValue]

    public init(entityName: String, values: [String: SyncValue]) {
        self.entityName = entityName
        self.values = values
    }

    /// The objects `values` name as destinations or members (what a hub or
    /// a push loads before writing them).
    ///
    /// ```swift
    /// let needed = ObjectState.references(state.values)   // to-one destinations, members added or removed
    /// ```
    public static func references(_ values: [String: SyncValue]) -> [UUID] {
        var out: [UUID] = []
        for value in values.values {
            switch value {
            case .attribute: continue
            case .toOne(let gid): if let gid { out.append(gid) }
            case .members(let gids): out += gids
            case .memberChange(let added, let removed, _): out += added + removed
            }
        }
        return out
    }

    /// Whether two values are the same stored value (dictionaries and
    /// arrays compared by content, memberships as sets unless ordered).
    static func same(_ a: SyncValue?, _ b: SyncValue?) -> Bool {
        switch (a, b) {
        case (nil, nil): return true
        case let (.attribute(x)?, .attribute(y)?): return canonical(x) == canonical(y)
        case let (.toOne(x)?, .toOne(y)?): return x == y
        case let (.members(x)?, .members(y)?): return x == y
        default: return false
        }
    }

    /// Whether two attribute values are the same stored value: the common
    /// scalar types compared directly, anything else as canonical text.
    /// Public, so every hub tells an unchanged value the same way.
    ///
    /// ```swift
    /// ObjectState.sameAttribute(["a": 1, "b": 2] as [String: Any], ["b": 2, "a": 1] as [String: Any])   // true
    /// ```
    public static func sameAttribute(_ a: Any?, _ b: Any?) -> Bool {
        switch (a, b) {
        case (nil, nil): return true
        case (nil, let other?), (let other?, nil): return other is NSNull
        case let (x as String, y as String): return x == y
        case let (x as Int64, y as Int64): return x == y
        case let (x as Int32, y as Int32): return x == y
        case let (x as Int16, y as Int16): return x == y
        case let (x as Int, y as Int): return x == y
        case let (x as Double, y as Double): return x.bitPattern == y.bitPattern
        case let (x as Bool, y as Bool): return x == y
        case let (x as Date, y as Date): return x == y
        case let (x as Data, y as Data): return x == y
        case let (x as UUID, y as UUID): return x == y
        default: return canonical(a) == canonical(b)
        }
    }

    /// A value as comparable text that does not depend on a dictionary's
    /// iteration order (what conflicts record as base, incoming and hub values).
    ///
    /// ```swift
    /// ObjectState.canonical(Int32(3))   // "Int32:3"
    /// ```
    public static func canonical(_ value: Any?) -> String {
        switch value {
        case nil: return "nil"
        case let v as NSNull: return "\(v)"
        case let dictionary as [AnyHashable: Any]:
            return "{" + dictionary.map { "\($0.key)=\(canonical($0.value))" }.sorted().joined(separator: ",") + "}"
        case let dictionary as [String: Any]:
            return "{" + dictionary.map { "\($0.key)=\(canonical($0.value))" }.sorted().joined(separator: ",") + "}"
        case let array as [Any]: return "[" + array.map(canonical).joined(separator: ",") + "]"
        case let value?: return "\(type(of: value)):\(value)"
        }
    }
}
