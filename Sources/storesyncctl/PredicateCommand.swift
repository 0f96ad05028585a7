import ArgumentParser
import Foundation
import ObjectGraph

/// `storesyncctl predicate 'FORMAT' [--arg VALUE ...] [--evaluate FILE.json] [--json]`:
/// prints the canonical form of a predicate, or the indices of the objects in
/// a JSON array that match it. Bad predicates exit 65 (EX_DATAERR) with the
/// column of the problem on stderr.
struct PredicateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "predicate",
        abstract: "Parse a predicate and print its canonical form, or evaluate it against a JSON array.",
        discussion: """
            Each --arg fills the next %@, %K, %d or %f in FORMAT. A value that parses as JSON \
            (a number, true/false, null, a quoted string, an array) is used as that value; \
            anything else is used as a plain string.

            Examples:
              storesyncctl predicate 'name BEGINSWITH[cd] %@ AND age > %d' --arg ann --arg 30
              storesyncctl predicate 'ANY tags == "x"' --evaluate rows.json --json

            Exit statuses: 0 success; 64 usage; 65 a predicate with a syntax error (the \
            message gives its line and column, with a caret under it), a value that does not \
            fit, or --evaluate input that is not a JSON array; 66 the --evaluate file cannot \
            be read.
            """
    )

    @Argument(help: "The predicate format string.")
    var format: String

    @Option(name: .customLong("arg"), help: "A format argument (repeatable), as JSON if it parses as JSON.")
    var arguments: [String] = []

    @Option(name: .customLong("evaluate"), help: "A JSON file holding an array of objects to evaluate the predicate against.")
    var evaluateFile: String?

    @Flag(help: "Print JSON: the matching indices as an array, or {\"predicateFormat\": ...}.")
    var json = false

    /// What a run prints and how it exits; `run()` only performs it, so
    /// tests can check it without spawning a process.
    struct Outcome: Equatable {
        var standardOutput = ""
        var standardError = ""
        var exitCode: Int32 = 0
    }

    func run() throws {
        let outcome = execute()
        if !outcome.standardOutput.isEmpty { print(outcome.standardOutput, terminator: "") }
        if !outcome.standardError.isEmpty {
            FileHandle.standardError.write(Data(outcome.standardError.utf8))
        }
        if outcome.exitCode != 0 { throw ExitCode(outcome.exitCode) }
    }

    func execute() -> Outcome {
        let predicate: FetchPredicate
        do {
            predicate = try FetchPredicate(format: format, argumentArray: arguments.map(PredicateCommand.parseArgument))
        } catch let error as PredicateSyntaxError {
            return Outcome(standardError: "\(error)\n\(error.caretDiagram)\n", exitCode: SysExit.dataError.rawValue)
        } catch {
            return Outcome(standardError: "\(error)\n", exitCode: SysExit.dataError.rawValue)
        }
        guard let evaluateFile else {
            if json {
                return Outcome(standardOutput: PredicateCommand.jsonText(["predicateFormat": predicate.predicateFormat]) + "\n")
            }
            return Outcome(standardOutput: predicate.predicateFormat + "\n")
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: evaluateFile))
        } catch {
            return Outcome(standardError: "cannot read \(evaluateFile): \(error.localizedDescription)\n", exitCode: SysExit.noInput.rawValue)
        }
        guard let parsed = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]),
              let objects = parsed as? [Any] else {
            return Outcome(standardError: "\(evaluateFile) is not a JSON array\n", exitCode: SysExit.dataError.rawValue)
        }
        var matches: [Int] = []
        for (index, object) in objects.enumerated() {
            do {
                if try predicate.evaluate(with: object) { matches.append(index) }
            } catch {
                return Outcome(standardError: "object \(index): \(error)\n", exitCode: SysExit.dataError.rawValue)
            }
        }
        if json { return Outcome(standardOutput: PredicateCommand.jsonText(matches) + "\n") }
        return Outcome(standardOutput: matches.map { "\($0)\n" }.joined())
    }

    /// A JSON value if the text is one (a number, true/false, null, a quoted
    /// string, an array or object), else the text itself.
    static func parseArgument(_ text: String) -> Any? {
        guard let value = try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed]) else {
            return text
        }
        return value is NSNull ? nil : value
    }

    static func jsonText(_ value: Any) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed]) else { return "null" }
        return String(decoding: data, as: UTF8.self)
    }
}
