import ArgumentParser
import Foundation
import ObjectGraph
import StoreSync

/// `storesyncctl verify [GROUP] [--json]`: compares each store of a group
/// with its hub, object by object (`SyncVerifier`), from the files.
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check that a group's stores hold exactly the hub's objects, values and relationships.",
        discussion: """
            Objects are matched by global ID. For each store every difference from the hub \
            is printed: an object missing from the store, an object the hub does not have, \
            an object of another entity, an attribute whose values differ, a relationship \
            whose destinations differ (compared as the related objects' global IDs; to-manys \
            as sets, ordered ones in order). A difference on an object with an unresolved \
            conflict of that store is marked with the conflict's number: it stays until the \
            conflict is resolved. A store that cannot be read at all (no file, not attached, \
            another model) is one difference. The files are opened read-only, so verifying \
            is safe while the daemon and applications write; a change made during the check \
            may show until the daemon has carried it.

            Without GROUP every group of the configuration is verified.

            --json prints one object: {"agree": BOOL, "groups": [{"group", "agree", \
            "stores", "hubObjects", "differences": [{"store", "kind", "entity", "object", \
            "property", "storeValue", "hubValue", "conflict", "reason"}]}]} (docs/CHANGELOG-FORMAT.md).

            Exit statuses: 0 every store agrees with its hub; 1 differences were found; 64 \
            bad usage or a group the configuration does not have; 65 a hub that cannot be \
            read; 66 no configuration file, or a group whose hub does not exist yet (the \
            daemon has not run it); 78 a configuration file that cannot be used.

            Examples:
              storesyncctl verify
              storesyncctl verify notes --json
              storesyncctl verify notes --config ./storesyncd.toml
            """
    )

    @Argument(help: "The group to verify (default: every group).")
    var group: String?

    @Option(help: "The daemon's configuration file. Default: $CONFIGURATION_DIRECTORY/storesyncd.toml, else /etc/storesyncd/storesyncd.toml.")
    var config: String?

    @Flag(help: "Print one JSON object with every difference.")
    var json = false

    func run() throws { try execute().perform() }

    func execute() -> CommandOutcome {
        do {
            let configuration = try GroupLookup.configuration(config)
            let groups = try GroupLookup.groups(group.map { [$0] } ?? [], in: configuration)
            let verifications = try groups.map { try SyncVerifier(configuration: $0).verify() }
            let agree = verifications.allSatisfy(\.agrees)
            let text = json ? try Self.json(verifications) : Self.table(verifications)
            return CommandOutcome(standardOutput: text, exitCode: agree ? 0 : SysExit.differences.rawValue)
        } catch {
            return CommandOutcome.failure(error)
        }
    }

    static func json(_ verifications: [SyncVerification]) throws -> String {
        let object: [String: Any] = [
            "agree": verifications.allSatisfy(\.agrees),
            "groups": verifications.map { verification -> [String: Any] in
                ["group": verification.group, "agree": verification.agrees, "stores": verification.stores,
                 "hubObjects": verification.hubObjects, "differences": verification.differences.map(\.jsonObject)]
            },
        ]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    /// Per group a summary line, then an aligned table of differences.
    static func table(_ verifications: [SyncVerification]) -> String {
        var out = ""
        for verification in verifications {
            let stores = "\(verification.stores.count) store\(verification.stores.count == 1 ? "" : "s")"
            guard !verification.agrees else {
                out += "group \(verification.group): the hub and \(stores) (\(verification.stores.joined(separator: ", "))) agree on \(verification.hubObjects) object\(verification.hubObjects == 1 ? "" : "s")\n"
                continue
            }
            let count = verification.differences.count
            out += "group \(verification.group): \(count) difference\(count == 1 ? "" : "s") between the hub (\(verification.hubObjects) objects) and \(stores)\n"
            var rows = [["STORE", "DIFFERENCE", "ENTITY", "OBJECT", "PROPERTY", "STORE VALUE", "HUB VALUE", "NOTE"]]
            for difference in verification.differences {
                var storeValue = difference.storeValue?.text ?? "", hubValue = difference.hubValue?.text ?? ""
                switch difference.kind {
                case .missingObject: storeValue = "(missing)"; hubValue = "(present)"
                case .unexpectedObject: storeValue = "(present)"; hubValue = "(missing)"
                default: break
                }
                let note = difference.reason ?? difference.conflict.map { "conflict \($0) waits" } ?? ""
                rows.append([difference.store, difference.kind.rawValue, difference.entity ?? "", difference.globalIdentifier?.uuidString ?? "",
                             difference.property ?? "", storeValue, hubValue, note])
            }
            out += align(rows)
        }
        return out
    }

    static func align(_ rows: [[String]]) -> String {
        let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            zip(row, widths).map { $0 + String(repeating: " ", count: $1 - $0.count) }.joined(separator: "  ")
                .replacingOccurrences(of: " +$", with: "", options: .regularExpression)
        }.joined(separator: "\n") + "\n"
    }
}
