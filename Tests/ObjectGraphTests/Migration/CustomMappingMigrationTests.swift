import Foundation
import Testing
@testable import ObjectGraph

/// A mapping model written by hand, with an entity migration policy, that
/// does what no inferred mapping can (issue 14's acceptance; EM-07, EM-08,
/// MP-04, MP-06, MG-14, MG-15, PM-02): it **splits** `fullName` into
/// `firstName` and `lastName`, **merges** Customer and Supplier into one
/// entity, Party, and **moves a relationship**: v1 keeps the shipping address
/// on each Order, v2 on the Party (the address of its latest order).
@Suite(.serialized) struct CustomMappingMigrationTests {
    // MARK: - Models

    /// Customer(fullName, orders) · Supplier(companyName, contactName, products) ·
    /// Product(title, supplier) · Order(number, customer, shipTo) · Address(city, orders)
    static func v1() -> ManagedObjectModel {
        let customer = EntityDescription(name: "Customer"), supplier = EntityDescription(name: "Supplier")
        let product = EntityDescription(name: "Product"), order = EntityDescription(name: "Order"), address = EntityDescription(name: "Address")
        let orders = RelationshipDescription(name: "orders", destination: order, toMany: true)
        let orderCustomer = RelationshipDescription(name: "customer", destination: customer)
        orders.inverseRelationship = orderCustomer; orderCustomer.inverseRelationship = orders
        let products = RelationshipDescription(name: "products", destination: product, toMany: true)
        let productSupplier = RelationshipDescription(name: "supplier", destination: supplier)
        products.inverseRelationship = productSupplier; productSupplier.inverseRelationship = products
        let shipTo = RelationshipDescription(name: "shipTo", destination: address)
        let shipped = RelationshipDescription(name: "orders", destination: order, toMany: true)
        shipTo.inverseRelationship = shipped; shipped.inverseRelationship = shipTo
        customer.properties = [AttributeDescription(name: "fullName", type: .string), orders]
        supplier.properties = [AttributeDescription(name: "companyName", type: .string), AttributeDescription(name: "contactName", type: .string), products]
        product.properties = [AttributeDescription(name: "title", type: .string), productSupplier]
        order.properties = [AttributeDescription(name: "number", type: .integer32), orderCustomer, shipTo]
        address.properties = [AttributeDescription(name: "city", type: .string), shipped]
        let model = ManagedObjectModel()
        model.entities = [address, customer, order, product, supplier]
        return model
    }

    /// Party(firstName, lastName, company, kind, orders, products, address) ·
    /// Product(title, supplier) · Order(number, party) · Address(city, residents)
    static func v2() -> ManagedObjectModel {
        let party = EntityDescription(name: "Party"), product = EntityDescription(name: "Product")
        let order = EntityDescription(name: "Order"), address = EntityDescription(name: "Address")
        let orders = RelationshipDescription(name: "orders", destination: order, toMany: true)
        let orderParty = RelationshipDescription(name: "party", destination: party)
        orders.inverseRelationship = orderParty; orderParty.inverseRelationship = orders
        let products = RelationshipDescription(name: "products", destination: product, toMany: true)
        let productSupplier = RelationshipDescription(name: "supplier", destination: party)
        products.inverseRelationship = productSupplier; productSupplier.inverseRelationship = products
        let home = RelationshipDescription(name: "address", destination: address)
        let residents = RelationshipDescription(name: "residents", destination: party, toMany: true)
        home.inverseRelationship = residents; residents.inverseRelationship = home
        let kind = AttributeDescription(name: "kind", type: .string)
        kind.isOptional = false
        party.properties = [AttributeDescription(name: "firstName", type: .string), AttributeDescription(name: "lastName", type: .string),
                            AttributeDescription(name: "company", type: .string), kind, orders, products, home]
        product.properties = [AttributeDescription(name: "title", type: .string), productSupplier]
        order.properties = [AttributeDescription(name: "number", type: .integer32), orderParty]
        address.properties = [AttributeDescription(name: "city", type: .string), residents]
        let model = ManagedObjectModel()
        model.entities = [address, order, party, product]
        return model
    }

    // MARK: - The policy

    /// Customers: one Party each, `fullName` split at its first space; the
    /// Party's address is the shipping address of the customer's latest
    /// order. Suppliers use the same `firstName:`/`lastName:` functions from
    /// their attribute mappings' value expressions.
    final class PartyPolicy: EntityMigrationPolicy {
        override func createDestinationInstances(forSource source: ManagedObject, in mapping: EntityMapping, manager: MigrationManager) throws {
            guard mapping.sourceEntityName == "Customer" else {
                return try super.createDestinationInstances(forSource: source, in: mapping, manager: manager)
            }
            let party = try manager.destinationContext!.insertNewObject(forEntityName: "Party")
            let fullName = try source.value(forKey: "fullName") as? String
            try party.setValue(Self.split(fullName).first, forKey: "firstName")
            try party.setValue(Self.split(fullName).last, forKey: "lastName")
            try party.setValue("customer", forKey: "kind")
            manager.associate(sourceInstance: source, withDestinationInstance: party, for: mapping)
        }

