import Crypto
import Foundation

/// Computes version hashes: 32-byte SHA-256 digests of a canonical encoding of
/// exactly the inputs Core Data documents (ED-26, AD-13, ED-29). Stores keep
/// them in their metadata, and the sync daemon compares them across machines,
/// so the encoding is fixed and written down here. It is ObjectGraph's own:
/// Apple does not publish its byte serialization, so hashes are not
/// byte-compatible with Apple's (recorded in docs/ARCHITECTURE.md).
///
/// Encoding, version 1. Every field is appended in this order:
/// - a string: its UTF-8 length as a big-endian UInt32, then the bytes;
/// - an optional string: a byte 0 (absent) or 1 followed by the string;
/// - a Bool: one byte, 0 or 1;
/// - an integer: a big-endian Int64.
///
/// Property: the tag "OGProperty1", the kind ("attribute", "relationship" or
/// "fetchedProperty"), name, isOptional, isTransient, isReadOnly,
/// versionHashModifier; then for an attribute its type's raw value; for a
/// relationship its destination entity's name, its inverse's name, minCount
/// and maxCount. Not included: default value, class names, transformer name,
/// user info, validation predicates, delete rule, indexing, renaming identifier,
/// and the Spotlight flags `isIndexedBySpotlight` and `isStoredInExternalRecord`
/// (as in Core Data: they change what external records hold, not what the
/// store holds, so turning them on needs no migration; docs/EXTERNAL-RECORDS.md).
///
/// Entity: the tag "OGEntity1", name, the superentity's hash (as a 0/1-prefixed
/// 32-byte field), isAbstract, the number of its own properties, then for each
/// of them, sorted by name, the name and its 32-byte hash; last the
/// versionHashModifier. Not included: class name, user info, renaming
/// identifier, sub-entities (adding a child leaves the parent's hash alone, ED-27).
public enum VersionHasher {
    /// The digest of one property's persistence-relevant configuration.
    public static func hash(of property: PropertyDescription) -> Data {
        var e = CanonicalEncoder()
        e.string("OGProperty1")
        switch property {
        case is AttributeDescription: e.string("attribute")
        case is RelationshipDescription: e.string("relationship")
        default: e.string("fetchedProperty")
        }
        e.string(property.name)
        e.bool(property.isOptional)
        e.bool(property.isTransient)
        e.bool(property.isReadOnly)
        e.optionalString(property.versionHashModifier)
        if let attribute = property as? AttributeDescription {
            e.integer(Int64(attribute.attributeType.rawValue))
        } else if let relationship = property as? RelationshipDescription {
            e.optionalString(relationship.destinationEntity?.name ?? relationship.destinationEntityName)
            e.optionalString(relationship.inverseRelationship?.name ?? relationship.inverseRelationshipName)
            e.integer(Int64(relationship.minCount))
            e.integer(Int64(relationship.maxCount))
        }
        return e.digest()
    }

    /// The digest of one entity, folding in its superentity's hash.
    public static func hash(of entity: EntityDescription) -> Data {
        hash(of: entity, visiting: [])
    }

    private static func hash(of entity: EntityDescription, visiting: Set<ObjectIdentifier>) -> Data {
        var e = CanonicalEncoder()
        e.string("OGEntity1")
        e.string(entity.name)
        // A cycle in inheritance is a model error; hash it as if rootless so
        // the hasher terminates, and let validation report the cycle.
        if let parent = entity.superentity, !visiting.contains(ObjectIdentifier(parent)) {
            e.bool(true)
            e.bytes(hash(of: parent, visiting: visiting.union([ObjectIdentifier(entity)])))
        } else {
            e.bool(false)
        }
        e.bool(entity.isAbstract)
        let own = entity.directProperties.sorted { $0.name < $1.name }
        e.integer(Int64(own.count))
        for property in own {
            e.string(property.name)
            e.bytes(hash(of: property))
        }
        e.optionalString(entity.versionHashModifier)
        return e.digest()
    }
}

/// The byte encoding described on `VersionHasher`.
struct CanonicalEncoder {
    private(set) var data = Data()

    mutating func string(_ s: String) {
        let utf8 = Array(s.utf8)
        integer32(UInt32(utf8.count))
        data.append(contentsOf: utf8)
    }

    mutating func optionalString(_ s: String?) {
        if let s { bool(true); string(s) } else { bool(false) }
    }

    mutating func bool(_ b: Bool) { data.append(b ? 1 : 0) }

    mutating func integer(_ n: Int64) {
        withUnsafeBytes(of: n.bigEndian) { data.append(contentsOf: $0) }
    }

    mutating func bytes(_ d: Data) { data.append(d) }

    private mutating func integer32(_ n: UInt32) {
        withUnsafeBytes(of: n.bigEndian) { data.append(contentsOf: $0) }
    }

    func digest() -> Data { Data(SHA256.hash(data: data)) }
}
