import Foundation

/// Locations the tests read: the repository's examples and the shared
/// reference material that sits beside the clone (`../shared`).
enum TestPaths {
    static let repositoryRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("Package.swift not found above \(#filePath)")
    }()

    static let shared = repositoryRoot.deletingLastPathComponent().appendingPathComponent("shared")
    static let companyModel = repositoryRoot.appendingPathComponent("examples/Company.xcdatamodeld")
    static let xcServerBundle = shared.appendingPathComponent("fixtures/apple/XCServerCoreData/Resources/XCServerCoreData.xcdatamodeld")

    /// A fresh temporary directory for one test.
    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("objectgraph-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}
