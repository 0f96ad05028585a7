import Testing
@testable import storesyncctl

@Suite struct PredicateCommandTests {
    @Test func placeholder() { #expect(Bool(true)) }
}
