import Foundation
import Testing
@testable import ObjectGraph

/// A context stand-in that runs "requests" that are predicates over a list.
struct ListContext: FetchRequestExecuting {
    let rows: [[String: Any]]
    func execute(_ request: Any) throws -> [Any] {
        guard let predicate = request as? FetchPredicate else {
            throw PredicateEvaluationError(.typeMismatch, operatorName: "FETCH", reason: "not a request: \(type(of: request))")
        }
        return try rows.filter { try predicate.evaluate(with: $0) }
    }
    func count(for request: Any) throws -> Int { try execute(request).count }
}

@Suite struct FetchRequestExpressionTests {
    let context = ListContext(rows: [["n": 1], ["n": 2], ["n": 3]])

    @Test func countOnlyAndExecute() throws {
        // FE-01, FE-02, FE-03, FE-04
        let request = try FetchPredicate(format: "n >= 2")
        let count = FetchRequestExpression.expression(forFetch: .variable("REQ"), context: .variable("CTX"), countOnly: true)
        let result = try count.evaluate(with: nil, substitutionVariables: ["REQ": request, "CTX": context])
        #expect(result as? Int == 2)
        let fetch = FetchRequestExpression(requestExpression: .variable("REQ"), contextExpression: .variable("CTX"), isCountOnlyRequest: false)
        let rows = try FetchExpression.fetchRequest(fetch).evaluate(with: nil, substitutionVariables: ["REQ": request, "CTX": context])
        #expect((rows as? [Any])?.count == 2)
        #expect(fetch.requestExpression == .variable("REQ"))
        #expect(fetch.contextExpression == .variable("CTX"))
        #expect(!fetch.isCountOnlyRequest)
        #expect(FetchRequestExpression.expressionType == 50) // FE-05
    }

    @Test func wrongArgumentTypesThrow() throws {
        // FE-06
        let e = FetchRequestExpression.expression(forFetch: .constant(.int(1)), context: .constant(.string("nope")), countOnly: true)
        do {
            _ = try e.evaluate(with: nil)
            Issue.record("expected an error")
        } catch let error as PredicateEvaluationError {
            #expect(error.operatorName == "FETCH")
            #expect(error.reason.contains("FetchRequestExecuting"))
        }
        let badRequest = FetchRequestExpression.expression(forFetch: .constant(.int(1)), context: .variable("CTX"), countOnly: false)
        #expect(throws: PredicateEvaluationError.self) { try badRequest.evaluate(with: nil, substitutionVariables: ["CTX": context]) }
    }

    @Test func usableInsideAPredicate() throws {
        let p = try FetchPredicate(format: "FETCH($REQ, $CTX, YES) == 2")
        #expect(try p.evaluate(with: nil, substitutionVariables: ["REQ": try FetchPredicate(format: "n < 3"), "CTX": context]))
    }
}

