import Foundation
@testable import ObjectGraph

/// Typed subclasses for the reference model, with hook counters.
final class DepartmentMO: ManagedObject {
    @Managed var name: String?
    @Managed var budget: Decimal
    @Managed var employees: Set<EmployeeMO>

    var events: [String] = []
    var snapshotEvents: [SnapshotEventType] = []
    override func awakeFromInsert() { super.awakeFromInsert(); events.append("awakeFromInsert") }
    override func awakeFromFetch() { super.awakeFromFetch(); events.append("awakeFromFetch") }
    override func awake(fromSnapshotEvents events: SnapshotEventType) { super.awake(fromSnapshotEvents: events); snapshotEvents.append(events) }
    override func willSave() { super.willSave(); events.append("willSave") }
    override func didSave() { super.didSave(); events.append("didSave") }
    override func prepareForDeletion() { super.prepareForDeletion(); events.append("prepareForDeletion") }
    override func willTurnIntoFault() { super.willTurnIntoFault(); events.append("willTurnIntoFault(name=\(String(describing: storage["name"])))") }
    override func didTurnIntoFault() { super.didTurnIntoFault(); events.append("didTurnIntoFault") }
}

final class EmployeeMO: ManagedObject {
    @Managed var firstName: String?
    @Managed var lastName: String?
    @Managed var employeeID: Int32
    @Managed var salary: Decimal
    @Managed var department: DepartmentMO?
    @Managed var manager: EmployeeMO?
    @Managed var directReports: Set<EmployeeMO>

    /// Derived (DEP-04).
    var fullName: String { "\(firstName ?? "") \(lastName ?? "")" }

    override class func keyPathsForValuesAffectingValue(forKey key: String) -> Set<String> {
        key == "fullNameAndID" ? ["firstName", "lastName", "employeeID"] : super.keyPathsForValuesAffectingValue(forKey: key)
    }

    var customValidations = 0
    override func validateCustomValue(_ value: inout Any?, forKey key: String) throws {
        try super.validateCustomValue(&value, forKey: key)
        if key == "firstName" { customValidations += 1 }
        if key == "lastName", let name = value as? String, name == "Forbidden" {
            throw CoreDataError(.managedObjectValidation, "lastName may not be Forbidden", userInfo: [CoreDataError.validationKeyErrorKey: key])
        }
    }
}

enum Company {
    static func registerClasses() {
        ManagedObjectClassRegistry.shared.register(DepartmentMO.self, forClassName: "Department")
        ManagedObjectClassRegistry.shared.register(EmployeeMO.self, forClassName: "Employee")
    }

    /// A coordinator with one store and a private-queue context.
    static func stack(model: ManagedObjectModel = ReferenceModel.make(), type: String = PersistentStoreCoordinator.inMemoryStoreType, url: URL? = nil) throws -> (PersistentStoreCoordinator, ManagedObjectContext) {
        registerClasses()
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(ofType: type, at: url)
        return (coordinator, ManagedObjectContext(coordinator: coordinator))
    }

    static func department(_ context: ManagedObjectContext, _ name: String, budget: Decimal = 1000) throws -> DepartmentMO {
        let d = try context.insertNewObject(forEntityName: "Department") as! DepartmentMO
        d.name = name
        d.budget = budget
        return d
    }

    static func employee(_ context: ManagedObjectContext, _ first: String, _ last: String, in department: DepartmentMO?, salary: Decimal = 100, id: Int32 = 0) throws -> EmployeeMO {
        let e = try context.insertNewObject(forEntityName: "Employee") as! EmployeeMO
        e.firstName = first
        e.lastName = last
        e.salary = salary
        e.employeeID = id
        e.department = department
        return e
    }

    /// A request with an optional predicate (format and arguments) and sort key.
    static func request(_ entity: String, where format: String? = nil, _ arguments: Any?..., sortedBy key: String? = nil) -> AnyFetchRequest {
        let r = FetchRequest(entityName: entity)
        if let format { r.predicate = try! FetchPredicate(format: format, argumentArray: arguments) }
        if let key { r.sortDescriptors = [FetchSortDescriptor(key: key)] }
        return r
    }
}
