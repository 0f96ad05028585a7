import Foundation

/// A strict reader of Prometheus' text exposition format (version 0.0.4),
/// enough to check what `metrics` prints: comment lines, samples with
/// labels, families declared before their samples, histograms complete and
/// cumulative. It fails with the line number and why, like a scraper would.
struct PrometheusText {
    struct Sample: Equatable {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    struct Problem: Error, CustomStringConvertible {
        var line: Int
        var reason: String
        var description: String { "line \(line): \(reason)" }
    }

    var types: [String: String] = [:]
    var help: [String: String] = [:]
    var samples: [Sample] = []

    static let metricName = try! NSRegularExpression(pattern: "^[a-zA-Z_:][a-zA-Z0-9_:]*$")
    static let labelName = try! NSRegularExpression(pattern: "^[a-zA-Z_][a-zA-Z0-9_]*$")

    static func matches(_ regex: NSRegularExpression, _ text: String) -> Bool {
        regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
    }

    init(_ text: String) throws {
        guard text.hasSuffix("\n") else { throw Problem(line: 0, reason: "the exposition must end with a newline") }
        for (index, raw) in text.dropLast().split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let line = String(raw)
            if line.isEmpty { continue }
            if line.hasPrefix("#") {
                let parts = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
                guard parts.count >= 3, parts[0] == "#", ["HELP", "TYPE"].contains(parts[1]) else { continue }
                let name = parts[2]
                guard Self.matches(Self.metricName, name) else { throw Problem(line: number, reason: "bad metric name '\(name)'") }
                if parts[1] == "TYPE" {
                    guard parts.count == 4, ["counter", "gauge", "histogram", "summary", "untyped"].contains(parts[3]) else {
                        throw Problem(line: number, reason: "bad TYPE line")
                    }
                    guard types[name] == nil else { throw Problem(line: number, reason: "second TYPE for \(name)") }
                    guard !samples.contains(where: { Self.family(of: $0.name, types: [name: parts[3]]) == name }) else {
                        throw Problem(line: number, reason: "TYPE for \(name) after its samples")
                    }
                    types[name] = parts[3]
                } else {
                    help[name] = parts.count == 4 ? parts[3] : ""
                }
                continue
            }
            samples.append(try Self.sample(line, number: number))
        }
        try checkFamilies()
    }

    /// `name{a="x",b="y"} value [timestamp]`
    static func sample(_ line: String, number: Int) throws -> Sample {
        var rest = Substring(line)
        let nameEnd = rest.firstIndex { $0 == "{" || $0 == " " } ?? rest.endIndex
        let name = String(rest[..<nameEnd])
        guard matches(metricName, name) else { throw Problem(line: number, reason: "bad metric name '\(name)'") }
        rest = rest[nameEnd...]
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while rest.first != "}" {
                guard let equals = rest.firstIndex(of: "=") else { throw Problem(line: number, reason: "label without '='") }
                let label = String(rest[..<equals])
                guard matches(labelName, label) else { throw Problem(line: number, reason: "bad label name '\(label)'") }
                rest = rest[rest.index(after: equals)...]
                guard rest.first == "\"" else { throw Problem(line: number, reason: "label value not quoted") }
                rest = rest.dropFirst()
                var value = ""
                while true {
                    guard let character = rest.first else { throw Problem(line: number, reason: "unterminated label value") }
                    rest = rest.dropFirst()
                    if character == "\"" { break }
                    if character == "\\" {
                        guard let escaped = rest.first, ["\\", "\"", "n"].contains(escaped) else {
                            throw Problem(line: number, reason: "bad escape in label value")
                        }
                        value.append(escaped == "n" ? "\n" : escaped)
                        rest = rest.dropFirst()
                    } else {
                        value.append(character)
                    }
                }
                guard labels.updateValue(value, forKey: label) == nil else { throw Problem(line: number, reason: "label \(label) twice") }
                if rest.first == "," { rest = rest.dropFirst() } else if rest.first != "}" {
                    throw Problem(line: number, reason: "expected ',' or '}' after a label")
                }
            }
            rest = rest.dropFirst()
        }
        let fields = rest.split(separator: " ")
        guard rest.first == " ", (1...2).contains(fields.count) else { throw Problem(line: number, reason: "expected ' value [timestamp]'") }
        guard let value = parseValue(String(fields[0])) else { throw Problem(line: number, reason: "bad value '\(fields[0])'") }
        if fields.count == 2, Int64(fields[1]) == nil { throw Problem(line: number, reason: "bad timestamp '\(fields[1])'") }
        return Sample(name: name, labels: labels, value: value)
    }

    static func parseValue(_ text: String) -> Double? {
        switch text {
        case "+Inf": return .infinity
        case "-Inf": return -.infinity
        case "NaN": return .nan
        default: return Double(text)
        }
    }

    /// The family a sample belongs to: histograms own `_bucket`, `_sum`, `_count`.
    static func family(of name: String, types: [String: String]) -> String {
        for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) {
            let base = String(name.dropLast(suffix.count))
            if types[base] == "histogram" || types[base] == "summary" { return base }
        }
        return name
    }

    func checkFamilies() throws {
        for sample in samples where types[Self.family(of: sample.name, types: types)] == "counter" {
            guard sample.value >= 0 else { throw Problem(line: 0, reason: "counter \(sample.name) is negative") }
        }
        for (name, type) in types where type == "histogram" {
            var series: [[String: String]: [(le: Double, count: Double)]] = [:]
            for sample in samples where sample.name == name + "_bucket" {
                guard let le = sample.labels["le"].flatMap(Self.parseValue) else {
                    throw Problem(line: 0, reason: "\(name)_bucket without a le label")
                }
                var key = sample.labels
                key["le"] = nil
                series[key, default: []].append((le, sample.value))
            }
            guard !series.isEmpty else { throw Problem(line: 0, reason: "histogram \(name) has no buckets") }
            for (labels, buckets) in series {
                let sorted = buckets.sorted { $0.le < $1.le }
                guard sorted.last?.le == .infinity else { throw Problem(line: 0, reason: "histogram \(name)\(labels) has no +Inf bucket") }
                for (a, b) in zip(sorted, sorted.dropFirst()) where b.count < a.count {
                    throw Problem(line: 0, reason: "histogram \(name)\(labels) buckets are not cumulative")
                }
                guard let count = samples.first(where: { $0.name == name + "_count" && $0.labels == labels }),
                      samples.contains(where: { $0.name == name + "_sum" && $0.labels == labels }) else {
                    throw Problem(line: 0, reason: "histogram \(name)\(labels) lacks _count or _sum")
                }
                guard count.value == sorted.last!.count else { throw Problem(line: 0, reason: "histogram \(name)\(labels): _count differs from +Inf") }
            }
        }
    }

    /// The value of the one sample named so with these labels (others ignored).
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples.first { sample in sample.name == name && labels.allSatisfy { key, value in sample.labels[key] == value } }?.value
    }
}
