import Foundation

extension SyncHub {
    /// Reads the hub's changes after `position` page by page (about
    /// `changeLimit` row changes each, `excludingOrigin`'s skipped unread),
    /// handing each page to `body` until it returns false or the history
    /// ends. Returns the position read through.
    ///
    /// ```swift
    /// var log: [HubChange] = []
    /// let through = try hub.forEachChangePage(after: base, excludingOrigin: "s1", changeLimit: 2_000) { log += $0; return true }
    /// ```
    @discardableResult
    func forEachChangePage(after position: Int64, excludingOrigin: String?, changeLimit: Int,
                           _ body: ([HubChange]) throws -> Bool) throws -> Int64 {
        var from = position
        while true {
            let page = try changes(after: from, excludingOrigin: excludingOrigin, changeLimit: changeLimit)
            let goOn = try body(page.changes)
            if page.through == from { break }
            from = page.through
            if !goOn { break }
        }
        return from
    }

    /// Whether the hub has any change after `position` not from `excludingOrigin`.
    func hasChanges(after position: Int64, excludingOrigin: String?, changeLimit: Int) throws -> Bool {
        var found = false
        try forEachChangePage(after: position, excludingOrigin: excludingOrigin, changeLimit: changeLimit) { page in
            found = !page.isEmpty
            return !found
        }
        return found
    }
}
