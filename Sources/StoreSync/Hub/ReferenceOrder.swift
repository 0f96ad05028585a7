import Foundation

/// The order in which objects that point at each other are written when
/// their writes are split into several saves (a push's pages, a large hub
/// transaction's saves): an object whose to-one destination is not there
/// yet would be written without it and then again once it is there, two
/// writes of the object for one change, which a reader of the history (or
/// the workload checker's "repeated") sees as a change delivered twice.
///
/// Only to-ones order: a to-one is a column of the object's own row. A
/// to-many's members are written by the members themselves (the inverse
/// to-one, or the join rows either side writes), so an owner written before
/// its members gets them when they come, with no second write of it.
enum ReferenceOrder {
    /// The to-one destinations the values set.
    static func toOneDestinations(_ values: [String: SyncValue]) -> [UUID] {
        values.values.compactMap { value in
            if case .toOne(let gid?) = value { return gid }
            return nil
        }
    }

    /// `objects` reordered so that each comes after the destinations it
    /// depends on (`dependencies`: its to-one destinations among them);
    /// objects of a cycle come one after the other in the order first met.
    /// Stable otherwise: objects keep their relative order.
    static func destinationsFirst(_ objects: [UUID], dependencies: [UUID: [UUID]]) -> [UUID] {
        guard !dependencies.isEmpty else { return objects }
        let among = Set(objects)
        var placed = Set<UUID>()
        var out: [UUID] = []
        out.reserveCapacity(objects.count)
        for root in objects where !placed.contains(root) {
            // Depth first without recursion: a long chain must not overflow the stack.
            var stack: [(UUID, Int)] = [(root, 0)]
            var onStack: Set<UUID> = [root]
            while let (object, next) = stack.last {
                let destinations = dependencies[object] ?? []
                if next < destinations.count {
                    stack[stack.count - 1].1 += 1
                    let destination = destinations[next]
                    if among.contains(destination) && !placed.contains(destination) && !onStack.contains(destination) {
                        stack.append((destination, 0))
                        onStack.insert(destination)
                    }
                    continue
                }
                stack.removeLast()
                onStack.remove(object)
                if placed.insert(object).inserted { out.append(object) }
            }
        }
        return out
    }
}
