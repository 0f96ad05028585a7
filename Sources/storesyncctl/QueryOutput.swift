import Foundation
import ObjectGraph

/// How `query` prints snapshots: an aligned text table or a JSON array.
struct QueryOutput {
    let attributes: [AttributeDescription]
    let toOnes: [RelationshipDescription]
    let toManys: [RelationshipDescription]
    let store: PersistentStore

    init(entity: EntityDescription, store: PersistentStore) throws {
        let stored = entity.properties.filter { !$0.isTransient }
        attributes = stored.compactMap { $0 as? AttributeDescription }
        let relationships = stored.compactMap { $0 as? RelationshipDescription }
        toOnes = relationships.filter { !$0.isToMany }
        toManys = relationships.filter(\.isToMany)
        self.store = store
    }

    // MARK: Table

    /// A header, a rule, and one line per object; columns padded to their
    /// widest cell so the output lines up in a terminal.
    func table(_ snapshots: [StoreSnapshot]) -> String {
        let header = ["objectID"] + attributes.map(\.name) + toOnes.map(\.name)
        var rows = [header]
        for snapshot in snapshots {
            var row = [snapshot.objectID.uriRepresentation.absoluteString]
            row += attributes.map { Self.text(snapshot[$0.name]) }
            row += toOnes.map { (snapshot[$0.name] as? ManagedObjectID)?.uriRepresentation.absoluteString ?? "nil" }
            rows.append(row)
        }
        let widths = header.indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            zip(cells, widths).map { $0 + String(repeating: " ", count: $1 - $0.count) }
                .joined(separator: "  ").replacingOccurrences(of: " +$", with: "", options: .regularExpression)
        }
        var out = line(header) + "\n" + line(widths.map { String(repeating: "-", count: $0) }) + "\n"
        for row in rows.dropFirst() { out += line(row) + "\n" }
        out += "(\(snapshots.count) \(snapshots.count == 1 ? "object" : "objects"))\n"
        return out
    }

    /// One table cell: control characters escaped so a value stays on its line.
    static func text(_ value: Any?) -> String {
        guard let value, !(value is NSNull) else { return "nil" }
        let raw: String
        switch value {
        case let s as String: raw = s
        case let b as Bool: raw = b ? "true" : "false"
        case let d as Date: raw = d.formatted(Self.isoStyle)
        case let d as Data: raw = "<\(d.count) bytes>"
        case let u as UUID: raw = u.uuidString
        case let u as URL: raw = u.absoluteString
        case let id as ManagedObjectID: raw = id.uriRepresentation.absoluteString
        default: raw = String(describing: value)
        }
        return raw.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
            .replacingOccurrences(of: "\t", with: "\\t").replacingOccurrences(of: "\r", with: "\\r")
    }

    /// A value type, so one shared style is safe from any thread.
    static let isoStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    // MARK: JSON

    /// A pretty-printed JSON array, keys sorted.
    func json(_ snapshots: [StoreSnapshot]) throws -> String {
        var objects: [[String: Any]] = []
        objects.reserveCapacity(snapshots.count)
        for snapshot in snapshots {
            var object: [String: Any] = ["objectID": snapshot.objectID.uriRepresentation.absoluteString]
            for attribute in attributes { object[attribute.name] = Self.jsonValue(snapshot[attribute.name]) }
            for rel in toOnes {
                object[rel.name] = (snapshot[rel.name] as? ManagedObjectID)?.uriRepresentation.absoluteString ?? NSNull()
            }
            for rel in toManys {
                object[rel.name] = try store.relatedObjectIDs(for: rel, of: snapshot.objectID).map { $0.uriRepresentation.absoluteString }
            }
            objects.append(object)
        }
        let data = try JSONSerialization.data(withJSONObject: objects, options: [.prettyPrinted, .sortedKeys])
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    /// An attribute value as JSON: numbers and booleans as themselves;
    /// decimals as strings, so no digit is lost to binary floating point;
    /// non-finite doubles (which JSON cannot hold) as "nan"/"inf"/"-inf".
    static func jsonValue(_ value: Any?) -> Any {
        guard let value, !(value is NSNull) else { return NSNull() }
        switch value {
        case let s as String: return s
        case let b as Bool: return b
        case let n as Int16: return Int(n)
        case let n as Int32: return Int(n)
        case let n as Int64: return n
        case let n as Int: return n
        case let d as Decimal: return "\(d)"
        case let n as Double: return n.isFinite ? n : nonFinite(n)
        case let n as Float: return n.isFinite ? Double(n) : nonFinite(Double(n))
        case let d as Date: return d.formatted(Self.isoStyle)
        case let d as Data: return d.base64EncodedString()
        case let u as UUID: return u.uuidString
        case let u as URL: return u.absoluteString
        case let id as ManagedObjectID: return id.uriRepresentation.absoluteString
        default: return String(describing: value)
        }
    }

    private static func nonFinite(_ n: Double) -> String { n.isNaN ? "nan" : (n > 0 ? "inf" : "-inf") }
}
