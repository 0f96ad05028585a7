import Foundation

/// Copies the data of a store made with one model into a store of another,
/// driven by a mapping model (MG-*): Core Data's `NSMigrationManager`.
///
/// A migration opens the source store read-only through its own coordinator
/// and context (`sourceContext`), the destination store through another
/// (`destinationContext`), runs the three stages over every entity mapping
/// in order (create destination instances, create relationships, validate;
/// MG-09) through each mapping's `EntityMigrationPolicy`, and saves the
/// destination context once. Nothing is written to the destination before
/// that save; a failure or a cancellation saves nothing and deletes a
/// destination file the migration created (MG-12).
///
/// ```swift
/// let manager = MigrationManager(sourceModel: v1, destinationModel: v2)
/// let token = manager.observeProgress { print($0) }          // "create destination instances Note->Note 40%"
/// try manager.migrateStore(from: oldURL, sourceType: PersistentStoreCoordinator.sqliteStoreType,
///                          with: try MappingModel.inferredMappingModel(forSourceModel: v1, destinationModel: v2),
///                          toDestinationURL: newURL, destinationType: PersistentStoreCoordinator.sqliteStoreType)
/// ```
open class MigrationManager: ExpressionFunctionTarget, KeyValueCoding {
    // MARK: - Value expression variables (MP-10)

    /// `$manager`: the migration manager (`NSMigrationManagerKey`).
    public static let managerKey = "manager"
    /// `$source`: the source instance (`NSMigrationSourceObjectKey`).
    public static let sourceObjectKey = "source"
    /// `$destination`: the destination instance (`NSMigrationDestinationObjectKey`).
    public static let destinationObjectKey = "destination"
    /// `$entityMapping`: the entity mapping (`NSMigrationEntityMappingKey`).
    public static let entityMappingKey = "entityMapping"
    /// `$propertyMapping`: the property mapping (`NSMigrationPropertyMappingKey`).
    public static let propertyMappingKey = "propertyMapping"
    /// `$entityPolicy`: the entity migration policy (`NSMigrationEntityPolicyKey`).
    public static let entityPolicyKey = "entityPolicy"

    static let destinationInstancesForSourceRelationshipSelector = "destinationInstancesForSourceRelationshipNamed:sourceInstances:"
    static let destinationInstancesForEntityMappingSelector = "destinationInstancesForEntityMappingNamed:sourceInstances:"
    static let sourceInstancesForEntityMappingSelector = "sourceInstancesForEntityMappingNamed:destinationInstances:"
    static let fetchRequestForSourceEntitySelector = "fetchRequestForSourceEntityNamed:predicateString:"

    // MARK: - Setup (MG-01…07)

    public let sourceModel: ManagedObjectModel
    public let destinationModel: ManagedObjectModel
    /// The mapping model of the current or last migration; nil before the first (MG-04).
    public private(set) var mappingModel: MappingModel?
    /// The contexts of the current or last migration; nil before the first (MG-06).
    public private(set) var sourceContext: ManagedObjectContext?
    public private(set) var destinationContext: ManagedObjectContext?
    /// Free-form data for policies; nil by default (MG-07).
    public var userInfo: [String: Any]?

    /// A manager between two models (MG-01). The models are frozen now when
    /// they are valid (MG-03); an invalid model fails the migrate call.
    public required init(sourceModel: ManagedObjectModel, destinationModel: ManagedObjectModel) {
        self.sourceModel = sourceModel
        self.destinationModel = destinationModel
        try? sourceModel.markInUse()
        try? destinationModel.markInUse()
    }

    // MARK: - State, progress and cancellation (MG-10…12)

    private let lock = NSRecursiveLock()
    private var running = false
    private var progressValue = 1.0
    private var stage: MigrationStage?
    private var current: EntityMapping?
    private var cancellation: Error?
    private var observers: [UUID: (MigrationProgress) -> Void] = [:]
    private var lastReported = -1.0
    private var totalUnits = 1.0
    private var doneUnits = 0.0