        override func createRelationships(forDestination party: ManagedObject, in mapping: EntityMapping, manager: MigrationManager) throws {
            try super.createRelationships(forDestination: party, in: mapping, manager: manager)
            guard mapping.sourceEntityName == "Customer",
                  let customer = try manager.sourceInstances(forEntityMappingName: mapping.name, destinationInstances: [party]).first else { return }
            let orders = (try customer.value(forKey: "orders") as? Set<ManagedObject> ?? []).sorted {
                (try? $0.value(forKey: "number") as? Int32) ?? 0 > (try? $1.value(forKey: "number") as? Int32) ?? 0
            }
            guard let latest = try orders.first?.value(forKey: "shipTo") as? ManagedObject else { return }
            let address = try manager.destinationInstances(forEntityMappingName: "AddressToAddress", sourceInstances: [latest]).first
            try party.setValue(address, forKey: "address")
        }

        override func evaluateFunction(_ selector: String, arguments: [Any?]) throws -> Any? {
            switch selector {
            case "firstName:": return Self.split(arguments.first as? String).first
            case "lastName:": return Self.split(arguments.first as? String).last
            default: return try super.evaluateFunction(selector, arguments: arguments)
            }
        }

        static func split(_ name: String?) -> (first: String?, last: String?) {
            guard let name else { return (nil, nil) }
            let parts = name.split(separator: " ", maxSplits: 1).map(String.init)
            return (parts.first, parts.count > 1 ? parts[1] : nil)
        }
    }

    static func mapping() throws -> MappingModel {
        EntityMigrationPolicy.register(PartyPolicy.self, as: "PartyPolicy")
        func lookup(_ mapping: String, _ key: String) throws -> String {
            "FUNCTION($manager, 'destinationInstancesForEntityMappingNamed:sourceInstances:', '\(mapping)', $source.\(key))"
        }
        let addresses = EntityMapping(name: "AddressToAddress", sourceEntityName: "Address", destinationEntityName: "Address", type: .transform,
                                      attributeMappings: [try PropertyMapping(name: "city", valueExpressionFormat: "$source.city")])
        let customers = EntityMapping(name: "CustomerToParty", sourceEntityName: "Customer", destinationEntityName: "Party", type: .custom,
                                      relationshipMappings: [try PropertyMapping(name: "orders", valueExpressionFormat: try lookup("OrderToOrder", "orders"))],
                                      entityMigrationPolicyClassName: "PartyPolicy")
        let suppliers = EntityMapping(name: "SupplierToParty", sourceEntityName: "Supplier", destinationEntityName: "Party", type: .transform,
                                      attributeMappings: [
                                        try PropertyMapping(name: "firstName", valueExpressionFormat: "FUNCTION($entityPolicy, 'firstName:', $source.contactName)"),
                                        try PropertyMapping(name: "lastName", valueExpressionFormat: "FUNCTION($entityPolicy, 'lastName:', $source.contactName)"),
                                        try PropertyMapping(name: "company", valueExpressionFormat: "$source.companyName"),
                                        try PropertyMapping(name: "kind", valueExpressionFormat: "'supplier'"),
                                      ],
                                      relationshipMappings: [try PropertyMapping(name: "products", valueExpressionFormat: try lookup("ProductToProduct", "products"))],
                                      entityMigrationPolicyClassName: "PartyPolicy")
        let products = EntityMapping(name: "ProductToProduct", sourceEntityName: "Product", destinationEntityName: "Product", type: .transform,
                                     attributeMappings: [try PropertyMapping(name: "title", valueExpressionFormat: "$source.title")],
                                     relationshipMappings: [try PropertyMapping(name: "supplier", valueExpressionFormat: try lookup("SupplierToParty", "supplier"))])
        let orders = EntityMapping(name: "OrderToOrder", sourceEntityName: "Order", destinationEntityName: "Order", type: .transform,
                                   attributeMappings: [try PropertyMapping(name: "number", valueExpressionFormat: "$source.number")],
                                   relationshipMappings: [try PropertyMapping(name: "party", valueExpressionFormat: try lookup("CustomerToParty", "customer"))])
        return MappingModel(entityMappings: [addresses, customers, suppliers, products, orders])
    }

