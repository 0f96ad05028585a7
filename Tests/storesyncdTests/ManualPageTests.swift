import Foundation
import XCTest

/// Issue 17: the manual pages `man/storesyncctl.1` and `man/storesyncd.8`
/// stay in step with the argument definitions (every subcommand and every
/// option of the parsers, as swift-argument-parser dumps them, appears in
/// the page) and render without a warning; the completion scripts.
final class ManualPageTests: XCTestCase {
    func testStoresyncctlPageHasEverySubcommandAndOption() throws {
        let page = try Self.page("man/storesyncctl.1")
        let tool = try Self.dump(Daemon.ctlBinary)
        var checked = 0
        func visit(_ command: [String: Any], path: [String]) {
            if !path.isEmpty {
                let name = path.joined(separator: " ")
                guard let section = page.section(subsection: name) else {
                    return XCTFail("storesyncctl \(name) has no '.SS \(name)' section in man/storesyncctl.1")
                }
                checked += 1
                for argument in Self.displayedArguments(command) {
                    if let long = argument.long {
                        let inCommon = Self.daemonOptions.contains(long) && (page.section(heading: "COMMON OPTIONS")?.contains(path[0]) ?? false)
                        XCTAssertTrue(section.contains("--\(long)") || inCommon, "storesyncctl \(name): --\(long) is not in its section of the page")
                    } else if let value = argument.valueName {
                        XCTAssertTrue(section.contains(value), "storesyncctl \(name): the argument <\(value)> is not in its section of the page")
                    }
                }
            }
            for sub in (command["subcommands"] as? [[String: Any]]) ?? [] where (sub["shouldDisplay"] as? Bool) ?? true {
                guard let name = sub["commandName"] as? String, name != "help" else { continue }
                visit(sub, path: path + [name])
            }
        }
        visit(tool, path: [])
        XCTAssertGreaterThanOrEqual(checked, 20, "the dump had fewer commands than storesyncctl has")
        // Exit statuses are documented in the page, as in --help.
        let exits = try XCTUnwrap(page.section(heading: "EXIT STATUS"))
        for status in ["0", "1", "3", "64", "65", "66", "70", "74", "75", "76", "77", "78"] {
            XCTAssertTrue(exits.contains(".B \(status)\n"), "exit status \(status) is not in EXIT STATUS")
        }
    }

    func testStoresyncdPageHasEveryOption() throws {
        let page = try Self.page("man/storesyncd.8")
        let tool = try Self.dump(Daemon.binary)
        let options = try XCTUnwrap(page.section(heading: "OPTIONS"))
        let arguments = Self.displayedArguments(tool)
        XCTAssertGreaterThanOrEqual(arguments.count, 9)
        for argument in arguments {
            let long = try XCTUnwrap(argument.long, "storesyncd has a positional argument the page does not know")
            XCTAssertTrue(options.contains("--\(long)"), "storesyncd --\(long) is not in OPTIONS")
        }
        for status in ["0", "1", "64", "78"] {
            XCTAssertTrue(page.section(heading: "EXIT STATUS")?.contains(".B \(status)\n") == true, "exit status \(status)")
        }
    }

    /// `groff -man -Tutf8 -ww` (Debian's groff-base, installed by .ci/run) renders both pages without a warning.
    func testPagesRenderWithoutWarnings() throws {
        let groff = "/usr/bin/groff"
        guard FileManager.default.isExecutableFile(atPath: groff) else {
            return XCTFail("groff is not installed (Debian: apt-get install groff-base; .ci/run does)")
        }
        for file in ["man/storesyncctl.1", "man/storesyncd.8"] {
            let path = Daemon.repositoryRoot.appendingPathComponent(file).path
            let result = try Daemon.runTool(groff, ["-man", "-Tutf8", "-ww", path])
            XCTAssertEqual(result.status, 0, "\(file): \(result.stderr)")
            XCTAssertEqual(result.stderr, "", "\(file) renders with warnings")
            // The header line is not emboldened (grotty overstrikes headings).
            let title = file.hasSuffix(".1") ? "STORESYNCCTL(1)" : "STORESYNCD(8)"
            XCTAssertTrue(result.stdout.hasPrefix(title) && result.stdout.count > 2000, "\(file) rendered to nothing useful: \(result.stdout.prefix(200))")
        }
    }

