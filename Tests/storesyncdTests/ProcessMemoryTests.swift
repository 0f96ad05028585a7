import CSQLite
@testable import storesyncd
import XCTest

/// The daemon's start-up memory settings (docs/DAEMON.md, "Memory") take
/// effect: glibc accepts the arena limit and SQLite reports the soft heap
/// limit. Harmless in the test process: both only bound what is kept.
final class ProcessMemoryTests: XCTestCase {
    func testArenaLimitAndSoftHeapLimitAreSet() {
        XCTAssertTrue(ProcessMemory.configure(), "glibc's mallopt(M_ARENA_MAX, 2) was found and accepted")
        // A negative argument only reads the limit.
        XCTAssertEqual(sqlite3_soft_heap_limit64(-1), ProcessMemory.sqliteSoftHeapLimit)
        XCTAssertEqual(ProcessMemory.sqliteSoftHeapLimit, 8 * 1024 * 1024)
    }
}
