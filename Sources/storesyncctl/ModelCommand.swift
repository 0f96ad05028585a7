import ArgumentParser
import Foundation
import ObjectGraph

/// `storesyncctl model show|check PATH`.
struct ModelCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "model",
        abstract: "Show or check a managed object model (.xcdatamodeld, .momd, .xcdatamodel, contents or .mom file; show also takes a SQLite store).",
        discussion: """
            Examples:
              storesyncctl model show Model.xcdatamodeld
              storesyncctl model check Model.xcdatamodeld

            Exit statuses: 0 success; 64 usage; 65 an invalid or unreadable model or store; \
            66 no such file.
            """,
        subcommands: [ModelShowCommand.self, ModelCheckCommand.self]
    )
}

/// Reads the model a command names, turning read failures into the exit
/// statuses a script can act on: 66 for a missing file, 65 for a bad model.
enum ModelLoading {
    static func load(_ path: String) throws -> ManagedObjectModel {
        do {
            return try ManagedObjectModel(contentsOf: URL(fileURLWithPath: path))
        } catch let error as CoreDataError {
            printError(error.message)
            switch error.code {
            case .fileReadNoSuchFile, .fileNoSuchFile: throw SysExit.noInput
            default: throw SysExit.dataError
            }
        }
    }
}

func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}