    /// How complete the running migration is, 0 to 1; 1 when none is
    /// running, before the first and after one ends, however it ended (MG-11).
    public var migrationProgress: Double {
        lock.lock(); defer { lock.unlock() }
        return running ? progressValue : 1
    }

    /// The entity mapping being processed now (MG-10).
    public var currentEntityMapping: EntityMapping? {
        lock.lock(); defer { lock.unlock() }
        return current
    }

    /// The stage running now, nil when no migration runs.
    public var currentStage: MigrationStage? {
        lock.lock(); defer { lock.unlock() }
        return running ? stage : nil
    }

    /// Calls `handler` on the migrating thread each time the stage or entity
    /// mapping changes and as the fraction grows (in steps of at least half
    /// a percent), and once with 1 at the end of a successful migration.
    /// The handler may call `cancelMigration(with:)`. Keep the returned
    /// token: releasing it stops the calls.
    ///
    /// ```swift
    /// let token = manager.observeProgress { event in print(event.stage, event.entityMappingName ?? "", event.fraction) }
    /// ```
    public func observeProgress(_ handler: @escaping (MigrationProgress) -> Void) -> MigrationObservation {
        let id = UUID()
        lock.lock(); observers[id] = handler; lock.unlock()
        return MigrationObservation { [weak self] in
            guard let self else { return }
            self.lock.lock(); self.observers[id] = nil; self.lock.unlock()
        }
    }

    /// Stops the running migration, from any thread or from a policy or a
    /// progress observer: the migrate call then throws exactly `error`
    /// (MG-12). Nothing is saved to the destination, and a destination file
    /// the migration created is deleted. Give an error that explains the
    /// cancellation, such as `CoreDataError(.migrationCancelled, …)` (134120).
    public func cancelMigration(with error: Error) {
        lock.lock(); defer { lock.unlock() }
        if running && cancellation == nil { cancellation = error }
    }

    /// Throws the cancellation error if `cancelMigration(with:)` was called.
    func checkCancellation() throws {
        lock.lock(); let error = cancellation; lock.unlock()
        if let error { throw error }
    }

    /// Moves the migration on: `units` more of the work done, in `stage`
    /// and `mapping`. Store-specific migrations report through it too.
    func advance(_ stage: MigrationStage, _ mapping: EntityMapping?, units: Double = 0) throws {
        lock.lock()
        let changed = self.stage != stage || current !== mapping
        self.stage = stage
        current = mapping
        doneUnits = min(totalUnits, doneUnits + units)
        progressValue = max(progressValue, min(1, doneUnits / totalUnits))
        let report = changed || progressValue - lastReported >= 0.005
        let handlers = report ? Array(observers.values) : []
        if report { lastReported = progressValue }
        let event = MigrationProgress(stage: stage, entityMappingName: mapping?.name, fraction: progressValue)
        lock.unlock()
        for handler in handlers { handler(event) }
        try checkCancellation()
    }

    /// Starts a migration of `units` units of work.
    func begin(totalUnits units: Double) throws {
        lock.lock(); defer { lock.unlock() }
        guard !running else {
            throw CoreDataError(.migration, "a migration is already running on this migration manager")
        }
        running = true
        cancellation = nil
        progressValue = 0
        lastReported = -1
        doneUnits = 0
        totalUnits = max(1, units)
        stage = nil
        current = nil
    }

    /// Sets the amount of work once it is known (after counting source instances).
    func setTotalUnits(_ units: Double) {
        lock.lock(); totalUnits = max(1, units, doneUnits); lock.unlock()
    }

    /// Ends the running migration; a successful one reports 1 last.
    func finish(succeeded: Bool) {
        lock.lock()
        let lastStage = stage ?? .save
        running = false
        progressValue = 1
        current = nil
        let handlers = succeeded ? Array(observers.values) : []
        lock.unlock()
        let event = MigrationProgress(stage: lastStage, entityMappingName: nil, fraction: 1)
        for handler in handlers { handler(event) }
    }

    // MARK: - Entities of a mapping (MG-05)

    /// The source model's entity the mapping names, nil for an `add` mapping.
    public func sourceEntity(for mapping: EntityMapping) -> EntityDescription? {
        mapping.sourceEntityName.flatMap { sourceModel.entitiesByName[$0] }
    }

