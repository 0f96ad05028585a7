import Foundation
import Testing
@testable import ObjectGraph

@Suite struct ContextHasChangesObservationTests {
    @Test func observersHearFlipsAsynchronously() throws {
        // MOC-HC-01, MOC-HC-02, MOC-HC-03
        let (_, context) = try Company.stack()
        var seen: [Bool] = []
        let token = context.performAndWait { context.observeHasChanges { seen.append($0) } }
        try context.performAndWait {
            let d = try Company.department(context, "Sales")
            #expect(seen.isEmpty)            // not delivered inside the change
            _ = d
        }
        context.performAndWait {}            // the queued delivery runs first
        #expect(seen == [true])
        try context.performAndWait { try context.save() }
        context.performAndWait {}
        #expect(seen == [true, false])
        token.cancel()
    }
}
