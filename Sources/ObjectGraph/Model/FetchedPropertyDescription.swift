import Foundation

/// A weak, one-way relationship defined by a fetch request (FP-01…FP-09): its
/// value is the request's result, fetched lazily and cached until the owner
/// is turned back into a fault. Its predicate may use `$FETCH_SOURCE` (the
/// owning object) and `$FETCHED_PROPERTY` (this description).
///
/// ```swift
/// let request = FetchRequest(entityName: "Song")
/// request.predicate = try FetchPredicate(format: "playlist == $FETCH_SOURCE")
/// let songs = FetchedPropertyDescription(name: "songs", fetchRequest: request)
/// ```
public final class FetchedPropertyDescription: PropertyDescription {
    /// The request that defines the property's value.
    public var fetchRequest: AnyFetchRequest? { willSet { ensureEditable("fetchRequest") } }

    public init(name: String, fetchRequest: AnyFetchRequest? = nil) {
        self.fetchRequest = fetchRequest
        super.init(name: name)
        // A fetched property behaves like a transient attribute (FP-08).
    }

    public override func copy() -> PropertyDescription {
        let c = FetchedPropertyDescription(name: name, fetchRequest: fetchRequest?.copy())
        copyCommonFields(to: c)
        return c
    }

    override func differences(from other: PropertyDescription) -> [String] {
        var out = commonDifferences(from: other)
        guard let o = other as? FetchedPropertyDescription else { return out }
        out += AnyFetchRequest.differences(fetchRequest, o.fetchRequest).map { "fetchRequest.\($0)" }
        return out
    }
}