    /// The destination model's entity the mapping names, nil for a `remove` mapping.
    public func destinationEntity(for mapping: EntityMapping) -> EntityDescription? {
        mapping.destinationEntityName.flatMap { destinationModel.entitiesByName[$0] }
    }

    // MARK: - Source and destination instances (MG-13…16)

    /// One entity mapping's source → destination links, in association order.
    private final class AssociationTable {
        var pairs: [(source: ManagedObject, destination: ManagedObject)] = []
        var bySource: [ObjectIdentifier: [Int]] = [:]
        var byDestination: [ObjectIdentifier: [Int]] = [:]
    }
    private var associations: [String: AssociationTable] = [:]
    /// Every destination instance of each source instance, over all mappings.
    private var destinationsBySource: [ObjectIdentifier: [ManagedObject]] = [:]

    /// Records that `destination` was made from `source` under `mapping`
    /// (MG-14); several calls make one-to-many associations.
    public func associate(sourceInstance source: ManagedObject, withDestinationInstance destination: ManagedObject, for mapping: EntityMapping) {
        lock.lock(); defer { lock.unlock() }
        let table = associations[mapping.name] ?? AssociationTable()
        associations[mapping.name] = table
        table.bySource[ObjectIdentifier(source), default: []].append(table.pairs.count)
        table.byDestination[ObjectIdentifier(destination), default: []].append(table.pairs.count)
        table.pairs.append((source, destination))
        destinationsBySource[ObjectIdentifier(source), default: []].append(destination)
    }

    /// The destination instances made from `sourceInstances` under the named
    /// mapping, in association order; every one the mapping made when
    /// `sourceInstances` is nil (MG-15).
    /// - Throws: 134110 for a name that is neither in the mapping model nor associated.
    public func destinationInstances(forEntityMappingName name: String, sourceInstances: [ManagedObject]?) throws -> [ManagedObject] {
        lock.lock(); defer { lock.unlock() }
        let table = try associationTable(name)
        guard let sourceInstances else { return table.pairs.map(\.destination) }
        var out: [ManagedObject] = []
        for source in sourceInstances {
            for index in table.bySource[ObjectIdentifier(source)] ?? [] { out.append(table.pairs[index].destination) }
        }
        return out
    }

    /// The source instances the named mapping made `destinationInstances`
    /// from; every one it used when nil (MG-16).
    /// - Throws: 134110 for an unknown mapping name.
    public func sourceInstances(forEntityMappingName name: String, destinationInstances: [ManagedObject]?) throws -> [ManagedObject] {
        lock.lock(); defer { lock.unlock() }
        let table = try associationTable(name)
        guard let destinationInstances else {
            var seen: Set<ObjectIdentifier> = []
            return table.pairs.map(\.source).filter { seen.insert(ObjectIdentifier($0)).inserted }
        }
        var out: [ManagedObject] = []
        for destination in destinationInstances {
            for index in table.byDestination[ObjectIdentifier(destination)] ?? [] { out.append(table.pairs[index].source) }
        }
        return out
    }

    /// Every destination instance made from the given source instances,
    /// whatever mapping made them, in order: what a relationship mapping
    /// needs to point at the migrated objects of the source's related ones.
    public func destinationInstances(forSourceInstances sourceInstances: [ManagedObject]) -> [ManagedObject] {
        lock.lock(); defer { lock.unlock() }
        return sourceInstances.flatMap { destinationsBySource[ObjectIdentifier($0)] ?? [] }
    }

    private func associationTable(_ name: String) throws -> AssociationTable {
        if let table = associations[name] { return table }
        if mappingModel == nil || mappingModel?.entityMappingsByName[name] != nil { return AssociationTable() }
        throw CoreDataError(.migration, "the mapping model has no entity mapping named '\(name)'", userInfo: [CoreDataError.entityMappingErrorKey: name])
    }

    /// Forgets every association; the contexts keep their objects (MG-13).
    public func reset() {
        lock.lock(); defer { lock.unlock() }
        associations = [:]
        destinationsBySource = [:]
    }

