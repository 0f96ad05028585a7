import Foundation
import Testing
@testable import storesyncctl

@Suite struct PredicateCommandTests {
    func run(_ arguments: [String]) throws -> PredicateCommand.Outcome {
        try PredicateCommand.parse(arguments).execute()
    }

    func temporaryJSON(_ text: String) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("pred-\(UUID().uuidString).json")
        try Data(text.utf8).write(to: url)
        return url.path
    }

    @Test func printsTheCanonicalForm() throws {
        let outcome = try run(["name beginswith[cd] %@ and age => %d", "--arg", "ann", "--arg", "30"])
        #expect(outcome == .init(standardOutput: "name BEGINSWITH[cd] \"ann\" AND age >= 30\n", standardError: "", exitCode: 0))
        let json = try run(["a = 1", "--json"])
        #expect(json.standardOutput == "{\"predicateFormat\":\"a == 1\"}\n")
    }

    @Test func argumentsAreJSONWhenTheyParseAsJSON() throws {
        let outcome = try run(["a == %@ AND b == %@ AND c IN %@ AND d == %@ AND e == %@ AND f == %@",
                               "--arg", "2.5", "--arg", "true", "--arg", "[1, \"x\"]", "--arg", "null", "--arg", "\"quoted\"", "--arg", "plain text"])
        #expect(outcome.standardOutput == "a == 2.5 AND b == TRUE AND c IN {1, \"x\"} AND d == nil AND e == \"quoted\" AND f == \"plain text\"\n")
        #expect(PredicateCommand.parseArgument("30") as? Int == 30)
        #expect(PredicateCommand.parseArgument("Ann") as? String == "Ann")
    }

    @Test func syntaxErrorsExit65WithTheColumn() throws {
        let outcome = try run(["(name == 'x'"])
        #expect(outcome.exitCode == 65)
        #expect(outcome.standardOutput.isEmpty)
        #expect(outcome.standardError.hasPrefix("predicate syntax error at column 13: expected ')' to close '(' opened at column 1"))
        #expect(outcome.standardError.contains("(name == 'x'\n            ^"))
        #expect(try run(["a == %@"]).standardError.contains("%@ has no argument"))
        #expect(throws: (any Error).self) { try PredicateCommand.parse(["a == 1", "--bogus"]) }
    }

    @Test func evaluatesAgainstAJSONArray() throws {
        let path = try temporaryJSON(#"""
            [{"name": "Ärger", "age": 41, "tags": ["x"]},
             {"name": "Bob", "age": 20, "tags": []},
             {"name": "arg", "age": 30.0, "tags": ["x", "y"], "nick": null}]
            """#)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let lines = try run(["name LIKE[cd] 'arg*'", "--evaluate", path])
        #expect(lines == .init(standardOutput: "0\n2\n", standardError: "", exitCode: 0))
        let json = try run(["age >= %d AND ANY tags == 'x'", "--arg", "30", "--evaluate", path, "--json"])
        #expect(json.standardOutput == "[0,2]\n")
        let none = try run(["age > 100", "--evaluate", path, "--json"])
        #expect(none.standardOutput == "[]\n")
        let badKey = try run(["nick == nil", "--evaluate", path])
        #expect(badKey.exitCode == 65)
        #expect(badKey.standardError.contains("object 0:") && badKey.standardError.contains("unknown key 'nick'"))
        let mismatch = try run(["name > 3", "--evaluate", path])
        #expect(mismatch.exitCode == 65)
        #expect(mismatch.standardError.contains("operator '>'"))
    }

    @Test func badFilesAreReported() throws {
        let missing = try run(["a == 1", "--evaluate", "/nonexistent/rows.json"])
        #expect(missing.exitCode == 66)
        let path = try temporaryJSON(#"{"not": "an array"}"#)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let notArray = try run(["a == 1", "--evaluate", path])
        #expect(notArray.exitCode == 65)
        #expect(notArray.standardError.contains("is not a JSON array"))
    }
}