    /// `completion bash|zsh|fish` prints each shell's script, generated from the same definitions.
    func testCompletionScripts() throws {
        let bash = try Daemon.ctl(["completion", "bash"])
        XCTAssertEqual(bash.status, 0, bash.stderr)
        XCTAssertTrue(bash.stdout.contains("complete ") && bash.stdout.contains("storesyncctl"), bash.stdout)
        for word in ["status", "conflicts", "resolve", "--take", "--follow", "--after", "completion"] {
            XCTAssertTrue(bash.stdout.contains(word), "bash completion lacks \(word)")
        }
        let zsh = try Daemon.ctl(["completion", "zsh"])
        XCTAssertEqual(zsh.status, 0, zsh.stderr)
        XCTAssertTrue(zsh.stdout.hasPrefix("#compdef storesyncctl"), String(zsh.stdout.prefix(80)))
        let fish = try Daemon.ctl(["completion", "fish"])
        XCTAssertEqual(fish.status, 0, fish.stderr)
        XCTAssertTrue(fish.stdout.contains("complete -c 'storesyncctl'"), String(fish.stdout.prefix(200)))
        let unknown = try Daemon.ctl(["completion", "tcsh"])
        XCTAssertEqual(unknown.status, 64, unknown.stderr)
        XCTAssertTrue(unknown.stderr.contains("tcsh"), unknown.stderr)
    }

    // MARK: - Helpers

    /// Options every daemon command takes (DaemonOptions), documented once under COMMON OPTIONS.
    static let daemonOptions: Set<String> = ["socket", "config", "timeout"]

    struct Argument {
        var long: String?
        var valueName: String?
    }

    static func displayedArguments(_ command: [String: Any]) -> [Argument] {
        ((command["arguments"] as? [[String: Any]]) ?? []).compactMap { argument in
            guard (argument["shouldDisplay"] as? Bool) ?? true else { return nil }
            let names = (argument["names"] as? [[String: Any]]) ?? []
            let long = names.first { $0["kind"] as? String == "long" }?["name"] as? String
            if long == "help" || long == "version" { return nil }
            return Argument(long: long, valueName: argument["valueName"] as? String)
        }
    }

    /// The parser's own description of the tool (`--experimental-dump-help`).
    static func dump(_ binary: URL) throws -> [String: Any] {
        let result = try Daemon.runTool(binary.path, ["--experimental-dump-help"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        return try XCTUnwrap(object?["command"] as? [String: Any], "no command in the dump")
    }

    struct Page {
        /// The roff source with `\-` as `-`, so options read as typed.
        var text: String

        /// The lines under `.SS NAME` up to the next `.SS` or `.SH`.
        func section(subsection name: String) -> String? { section { $0 == ".SS \(name)" || $0 == ".SS \"\(name)\"" } }

        /// The lines under `.SH NAME` up to the next `.SH`.
        func section(heading name: String) -> String? {
            section(ending: [".SH"]) { $0 == ".SH \(name)" || $0 == ".SH \"\(name)\"" }
        }

        private func section(ending: [String] = [".SS", ".SH"], _ isHeading: (String) -> Bool) -> String? {
            let lines = text.components(separatedBy: "\n")
            guard let start = lines.firstIndex(where: isHeading) else { return nil }
            let rest = lines[(start + 1)...]
            let end = rest.firstIndex { line in ending.contains { line.hasPrefix($0 + " ") } } ?? lines.endIndex
            return lines[(start + 1)..<end].joined(separator: "\n") + "\n"
        }
    }

    static func page(_ file: String) throws -> Page {
        let text = try String(contentsOf: Daemon.repositoryRoot.appendingPathComponent(file), encoding: .utf8)
        return Page(text: text.replacingOccurrences(of: "\\-", with: "-"))
    }
}
