/// A back-reference that neither retains nor weakly references its target:
/// Core Data's `assign` references (an object's context, a property's
/// entity, an entity's model and superentity).
///
/// Why not `weak`: a weak reference gives its target a side table, and from
/// then on every retain and release of the target takes Swift's slow path.
/// Entities are retained by every object, object ID and fetched row, and
/// contexts by every change notice, so weak back-references cost a large
/// share of inserts and fetches.
///
/// The rule that keeps it sound: the target clears every reference to
/// itself that it still owns when it lets go of the referrer, and all of
/// them in its `deinit`. A set reference therefore always points at a live
/// object, and a referrer that outlives its target reads nil, as with weak.
///
/// ```swift
/// final class Child { var parent = Unretained<Parent>() }
/// final class Parent {
///     var children: [Child] = []
///     deinit { for child in children where child.parent.refers(to: self) { child.parent.target = nil } }
/// }
/// ```
struct Unretained<Target: AnyObject> {
    private var reference: Unmanaged<Target>?

    init() {}

    /// The target, retained for the caller; nil when unset.
    var target: Target? {
        get { reference?.takeUnretainedValue() }
        set { reference = newValue.map { Unmanaged.passUnretained($0) } }
    }

    /// True when the reference is set.
    var isSet: Bool { reference != nil }

    /// True when the reference points at `target`; retains neither.
    @inline(__always)
    func refers(to target: Target) -> Bool {
        reference?.toOpaque() == Unmanaged.passUnretained(target).toOpaque()
    }

    /// Runs `body` with the target, without retaining it; nil when unset.
    @inline(__always)
    func withTarget<R>(_ body: (Target) throws -> R) rethrows -> R? {
        guard let reference else { return nil }
        return try reference._withUnsafeGuaranteedRef(body)
    }
}
