/// Collects `count` answers (on the loop thread) and calls `done` once with
/// all of them, in arrival order.
final class Gather<Element> {
    private var results: [Element] = []
    private let count: Int
    private var done: (([Element]) -> Void)?

    init(count: Int, done: @escaping ([Element]) -> Void) {
        self.count = count
        self.done = done
        if count == 0 { finish() }
    }

    func add(_ element: Element) {
        results.append(element)
        if results.count == count { finish() }
    }

    private func finish() {
        let action = done
        done = nil
        action?(results)
    }
}
