import ArgumentParser
import Foundation
import ObjectGraph

/// `storesyncctl model check PATH`: exit 0 for a valid model (warnings go to
/// stderr), or print every problem and exit 65.
struct ModelCheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Validate a model; print every problem and exit 65 if it is invalid.",
        discussion: """
            Warnings (valid, but probably not meant) go to stderr and do not change the status.

            Examples:
              storesyncctl model check Model.xcdatamodeld
              storesyncctl model check Model.momd/Model2.mom

            Exit statuses: 0 valid; 64 usage; 65 invalid (every problem with file, line, \
            entity and property); 66 no such model file.
            """
    )

    @Argument(help: "A .xcdatamodeld bundle (its current version), a .xcdatamodel folder, or a contents file.")
    var path: String

    func run() throws {
        let model: ManagedObjectModel
        do {
            model = try ManagedObjectModel(contentsOf: URL(fileURLWithPath: path))
        } catch let error as CoreDataError {
            let details = error.detailedErrors
            printError(details.isEmpty ? error.message : details.map(\.message).joined(separator: "\n"))
            switch error.code {
            case .fileReadNoSuchFile, .fileNoSuchFile: throw SysExit.noInput
            default: throw SysExit.dataError
            }
        }
        for warning in model.problems() where warning.isWarning { printError(warning.description) }
        print("\(path): ok (\(model.entities.count) entities)")
    }
}
