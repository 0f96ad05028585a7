import StoreSyncControl

/// One stream a connection asked for: the `events` op's daemon events
/// today, the change log's `log` op later. A subscription belongs to one
/// connection and lives until the client cancels it (`cancel`), closes the
/// connection, or reads too slowly.
///
/// Broadcast streams (events) are matched by `topics` and `group` when the
/// daemon publishes; a stream with its own producer (a log reader) sends
/// through `ControlConnection.sendEvent` itself and stops in `onEnd`.
final class ControlSubscription {
    /// The id of the request that opened it; every item carries it.
    let id: JSONValue
    /// The op that opened it (`events`).
    let op: String
    /// Event names it receives from `ControlServer.publish` (empty: none;
    /// the stream has its own producer).
    let topics: Set<String>
    /// Only events of this group (nil: all; events of no group always pass).
    let group: String?
    /// Called once when the stream ends for any reason, on the loop thread.
    var onEnd: (() -> Void)?

    init(id: JSONValue, op: String, topics: Set<String>, group: String?) {
        self.id = id
        self.op = op
        self.topics = topics
        self.group = group
    }

    func wants(_ event: String, group eventGroup: String?) -> Bool {
        guard topics.contains(event) else { return false }
        guard let group, let eventGroup else { return true }
        return group == eventGroup
    }

    func end() {
        let action = onEnd
        onEnd = nil
        action?()
    }
}
