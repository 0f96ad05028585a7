import ArgumentParser
import Foundation
import ObjectGraph

/// `storesync-bench predicate [--json]`: parse time for a 1,000-clause
/// predicate and in-memory evaluation throughput over 100,000 dictionaries.
struct PredicateBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "predicate",
        abstract: "Predicate parsing, evaluation and sorting throughput."
    )

    @Flag(help: "Print one JSON object per workload instead of a table.")
    var json = false

    @Option(help: "Number of dictionaries to evaluate against.")
    var rows = 100_000

    @Option(help: "Passes over the rows per evaluation workload (the best pass is reported).")
    var passes = 5

    @Option(help: "Run only the workloads whose name contains this text.")
    var filter: String?

    func wanted(_ name: String) -> Bool {
        guard let filter else { return true }
        return name.localizedCaseInsensitiveContains(filter)
    }

    struct Result {
        let workload: String
        let operations: Int
        let unit: String
        let seconds: Double
        var perSecond: Double { seconds > 0 ? Double(operations) / seconds : 0 }
    }

    func run() throws {
        var results: [Result] = []
        let dataset = PredicateBenchmark.makeRows(rows)

        // Parsing: one predicate of 1,000 comparisons joined by AND/OR.
        let clauses = PredicateBenchmark.thousandClauseFormat()
        var parsed = FetchPredicate.truePredicate
        let parseSeconds = try PredicateBenchmark.best(of: 5) { parsed = try FetchPredicate(format: clauses) }
        results.append(Result(workload: "parse 1000-clause predicate", operations: 1, unit: "parse", seconds: parseSeconds))
        var formatted = ""
        let formatSeconds = try PredicateBenchmark.best(of: 5) { formatted = parsed.predicateFormat }
        results.append(Result(workload: "format 1000-clause predicate", operations: 1, unit: "format", seconds: formatSeconds))
        guard try FetchPredicate(format: formatted) == parsed else { throw ValidationError("round trip failed") }

        // Evaluation: each row costs exactly one comparison for the simple workloads.
        let workloads: [(String, String, Int)] = [
            ("eval int comparison (age > 30)", "age > 30", 1),
            ("eval string equality (name == 'user42')", "name == 'user42'", 1),
            ("eval double comparison (score <= 50.5)", "score <= 50.5", 1),
            ("eval mixed number types (count == 7.0)", "count == 7.0", 1),
            ("eval BEGINSWITH[cd]", "name BEGINSWITH[cd] 'USER1'", 1),
            ("eval LIKE[c] 'user*9'", "name LIKE[c] 'user*9'", 1),
            ("eval 3-clause AND (all evaluated)", "age >= 0 AND score >= 0 AND name != nil", 3),
            ("eval IN {5 values}", "age IN {1, 2, 3, 4, 5}", 1),
        ]
        for (name, format, comparisonsPerRow) in workloads where wanted(name) {
            let predicate = try FetchPredicate(format: format)
            var matches = 0
            let seconds = try PredicateBenchmark.best(of: passes) {
                matches = 0
                for row in dataset where try predicate.evaluate(with: row) { matches += 1 }
            }
            if matches < 0 { print(matches) }
            results.append(Result(workload: name, operations: dataset.count * comparisonsPerRow, unit: "comparisons", seconds: seconds))
        }

        if wanted("eval ANY") {
        let anyPredicate = try FetchPredicate(format: "ANY tags == 'red'")
        let anySeconds = try PredicateBenchmark.best(of: passes) {
            for row in dataset { _ = try anyPredicate.evaluate(with: row) }
        }
        results.append(Result(workload: "eval ANY tags == 'red' (3 tags)", operations: dataset.count, unit: "rows", seconds: anySeconds))
        }

        if wanted("sort") {
        let sortCount = min(dataset.count, 100_000)
        let sortSeconds = try PredicateBenchmark.best(of: 2) {
            _ = try FetchSortDescriptor.sort(Array(dataset.prefix(sortCount)), using: [
                FetchSortDescriptor(key: "age"), FetchSortDescriptor(key: "name", ascending: false),
            ])
        }
        results.append(Result(workload: "sort by 2 descriptors", operations: sortCount, unit: "rows", seconds: sortSeconds))
        }

        if json {
            for r in results {
                let object: [String: Any] = [
                    "workload": r.workload, "operations": r.operations, "unit": r.unit,
                    "seconds": r.seconds, "perSecond": r.perSecond.rounded(),
                ]
                let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
                print(String(decoding: data, as: UTF8.self))
            }
        } else {
            print(PredicateBenchmark.pad("workload", 44) + PredicateBenchmark.pad("ops", 10) + PredicateBenchmark.pad("time", 12) + "throughput")
            for r in results {
                let time = r.seconds < 0.001 ? String(format: "%.1f µs", r.seconds * 1e6) : String(format: "%.2f ms", r.seconds * 1e3)
                let rate = r.perSecond >= 1e6 ? String(format: "%.2f M %@/s", r.perSecond / 1e6, r.unit) : String(format: "%.0f %@/s", r.perSecond, r.unit)
                print(PredicateBenchmark.pad(r.workload, 44) + PredicateBenchmark.pad(String(r.operations), 10) + PredicateBenchmark.pad(time, 12) + rate)
            }
        }
    }

    static func pad(_ s: String, _ width: Int) -> String {
        s.count >= width ? s + " " : s + String(repeating: " ", count: width - s.count)
    }

    /// The fastest of `count` runs: the least disturbed by other processes.
    static func best(of count: Int, _ body: () throws -> Void) throws -> Double {
        var best = Double.infinity
        for _ in 0..<max(1, count) {
            let start = DispatchTime.now().uptimeNanoseconds
            try body()
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            best = min(best, elapsed)
        }
        return best
    }

    static func makeRows(_ count: Int) -> [[String: Any]] {
        let colours = ["red", "green", "blue", "cyan"]
        var rows: [[String: Any]] = []
        rows.reserveCapacity(count)
        for i in 0..<count {
            var row: [String: Any] = [:]
            row["name"] = "user\(i)"
            row["age"] = i % 90
            row["score"] = Double(i % 1000) / 10
            row["count"] = Int16(i % 13)
            row["tags"] = [colours[i % 4], colours[(i + 1) % 4], colours[(i + 2) % 4]]
            row["active"] = i % 2 == 0
            rows.append(row)
        }
        return rows
    }

    static func thousandClauseFormat() -> String {
        let ops = ["==", "!=", "<", "<=", ">", ">=", "BEGINSWITH[c]", "IN"]
        var parts: [String] = []
        for i in 0..<1000 {
            let op = ops[i % ops.count]
            let right: String
            switch op {
            case "BEGINSWITH[c]": right = "'user\(i)'"
            case "IN": right = "{\(i), \(i + 1), \(i + 2)}"
            default: right = i % 2 == 0 ? "\(i)" : "\(Double(i) / 4)"
            }
            parts.append("field\(i % 37) \(op) \(right)")
        }
        var format = ""
        for (i, part) in parts.enumerated() {
            if i > 0 { format += i % 10 == 0 ? " OR " : " AND " }
            format += part
        }
        return format
    }
}
