import Foundation

/// Locations the tests read, all inside the repository: the examples and
/// the Apple-written fixtures under `Tests/Fixtures` (a clone alone must
/// pass its tests, so nothing is read from beside it).
enum TestPaths {
    static let repositoryRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("Package.swift not found above \(#filePath)")
    }()

    /// Stores written by Apple's Core Data and their models, with their licence.
    static let appleFixtures = repositoryRoot.appendingPathComponent("Tests/Fixtures/apple")
    static let companyModel = repositoryRoot.appendingPathComponent("examples/Company.xcdatamodeld")
    static let xcServerBundle = appleFixtures.appendingPathComponent("XCServerCoreData/Resources/XCServerCoreData.xcdatamodeld")

    /// A fresh temporary directory for one test.
    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("objectgraph-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}
