import Foundation
import Testing
@testable import ObjectGraph

/// MOC-MP-09 for a to-one relationship: the store moved Bob to another
/// manager while this context changed his manager too (a conflict on the
/// relationship) and his salary (memory only).
@Suite struct RelationshipMergePolicyTests {
    func run(_ policy: MergePolicy) throws -> (manager: String?, salary: Decimal, result: Result<Void, Error>) {
        let (coordinator, context) = try Company.stack()
        let other = ManagedObjectContext(coordinator: coordinator)
        let (bob, ann, cy) = try context.performAndWait { () throws -> (EmployeeMO, EmployeeMO, EmployeeMO) in
            let dept = try Company.department(context, "Sales")
            let ann = try Company.employee(context, "Ann", "Able", in: dept)
            let cy = try Company.employee(context, "Cy", "Cole", in: dept)
            let dee = try Company.employee(context, "Dee", "Dale", in: dept)
            let bob = try Company.employee(context, "Bob", "Best", in: dept, salary: 100)
            bob.manager = dee
            try context.save()
            return (bob, ann, cy)
        }
        try other.performAndWait {
            try other.existingObject(with: bob.objectID).setValue(other.object(with: cy.objectID), forKey: "manager")
            try other.save()
        }
        let result = context.performAndWait { () -> Result<Void, Error> in
            context.mergePolicy = policy
            bob.manager = ann
            bob.salary = 200
            return Result { try context.save() }
        }
        // In memory, the inverse to-manys agree with Bob's manager.
        context.performAndWait {
            let manager = bob.manager
            #expect(ann.directReports.contains(bob) == (manager === ann))
            #expect(cy.directReports.contains(bob) == (manager === cy))
        }
        let check = ManagedObjectContext(coordinator: coordinator)
        let stored = try check.performAndWait { () throws -> (String?, Decimal) in
            let b = try check.existingObject(with: bob.objectID)
            let manager = try b.value(forKey: "manager") as? ManagedObject
            // And so do the stored memberships.
            for person in [ann, cy] {
                let reports = try check.existingObject(with: person.objectID).value(forKey: "directReports") as? Set<ManagedObject> ?? []
                #expect(reports.contains(b) == (manager?.objectID == person.objectID))
            }
            return (try manager?.value(forKey: "firstName") as? String, try b.value(forKey: "salary") as! Decimal)
        }
        return (stored.0, stored.1, result)
    }

    @Test func toOneRelationshipFollowsEachPolicy() throws {
        // MOC-MP-09 (relationships, to-one)
        let error = try run(.error)
        #expect(error.result.failureError != nil && error.manager == "Cy" && error.salary == 100)
        let storeTrump = try run(.mergeByPropertyStoreTrump)
        #expect(storeTrump.manager == "Cy" && storeTrump.salary == 200)
        let objectTrump = try run(.mergeByPropertyObjectTrump)
        #expect(objectTrump.manager == "Ann" && objectTrump.salary == 200)
        let overwrite = try run(.overwrite)
        #expect(overwrite.manager == "Ann" && overwrite.salary == 200)
        let rollback = try run(.rollback)
        #expect(rollback.manager == "Cy" && rollback.salary == 100)
    }
}
