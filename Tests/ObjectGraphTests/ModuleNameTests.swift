import Foundation
import Testing
import ObjectGraph

/// The module's names must be reachable qualified by the module: an app whose
/// own `Managed` protocol hides the property wrapper writes
/// `@ObjectGraph.Managed`, as it wrote `@CoreData.NSManaged`. A public type
/// named `ObjectGraph` made every such name look inside that type (issue 34).
@Suite struct ModuleNameTests {
    /// An app's own protocol with the wrapper's name, as in the ported apps.
    protocol Managed {}

    final class QualifiedNote: ObjectGraph.ManagedObject, Managed {
        @ObjectGraph.Managed var title: String?
    }

    @Test func moduleQualifiedNamesResolve() {
        let type: ObjectGraph.ManagedObject.Type = QualifiedNote.self
        #expect(type == QualifiedNote.self)
        #expect(ObjectGraph.CoreDataError.self == CoreDataError.self)
    }

    // CONST-VN-01: the library reports its own version.
    @Test func libraryVersionUnderItsOwnName() {
        #expect(ObjectGraph.ObjectGraphLibrary.version == "0.1.0")
    }
}
