import Foundation

/// A format string that does not parse, with where and why.
///
/// ```swift
/// do { _ = try FetchPredicate(format: "(a == 1") }
/// catch let error as PredicateSyntaxError {
///     error.column // 8
///     error.description // predicate syntax error at column 8: expected ')' to close '(' opened at column 1
/// }
/// ```
public struct PredicateSyntaxError: Error, Equatable, CustomStringConvertible, Sendable {
    /// 0-based character offset of the problem in `format`.
    public let position: Int
    /// 1-based column of the problem (`position + 1`).
    public var column: Int { position + 1 }
    /// What is wrong, in words.
    public let reason: String
    /// The format string that failed to parse.
    public let format: String

    public init(position: Int, reason: String, format: String) {
        self.position = position
        self.reason = reason
        self.format = format
    }

    public var description: String {
        "predicate syntax error at column \(column): \(reason)"
    }

    /// The format string with a caret under the problem, for terminals.
    public var caretDiagram: String {
        let line = format.replacingOccurrences(of: "\n", with: " ")
        return line + "\n" + String(repeating: " ", count: max(0, position)) + "^"
    }
}