    /// A fetch request for the source entity's own instances (sub-entities
    /// excluded) matching `predicateString` (Core Data's
    /// `fetchRequestForSourceEntityNamed:predicateString:`).
    /// - Throws: 134110 for an unknown entity or a predicate that does not parse.
    public func fetchRequest(forSourceEntityNamed name: String, predicateString: String) throws -> AnyFetchRequest {
        guard let entity = sourceModel.entitiesByName[name] else {
            throw CoreDataError(.migration, "the source model has no entity named \(name)", userInfo: [CoreDataError.entityNameErrorKey: name])
        }
        let request = FetchRequest(entityName: name)
        request.entity = entity
        request.includesSubentities = false
        request.returnsObjectsAsFaults = false
        do {
            request.predicate = try FetchPredicate(format: predicateString)
        } catch let error as PredicateSyntaxError {
            throw CoreDataError(.migration, "source predicate for \(name) does not parse at column \(error.column): \(error.reason)\n\(error.caretDiagram)",
                                userInfo: [CoreDataError.underlyingErrorKey: error, CoreDataError.expressionPositionErrorKey: error.position])
        }
        return request
    }

    // MARK: - FUNCTION($manager, …) and $manager.key

    /// The manager's methods value expressions can call:
    /// `destinationInstancesForEntityMappingNamed:sourceInstances:`,
    /// `sourceInstancesForEntityMappingNamed:destinationInstances:`,
    /// `destinationInstancesForSourceRelationshipNamed:sourceInstances:` and
    /// `fetchRequestForSourceEntityNamed:predicateString:`.
    open func evaluateFunction(_ selector: String, arguments: [Any?]) throws -> Any? {
        func name() throws -> String {
            guard arguments.count == 2, let name = arguments[0] as? String else {
                throw ExpressionFunctionError.badArguments(selector, reason: "expects a name and a second argument")
            }
            return name
        }
        switch selector {
        case Self.destinationInstancesForEntityMappingSelector:
            let name = try name()
            return try destinationInstances(forEntityMappingName: name, sourceInstances: EntityMigrationPolicy.managedObjects(in: arguments[1]) ?? [])
        case Self.sourceInstancesForEntityMappingSelector:
            let name = try name()
            return try sourceInstances(forEntityMappingName: name, destinationInstances: EntityMigrationPolicy.managedObjects(in: arguments[1]) ?? [])
        case Self.destinationInstancesForSourceRelationshipSelector:
            _ = try name()
            return destinationInstances(forSourceInstances: EntityMigrationPolicy.managedObjects(in: arguments[1]) ?? [])
        case Self.fetchRequestForSourceEntitySelector:
            guard arguments.count == 2, let entity = arguments[0] as? String, let predicate = arguments[1] as? String else {
                throw ExpressionFunctionError.badArguments(selector, reason: "expects an entity name and a predicate string")
            }
            return try fetchRequest(forSourceEntityNamed: entity, predicateString: predicate)
        default:
            throw ExpressionFunctionError.unknownSelector(selector, receiver: String(describing: type(of: self)))
        }
    }

    /// `$manager.sourceContext`, `destinationContext`, `sourceModel`,
    /// `destinationModel`, `mappingModel`, `userInfo`, `currentEntityMapping`,
    /// `migrationProgress`.
    public func value(forKey key: String) throws -> Any? {
        switch key {
        case "sourceContext": return sourceContext
        case "destinationContext": return destinationContext
        case "sourceModel": return sourceModel
        case "destinationModel": return destinationModel
        case "mappingModel": return mappingModel
        case "userInfo": return userInfo
        case "currentEntityMapping": return currentEntityMapping
        case "migrationProgress": return migrationProgress
        default: throw KeyValueCodingError.unknownKey(key, typeName: "MigrationManager")
        }
    }

