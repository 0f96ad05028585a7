import Testing
import CSQLite
import CLibUV

/// The two system-library targets resolve through pkg-config and link.
@Suite struct NativeLibrariesTests {
    @Test func sqliteLinksAndReportsAVersion() {
        let version = String(cString: sqlite3_libversion())
        #expect(version.hasPrefix("3."))
        #expect(sqlite3_libversion_number() >= 3_031_000)
    }

    @Test func libuvLinksAndRunsAnEmptyLoop() {
        let version = String(cString: uv_version_string())
        #expect(version.hasPrefix("1."))
        var loop = uv_loop_t()
        #expect(uv_loop_init(&loop) == 0)
        #expect(uv_run(&loop, UV_RUN_DEFAULT) == 0)
        #expect(uv_loop_close(&loop) == 0)
    }
}
