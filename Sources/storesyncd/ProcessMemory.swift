#if canImport(Glibc)
import Glibc
#endif

/// Process-wide memory settings, made once at start-up before any thread
/// exists (docs/DAEMON.md, "Memory"). They are the daemon's business, not
/// the engine's: a library must not change its host's allocator or
/// SQLite's global limits.
///
/// ```swift
/// ProcessMemory.configure()   // first thing in `run()`
/// ```
enum ProcessMemory {
    /// glibc malloc arenas. glibc makes up to 8 per core, one per thread
    /// that meets contention, and each keeps the memory freed into it; the
    /// daemon's threads (the loop, one queue per group, Dispatch's workers)
    /// rarely allocate at the same time, so two arenas cost little speed and
    /// keep a burst's freed memory reusable by the next one.
    static let mallocArenas: Int32 = 2
    /// SQLite's soft heap limit: past it SQLite frees page cache (its own,
    /// per connection, 2 MB by default and rarely used twice) before
    /// allocating more. Soft: a statement that needs more still gets it.
    static let sqliteSoftHeapLimit: Int64 = 8 << 20

    /// `M_ARENA_MAX` of glibc's `<malloc.h>`, which Swift's Glibc module
    /// does not include (nor `mallopt`).
    static let mArenaMax: Int32 = -8

    /// Returns whether both took effect (false on a libc without `mallopt`).
    /// Both functions are looked up at run time: SQLite is in the process
    /// anyway (ObjectGraph links it), so the daemon needs no CSQLite import.
    @discardableResult
    static func configure() -> Bool {
        #if canImport(Glibc)
        typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
        typealias SoftHeapLimit = @convention(c) (Int64) -> Int64
        guard let handle = dlopen(nil, RTLD_NOW) else { return false }
        var ok = false
        if let symbol = dlsym(handle, "sqlite3_soft_heap_limit64") {
            _ = unsafeBitCast(symbol, to: SoftHeapLimit.self)(sqliteSoftHeapLimit)
            ok = true
        }
        if let symbol = dlsym(handle, "mallopt") {
            ok = unsafeBitCast(symbol, to: Mallopt.self)(mArenaMax, mallocArenas) == 1 && ok
        } else {
            ok = false
        }
        return ok
        #else
        return false
        #endif
    }
}