    /// Evaluates a mapping's expression with the migration variables bound.
    /// Expression errors become 134110 naming the mapping and property; an
    /// error from a receiver's method (`FUNCTION($entityPolicy, …)`) 134170
    /// unless it already is a Core Data error.
    public func evaluate(_ expression: FetchExpression, source: ManagedObject?, destination: ManagedObject?, mapping: EntityMapping,
                         property: PropertyMapping?, policy: EntityMigrationPolicy) throws -> Any? {
        var variables: [String: Any?] = [Self.managerKey: self, Self.entityMappingKey: mapping, Self.entityPolicyKey: policy]
        variables[Self.sourceObjectKey] = .some(source)
        variables[Self.destinationObjectKey] = .some(destination)
        variables[Self.propertyMappingKey] = .some(property)
        let place = "\(mapping.name)\(property.map { ".\($0.name)" } ?? " source expression")"
        var info: [String: Any] = [CoreDataError.entityMappingErrorKey: mapping.name]
        if let property { info[CoreDataError.propertyNameErrorKey] = property.name }
        do {
            return try expression.evaluate(with: source, substitutionVariables: variables)
        } catch let error as PredicateEvaluationError {
            info[CoreDataError.underlyingErrorKey] = error
            throw CoreDataError(.migration, "the value expression of \(place) (\(expression.expressionFormat)) failed: \(error)", userInfo: info)
        } catch let error as ExpressionFunctionError {
            info[CoreDataError.underlyingErrorKey] = error
            throw CoreDataError(.entityMigrationPolicy, "the value expression of \(place) (\(expression.expressionFormat)) failed: \(error)", userInfo: info)
        }
    }

    // MARK: - Migrating (MG-08, MG-09)

    /// Migrates the store at `sourceURL` into the store at `destinationURL`
    /// (created when missing; appended to when it exists) with `mapping`
    /// (MG-08). Checks first, before anything is written: the source store
    /// exists (else 134150), both models are valid, and the mapping fits them
    /// (134110 listing every problem: missing entities or properties,
    /// version hashes, policies not registered). Then runs the stages (MG-09)
    /// and saves the destination context.
    ///
    /// - Throws: 134150 when the source store cannot be opened, 134160 for
    ///   the destination store, 134170 for a policy's failure (its error
    ///   underneath), the error given to `cancelMigration(with:)` as is,
    ///   134110 with Core Data's "mandatory destination" reason when an
    ///   object would lack a required value (`mandatoryValueError`), other
    ///   validation errors of the save as they are.
    open func migrateStore(from sourceURL: URL, sourceType: String, options sourceOptions: [String: Any] = [:], with mapping: MappingModel,
                           toDestinationURL destinationURL: URL, destinationType: String, destinationOptions: [String: Any] = [:]) throws {
        guard FileManager.default.fileExists(atPath: sourceURL.path) else {
            throw CoreDataError(.migrationManagerSourceStore, "there is no source store at \(sourceURL.path) to migrate",
                                userInfo: [CoreDataError.filePathErrorKey: sourceURL.path])
        }
        try sourceModel.markInUse()
        try destinationModel.markInUse()
        try mapping.validate(sourceModel: sourceModel, destinationModel: destinationModel)
        try begin(totalUnits: 1)
        mappingModel = mapping
        var succeeded = false
        defer { finish(succeeded: succeeded) }

        let sourceCoordinator = try PersistentStoreCoordinator(managedObjectModel: sourceModel)
        var readOptions = sourceOptions
        readOptions[PersistentStore.readOnlyOption] = true
        readOptions[PersistentStore.migratePersistentStoresAutomaticallyOption] = nil
        do {
            try sourceCoordinator.addPersistentStore(ofType: sourceType, at: sourceURL, options: readOptions)
        } catch {
            throw Self.wrap(error, .migrationManagerSourceStore, "the source store at \(sourceURL.path) cannot be opened with the source model", path: sourceURL.path)
        }
        let destinationExisted = FileManager.default.fileExists(atPath: destinationURL.path)
        let destinationCoordinator = try PersistentStoreCoordinator(managedObjectModel: destinationModel)
        do {
            try destinationCoordinator.addPersistentStore(ofType: destinationType, at: destinationURL, options: destinationOptions)
        } catch {
            for store in sourceCoordinator.persistentStores { try? sourceCoordinator.remove(store) }
            throw Self.wrap(error, .migrationManagerDestinationStore, "the destination store at \(destinationURL.path) cannot be opened", path: destinationURL.path)
        }
        let source = ManagedObjectContext(coordinator: sourceCoordinator)
        let destination = ManagedObjectContext(coordinator: destinationCoordinator, sharingQueueOf: source)
        sourceContext = source
        destinationContext = destination
        defer {
            for store in sourceCoordinator.persistentStores { try? sourceCoordinator.remove(store) }
            for store in destinationCoordinator.persistentStores { try? destinationCoordinator.remove(store) }
            if !succeeded && !destinationExisted { Self.removeStoreFiles(at: destinationURL) }
        }
        try source.performAndWait {
            try runStages(mapping)
            try advance(.save, nil)
            try checkMandatoryDestinationValues(destination, sourceURL: sourceURL, destinationURL: destinationURL)
            do {
                try destination.save()
            } catch let error as CoreDataError where !error.code.isValidationError {
                throw Self.wrap(error, .migrationManagerDestinationStore, "saving the destination store at \(destinationURL.path) failed", path: destinationURL.path)
            }
        }
        succeeded = true
    }

