import Foundation
@testable import ObjectGraph

/// The shape of the Mastodon client's model that issue 28 found duplicates
/// in: users unique on (userID, domain), with a one-to-many (statuses ↔
/// author), a many-to-many (bookmarks ↔ bookmarkedBy) and a to-one whose
/// inverse is a to-many (instance ↔ users).
enum ConstraintModel {
    static func make() -> ManagedObjectModel {
        let user = EntityDescription(name: "User")
        let status = EntityDescription(name: "Status")
        let instance = EntityDescription(name: "Instance")
        let userID = AttributeDescription(name: "userID", type: .string)
        let domain = AttributeDescription(name: "domain", type: .string)
        let displayName = AttributeDescription(name: "displayName", type: .string)
        let note = AttributeDescription(name: "note", type: .string)
        let followers = AttributeDescription(name: "followersCount", type: .integer64)
        followers.isOptional = false
        followers.defaultValue = Int64(0)
        let statuses = RelationshipDescription(name: "statuses", destination: status, toMany: true)
        let bookmarks = RelationshipDescription(name: "bookmarks", destination: status, toMany: true)
        let userInstance = RelationshipDescription(name: "instance", destination: instance)
        user.properties = [userID, domain, displayName, note, followers, statuses, bookmarks, userInstance]
        user.uniquenessConstraints = [["userID", "domain"]]

        let text = AttributeDescription(name: "text", type: .string)
        let author = RelationshipDescription(name: "author", destination: user)
        let bookmarkedBy = RelationshipDescription(name: "bookmarkedBy", destination: user, toMany: true)
        status.properties = [text, author, bookmarkedBy]

        let host = AttributeDescription(name: "host", type: .string)
        let users = RelationshipDescription(name: "users", destination: user, toMany: true)
        instance.properties = [host, users]

        statuses.inverseRelationship = author; author.inverseRelationship = statuses
        bookmarks.inverseRelationship = bookmarkedBy; bookmarkedBy.inverseRelationship = bookmarks
        userInstance.inverseRelationship = users; users.inverseRelationship = userInstance

        let model = ManagedObjectModel()
        model.entities = [user, status, instance]
        return model
    }

    @discardableResult
    static func user(_ context: ManagedObjectContext, _ id: String?, _ domain: String = "a.example", _ values: [String: Any] = [:]) throws -> ManagedObject {
        let user = try context.insertNewObject(forEntityName: "User")
        try user.setValue(id, forKey: "userID")
        try user.setValue(domain, forKey: "domain")
        for (key, value) in values { try user.setValue(value, forKey: key) }
        return user
    }

    static func status(_ context: ManagedObjectContext, _ text: String) throws -> ManagedObject {
        let status = try context.insertNewObject(forEntityName: "Status")
        try status.setValue(text, forKey: "text")
        return status
    }

    static func instance(_ context: ManagedObjectContext, _ host: String) throws -> ManagedObject {
        let instance = try context.insertNewObject(forEntityName: "Instance")
        try instance.setValue(host, forKey: "host")
        return instance
    }

    /// What a fresh context reads from the store: each user by "userID@domain".
    struct StoredUser: Equatable {
        var objectID: ManagedObjectID
        var displayName: String?
        var note: String?
        var followersCount: Int64
        var instance: String?
        var statuses: Set<String>
        var bookmarks: Set<String>
    }

    static func storedUsers(_ coordinator: PersistentStoreCoordinator) throws -> [String: [StoredUser]] {
        let context = ManagedObjectContext(coordinator: coordinator)
        return try context.performAndWait { () throws -> [String: [StoredUser]] in
            var out: [String: [StoredUser]] = [:]
            for user in try context.fetch(FetchRequest(entityName: "User")) {
                let key = "\(try user.value(forKey: "userID") as? String ?? "nil")@\(try user.value(forKey: "domain") as? String ?? "nil")"
                func texts(_ relationship: String) throws -> Set<String> {
                    Set(try (user.value(forKey: relationship) as? Set<ManagedObject> ?? []).map { try $0.value(forKey: "text") as? String ?? "?" })
                }
                let instance = try user.value(forKey: "instance") as? ManagedObject
                out[key, default: []].append(StoredUser(
                    objectID: user.objectID,
                    displayName: try user.value(forKey: "displayName") as? String,
                    note: try user.value(forKey: "note") as? String,
                    followersCount: try user.value(forKey: "followersCount") as? Int64 ?? -1,
                    instance: try instance?.value(forKey: "host") as? String,
                    statuses: try texts("statuses"), bookmarks: try texts("bookmarks")))
            }
            return out
        }
    }

    /// Every stored status's author and bookmarkers, and every instance's
    /// users, as "userID@domain": the inverse sides agree with the users'.
    static func storedInverses(_ coordinator: PersistentStoreCoordinator) throws -> (authors: [String: String], bookmarkedBy: [String: Set<String>], instanceUsers: [String: Set<String>]) {
        let context = ManagedObjectContext(coordinator: coordinator)
        return try context.performAndWait {
            func name(_ user: ManagedObject?) throws -> String {
                guard let user else { return "nil" }
                return "\(try user.value(forKey: "userID") as? String ?? "nil")@\(try user.value(forKey: "domain") as? String ?? "nil")"
            }
            var authors: [String: String] = [:], bookmarkedBy: [String: Set<String>] = [:], instanceUsers: [String: Set<String>] = [:]
            for status in try context.fetch(FetchRequest(entityName: "Status")) {
                let text = try status.value(forKey: "text") as? String ?? "?"
                authors[text] = try name(status.value(forKey: "author") as? ManagedObject)
                bookmarkedBy[text] = Set(try (status.value(forKey: "bookmarkedBy") as? Set<ManagedObject> ?? []).map(name))
            }
            for instance in try context.fetch(FetchRequest(entityName: "Instance")) {
                instanceUsers[try instance.value(forKey: "host") as? String ?? "?"] = Set(try (instance.value(forKey: "users") as? Set<ManagedObject> ?? []).map(name))
            }
            return (authors, bookmarkedBy, instanceUsers)
        }
    }
}
