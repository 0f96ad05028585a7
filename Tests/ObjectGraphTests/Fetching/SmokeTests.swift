import Testing
@testable import ObjectGraph

@Suite struct SmokeTests {
    @Test func versionIsSet() { #expect(!ObjectGraph.version.isEmpty) }
}