    /// The three stages over every entity mapping, stage by stage (MG-09).
    func runStages(_ mapping: MappingModel) throws {
        guard let source = sourceContext else { return }
        var policies: [ObjectIdentifier: EntityMigrationPolicy] = [:]
        for entityMapping in mapping.entityMappings {
            let type = entityMapping.entityMigrationPolicyClassName.flatMap(EntityMigrationPolicy.policyType(named:)) ?? EntityMigrationPolicy.self
            policies[ObjectIdentifier(entityMapping)] = type.init()
        }
        func policy(_ m: EntityMapping) -> EntityMigrationPolicy { policies[ObjectIdentifier(m)]! }

        // The source instances of every mapping, first: their number sizes the progress.
        var sources: [ObjectIdentifier: [ManagedObject]] = [:]
        for entityMapping in mapping.entityMappings {
            sources[ObjectIdentifier(entityMapping)] = try guarded(entityMapping, .createDestinationInstances) {
                try sourceInstances(of: entityMapping, policy: policy(entityMapping), in: source)
            }
        }
        let instanceCount = Double(sources.values.reduce(0) { $0 + $1.count })
        setTotalUnits(2 * instanceCount + Double(mapping.entityMappings.count) + 1)

        for entityMapping in mapping.entityMappings {
            try advance(.createDestinationInstances, entityMapping)
            let p = policy(entityMapping)
            try guarded(entityMapping, .createDestinationInstances) {
                try p.begin(entityMapping, with: self)
                for instance in sources[ObjectIdentifier(entityMapping)] ?? [] {
                    try p.createDestinationInstances(forSource: instance, in: entityMapping, manager: self)
                    try advance(.createDestinationInstances, entityMapping, units: 1)
                }
                try p.endInstanceCreation(forMapping: entityMapping, manager: self)
            }
        }
        for entityMapping in mapping.entityMappings {
            try advance(.createRelationships, entityMapping)
            let p = policy(entityMapping)
            let sourceCount = sources[ObjectIdentifier(entityMapping)]?.count ?? 0
            try guarded(entityMapping, .createRelationships) {
                let destinations = try destinationInstances(forEntityMappingName: entityMapping.name, sourceInstances: nil)
                let unit = destinations.isEmpty ? 0 : Double(sourceCount) / Double(destinations.count)
                for instance in destinations {
                    try p.createRelationships(forDestination: instance, in: entityMapping, manager: self)
                    try advance(.createRelationships, entityMapping, units: unit)
                }
                try p.endRelationshipCreation(forMapping: entityMapping, manager: self)
            }
        }
        for entityMapping in mapping.entityMappings {
            try advance(.validate, entityMapping)
            try guarded(entityMapping, .validate) {
                try policy(entityMapping).performCustomValidation(forMapping: entityMapping, manager: self)
            }
            try advance(.validate, entityMapping, units: 1)
        }
        for entityMapping in mapping.entityMappings {
            try guarded(entityMapping, .validate) { try policy(entityMapping).end(entityMapping, manager: self) }
        }
    }

