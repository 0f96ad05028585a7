/// ObjectGraph: Apple's Core Data, rebuilt in Swift for Linux.
///
/// What this module owns, one folder per concern:
/// - `Model/`: managed object models, entities and properties, version hashes,
///   and the Xcode model file reader and writer (`Model/Xcode/`).
/// - `Fetching/`: fetch requests, the predicate language, sort descriptors.
/// - `Errors/`: `CoreDataError`, Core Data's error domain, codes and keys.
///
/// What it must not touch: the sync daemon (`StoreSync`, `storesyncd`) and any
/// event loop. ObjectGraph is a library a Core Data user links on its own.
///
/// The enum is not named `ObjectGraph`: a public type named like its module
/// shadows the module, so `ObjectGraph.Managed` (needed when an app's own
/// `Managed` protocol hides the wrapper) would look inside the enum and fail.
///
///     print(ObjectGraphLibrary.version)   // "0.1.0"
public enum ObjectGraphLibrary {
    /// The library's version, not Apple's framework number (CONST-VN-01).
    public static let version = "0.1.0"
}
