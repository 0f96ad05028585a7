import Foundation
import Testing

/// Every reference item that code or tests cite (`// MOC-SV-06`) must have a
/// row in `docs/REQUIREMENTS.md`. The checklists that define the IDs are not
/// in the repository, so without that row a reader of a clone could not look a
/// citation up.
///
/// It sits in ObjectGraphTests because it only reads files, and this target
/// already finds the repository root (`TestPaths`).
@Suite struct ReferenceIDsTests {
    @Test func everyCitedIDIsDefinedInRequirements() throws {
        let root = TestPaths.repositoryRoot
        let requirements = try String(contentsOf: root.appendingPathComponent("docs/REQUIREMENTS.md"), encoding: .utf8)
        let defined = ReferenceIDs.defined(inRequirements: requirements)
        // A table format change that defines nothing would pass every
        // citation as undefined; fail on the format instead.
        #expect(defined.count > 500, "docs/REQUIREMENTS.md: only \(defined.count) rows of the form `| ID | ... |` found")

        var undefined: [String: [String]] = [:]
        for directory in ["Sources", "Tests"] {
            for file in ReferenceIDs.textFiles(under: root.appendingPathComponent(directory), root: root) {
                for (line, ids) in ReferenceIDs.cited(in: file.text) {
                    for id in ids where !defined.contains(id) {
                        undefined[id, default: []].append("\(file.path):\(line)")
                    }
                }
            }
        }
        let report = undefined.keys.sorted().map { "\($0) (\(undefined[$0]!.prefix(3).joined(separator: ", ")))" }
        #expect(undefined.isEmpty, """
            Reference IDs cited but not defined in docs/REQUIREMENTS.md (add a row: ID, behaviour, source):
            \(report.joined(separator: "\n"))
            """)
    }

    @Test func scannerFindsCitationsAndRangesButNotLookalikes() {
        func ids(_ text: String) -> Set<String> { Set(ReferenceIDs.cited(in: text).flatMap(\.ids)) }
        #expect(ids("(X-01, MOM-00d) and // MOC-SV-06 PC-35g E2E-04") == ["X-01", "MOM-00d", "MOC-SV-06", "PC-35g", "E2E-04"])
        #expect(ids("MOC-MP-03…06") == ["MOC-MP-03", "MOC-MP-04", "MOC-MP-05", "MOC-MP-06"])
        #expect(ids("AT-00…AT-02, PC-40–41, OBJ-13..14") == ["AT-00", "AT-01", "AT-02", "PC-40", "PC-41", "OBJ-13", "OBJ-14"])
        #expect(ids("LIFE-28/29/30, DEP-01/03") == ["LIFE-28", "LIFE-29", "LIFE-30", "DEP-01", "DEP-03"])
        #expect(ids("MOC-SV-06 steps 7–8") == ["MOC-SV-06"])
        // Encodings, digests, UUIDs, codes and section numbers are not citations.
        #expect(ids("UTF-8, UTF-16, SHA-256, AD2A8919-0895-43EB-B50C-488928D3650C, AB-1234, E0-1, AS-1.7, x-01").isEmpty)
    }
}

/// Reads reference IDs out of text: checklist IDs are capitals and digits in
/// dash-separated parts ending in a two-digit number and at most one lower-case
/// letter (`X-01`, `MOC-SV-06`, `MOM-00d`, `PC-35g`).
enum ReferenceIDs {
    /// Prefixes of standard names that look like IDs (`UTF-16`).
    static let notReferences: Set<String> = ["UTF", "SHA", "ISO", "RFC", "CVE"]

    static let id = try! NSRegularExpression(pattern: #"(?<![A-Za-z0-9_-])((?:[A-Z][A-Z0-9]*-)+)([0-9]{2})([a-z]?)(?![A-Za-z0-9_])"#)
    /// After an ID: `…07`, `..07` or `–07`, or the whole ID again (`AT-00…AT-12`),
    /// cite every item up to that number.
    static let rangeEnd = try! NSRegularExpression(pattern: #"^\s*(?:…|\.\.\.?|–)\s*((?:[A-Z][A-Z0-9]*-)*)([0-9]{2})(?![0-9A-Za-z])"#)
    /// After an ID: `/02/03` cites those items too.
    static let listed = try! NSRegularExpression(pattern: #"^(?:/[0-9]{2}(?![0-9A-Za-z]))+"#)
    static let definitionRow = try! NSRegularExpression(pattern: #"^\|\s*([A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*-[0-9]+(?:\.[0-9]+)?[a-z]?)\s*\|"#, options: .anchorsMatchLines)

    /// IDs with a row of their own in a requirements table.
    static func defined(inRequirements text: String) -> Set<String> {
        let ns = text as NSString
        return Set(definitionRow.matches(in: text, range: NSRange(location: 0, length: ns.length)).map { ns.substring(with: $0.range(at: 1)) })
    }

    /// The IDs each line cites (1-based line numbers), ranges expanded.
    static func cited(in text: String) -> [(line: Int, ids: [String])] {
        var result: [(line: Int, ids: [String])] = []
        for (index, line) in text.components(separatedBy: "\n").enumerated() {
            let ns = line as NSString
            var ids: [String] = []
            for match in id.matches(in: line, range: NSRange(location: 0, length: ns.length)) {
                let prefix = ns.substring(with: match.range(at: 1))
                guard !notReferences.contains(String(prefix.dropLast())) else { continue }
                let number = ns.substring(with: match.range(at: 2))
                ids.append(prefix + number + ns.substring(with: match.range(at: 3)))
                let rest = ns.substring(from: match.range.upperBound)
                let restRange = NSRange(location: 0, length: (rest as NSString).length)
                if let end = rangeEnd.firstMatch(in: rest, range: restRange) {
                    let endPrefix = (rest as NSString).substring(with: end.range(at: 1))
                    if endPrefix.isEmpty || endPrefix == prefix, let first = Int(number),
                       let last = Int((rest as NSString).substring(with: end.range(at: 2))), first < last {
                        ids += (first + 1...last).map { prefix + String(format: "%02d", $0) }
                    }
                } else if let list = listed.firstMatch(in: rest, range: restRange) {
                    ids += (rest as NSString).substring(with: list.range).split(separator: "/").map { prefix + $0 }
                }
            }
            if !ids.isEmpty { result.append((index + 1, ids)) }
        }
        return result
    }

    /// Text files below `directory`, paths relative to `root`. Apple-written
    /// fixtures are data, not citations; files that are not UTF-8 are skipped.
    static func textFiles(under directory: URL, root: URL) -> [(path: String, text: String)] {
        guard let walker = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey]) else { return [] }
        let rootPath = root.standardizedFileURL.path + "/"
        var files: [(path: String, text: String)] = []
        for case let url as URL in walker {
            let path = String(url.standardizedFileURL.path.dropFirst(rootPath.count))
            if path.hasPrefix("Tests/Fixtures") { walker.skipDescendants(); continue }
            guard (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true,
                  let data = try? Data(contentsOf: url), let text = String(data: data, encoding: .utf8) else { continue }
            files.append((path, text))
        }
        return files
    }
}