    /// A v1 store: 3 customers with 2 orders each, shipped to 3 addresses
    /// (the later order of customer i ships to address (i + 1) % 3), 2
    /// suppliers with 2 products each.
    static func store() throws -> URL {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Shop.sqlite")
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: v1())
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let addresses = try ["Paris", "Oslo", "Lima"].map { city -> ManagedObject in
                let a = try context.insertNewObject(forEntityName: "Address")
                try a.setValue(city, forKey: "city")
                return a
            }
            for (i, name) in ["Ada Lovelace", "Alan Mathison Turing", "Grace Hopper"].enumerated() {
                let c = try context.insertNewObject(forEntityName: "Customer")
                try c.setValue(name, forKey: "fullName")
                for n in 0..<2 {
                    let o = try context.insertNewObject(forEntityName: "Order")
                    try o.setValue(Int32(10 * i + n), forKey: "number")
                    try o.setValue(c, forKey: "customer")
                    try o.setValue(addresses[(i + n) % 3], forKey: "shipTo")
                }
            }
            for (company, contact) in [("Acme", "Wile Coyote"), ("Initech", "Bill Lumbergh")] {
                let s = try context.insertNewObject(forEntityName: "Supplier")
                try s.setValue(company, forKey: "companyName")
                try s.setValue(contact, forKey: "contactName")
                for title in ["anvil", "stapler"] {
                    let p = try context.insertNewObject(forEntityName: "Product")
                    try p.setValue("\(company) \(title)", forKey: "title")
                    try p.setValue(s, forKey: "supplier")
                }
            }
            try context.save()
        }
        for store in coordinator.persistentStores { try coordinator.remove(store) }
        return url
    }

    @Test func policySplitsAnAttributeMergesTwoEntitiesAndMovesARelationship() throws {
        let url = try Self.store()
        let source = Self.v1(), destination = Self.v2()
        let mapping = try Self.mapping()
        let preview = try SQLiteStore.migrationPreview(at: url, sourceModel: source, destinationModel: destination, mappingModel: mapping)
        #expect(!preview.inPlace)
        try SQLiteStore.migrateStore(at: url, options: [:], mappingModel: mapping, manager: MigrationManager(sourceModel: source, destinationModel: destination))
        #expect(try RawSQLite.query(url.path, "PRAGMA integrity_check").first?.first?.text == "ok")

        // What sqlite3 shows: one Party table, split names, the merged kinds.
        let parties = try RawSQLite.query(url.path, "SELECT ZKIND, ZFIRSTNAME, ZLASTNAME, ZCOMPANY FROM ZPARTY ORDER BY ZKIND, ZFIRSTNAME")
            .map { $0.map { $0.text ?? "nil" }.joined(separator: "|") }
        #expect(parties == ["customer|Ada|Lovelace|nil", "customer|Alan|Mathison Turing|nil", "customer|Grace|Hopper|nil",
                            "supplier|Bill|Lumbergh|Initech", "supplier|Wile|Coyote|Acme"])
        let tables = Set(try RawSQLite.query(url.path, "SELECT name FROM sqlite_master WHERE type = 'table'").map { $0[0].text! })
        #expect(tables.isDisjoint(with: ["ZCUSTOMER", "ZSUPPLIER"]))
        #expect(try RawSQLite.query(url.path, "SELECT count(*) FROM sqlite_master WHERE sql LIKE '%ZSHIPTO%'").first?.first?.int == 0)
        // The moved relationship, in SQL: each customer's address is its later order's.
        let homes = try RawSQLite.query(url.path, "SELECT p.ZFIRSTNAME, a.ZCITY FROM ZPARTY p LEFT JOIN ZADDRESS a ON a.Z_PK = p.ZADDRESS ORDER BY p.ZFIRSTNAME")
            .map { "\($0[0].text!) \($0[1].text ?? "nil")" }
        #expect(homes == ["Ada Oslo", "Alan Lima", "Bill nil", "Grace Paris", "Wile nil"])

        // Through a coordinator with v2: orders and products point at the merged parties.
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: destination)
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let orders = try context.fetch(FetchRequest(entityName: "Order"))
            #expect(orders.count == 6)
            for order in orders {
                let number = try #require(order.value(forKey: "number") as? Int32)
                let party = try #require(order.value(forKey: "party") as? ManagedObject)
                #expect(try party.value(forKey: "firstName") as? String == ["Ada", "Alan", "Grace"][Int(number) / 10])
            }
            let products = try context.fetch(FetchRequest(entityName: "Product"))
            #expect(products.count == 4)
            for product in products {
                let title = try #require(product.value(forKey: "title") as? String)
                let supplier = try #require(product.value(forKey: "supplier") as? ManagedObject)
                #expect(title.hasPrefix(try #require(supplier.value(forKey: "company") as? String)))
                #expect(try supplier.value(forKey: "kind") as? String == "supplier")
            }
            let oslo = try #require(context.fetch(FetchRequest(entityName: "Address")).first { try $0.value(forKey: "city") as? String == "Oslo" })
            let residents = try #require(oslo.value(forKey: "residents") as? Set<ManagedObject>)
            #expect(try residents.map { try $0.value(forKey: "firstName") as? String } == ["Ada"])
        }
    }
}