    /// The instances a mapping processes: its source expression's
    /// collection, or every instance of its source entity (sub-entities
    /// excluded) with the relationships its mappings read prefetched.
    private func sourceInstances(of mapping: EntityMapping, policy: EntityMigrationPolicy, in context: ManagedObjectContext) throws -> [ManagedObject] {
        if let expression = mapping.sourceExpression {
            let value = try evaluate(expression, source: nil, destination: nil, mapping: mapping, property: nil, policy: policy)
            return EntityMigrationPolicy.managedObjects(in: value) ?? []
        }
        guard let entity = sourceEntity(for: mapping), mapping.mappingType != .add else { return [] }
        let request = FetchRequest(entityName: entity.name)
        request.includesSubentities = false
        request.returnsObjectsAsFaults = false
        var keys: [String] = []
        for property in mapping.relationshipMappings {
            if let expression = property.valueExpression { MappingModel.collectSourceKeys(expression, into: &keys) }
        }
        request.relationshipKeyPathsForPrefetching = Array(Set(keys.filter { entity.relationshipsByName[$0]?.isToMany == true })).sorted()
        return try context.fetch(request)
    }

    /// Runs one stage's work for a mapping; errors that are not Core Data's
    /// (nor the cancellation's) become 134170 with the stage and mapping.
    @discardableResult
    private func guarded<T>(_ mapping: EntityMapping, _ stage: MigrationStage, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch {
            // After cancelMigration(with:), whatever stopped the work, the
            // migration throws the very error given (MG-12).
            lock.lock(); let cancelled = cancellation; lock.unlock()
            if let cancelled { throw cancelled }
            if var coreData = error as? CoreDataError {
                if coreData.userInfo[CoreDataError.entityMappingErrorKey] == nil { coreData.userInfo[CoreDataError.entityMappingErrorKey] = mapping.name }
                if coreData.userInfo[CoreDataError.migrationStageErrorKey] == nil { coreData.userInfo[CoreDataError.migrationStageErrorKey] = stage.rawValue }
                throw coreData
            }
            throw CoreDataError(.entityMigrationPolicy, "the entity migration policy of \(mapping.name) failed to \(stage.rawValue): \(error)",
                                userInfo: [CoreDataError.underlyingErrorKey: error, CoreDataError.entityMappingErrorKey: mapping.name,
                                           CoreDataError.migrationStageErrorKey: stage.rawValue])
        }
    }

    static func wrap(_ error: Error, _ code: CoreDataError.Code, _ message: String, path: String) -> CoreDataError {
        let detail = (error as? CoreDataError)?.message ?? "\(error)"
        return CoreDataError(code, "\(message): \(detail)", userInfo: [CoreDataError.underlyingErrorKey: error, CoreDataError.filePathErrorKey: path])
    }

    /// Deletes a store file and the files SQLite keeps beside it.
    static func removeStoreFiles(at url: URL) {
        for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: url.path + suffix) }
    }
}

extension EntityMapping: KeyValueCoding {
    /// `$entityMapping.name` and the other fields, for value expressions.
    public func value(forKey key: String) throws -> Any? {
        switch key {
        case "name": return name
        case "sourceEntityName": return sourceEntityName
        case "destinationEntityName": return destinationEntityName
        case "mappingType": return Int(mappingType.rawValue)
        case "userInfo": return userInfo
        case "entityMigrationPolicyClassName": return entityMigrationPolicyClassName
        default: throw KeyValueCodingError.unknownKey(key, typeName: "EntityMapping")
        }
    }
}

extension PropertyMapping: KeyValueCoding {
    /// `$propertyMapping.name` and `userInfo`, for value expressions.
    public func value(forKey key: String) throws -> Any? {
        switch key {
        case "name": return name
        case "userInfo": return userInfo
        default: throw KeyValueCodingError.unknownKey(key, typeName: "PropertyMapping")
        }
    }
}
