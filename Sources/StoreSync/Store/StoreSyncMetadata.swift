import Foundation
import ObjectGraph

/// The engine's own entries in a store's metadata, read and written here
/// only (docs/SYNC.md "Push"):
/// - `StoreSync.<group>.pushedThrough`: the hub position the store has
///   received, written in the push's store transaction with its data;
/// - `StoreSync.<group>.marks`: (store position, hub position) pairs for
///   pushes that changed no row (and so left no transaction whose context
///   name would say the position).
/// Numbers are read as whatever integer type the metadata's plist decoding
/// gave them.
extension SyncGroup.Member {
    private func metadataKey(_ field: String) -> String { SyncGroup.metadataKey(groupName, field) }

    private static func integer(_ value: Any?) -> Int64? {
        switch value {
        case let v as Int: return Int64(v)
        case let v as Int64: return v
        case let v as NSNumber: return v.int64Value
        default: return nil
        }
    }

    /// The hub position the store has received (nil: none recorded yet).
    var receivedPosition: Int64? {
        get { Self.integer(store.metadata[metadataKey("pushedThrough")]) }
        set { store.metadata[metadataKey("pushedThrough")] = newValue.map { Int($0) } }
    }

    /// Hub positions the store received by pushes that changed nothing in it.
    var pushMarks: [(storePosition: Int64, hubPosition: Int64)] {
        get {
            let raw = store.metadata[metadataKey("marks")] as? [Any] ?? []
            return raw.compactMap { entry in
                guard let pair = entry as? [Any], pair.count == 2, let s = Self.integer(pair[0]), let h = Self.integer(pair[1]) else { return nil }
                return (s, h)
            }
        }
        set { store.metadata[metadataKey("marks")] = newValue.map { [Int($0.storePosition), Int($0.hubPosition)] } }
    }
}
