// swift-tools-version:6.1
import PackageDescription

// ObjectGraph is written in Swift 5 language mode: Core Data's design confines
// contexts and objects to a queue at run time (perform/performAndWait), and its
// values are heterogeneous (`Any?`), which Swift 6's compile-time Sendable
// checking cannot express without unchecked escapes at every call site.
let swift5: [SwiftSetting] = [.swiftLanguageMode(.v5)]

let package = Package(
    name: "StoreSync",
    products: [
        .library(name: "ObjectGraph", targets: ["ObjectGraph"]),
        .library(name: "StoreSync", targets: ["StoreSync"]),
        .library(name: "StoreSyncPostgreSQL", targets: ["StoreSyncPostgreSQL"]),
        .executable(name: "storesyncctl", targets: ["storesyncctl"]),
        .executable(name: "storesync-bench", targets: ["storesync-bench"]),
        .executable(name: "storesyncd", targets: ["storesyncd"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        .systemLibrary(
            name: "CSQLite",
            path: "Sources/CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // Core Data compresses the model it caches in a SQLite store
        // (Z_MODELCACHE) with raw deflate; see docs/COMPILED-MODELS.md.
        .systemLibrary(
            name: "CZlib",
            path: "Sources/CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        .systemLibrary(
            name: "CLibUV",
            path: "Sources/CLibUV",
            pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]
        ),
        // libpq through its C API, not postgres-nio: the engine is synchronous
        // and must bring no event loop of its own; the daemon's libuv loop
        // watches PQsocket for LISTEN/NOTIFY (docs/POSTGRESQL.md).
        .systemLibrary(
            name: "CLibPQ",
            path: "Sources/CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .target(
            name: "ObjectGraph",
            dependencies: [
                "CSQLite",
                "CZlib",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swift5
        ),
        // The sync engine: ObjectGraph's public API only; no event loop,
        // sockets or signals (those belong to storesyncd).
        .target(
            name: "StoreSync",
            dependencies: ["ObjectGraph"],
            swiftSettings: swift5
        ),
        // A sync group's hub in PostgreSQL, shared by daemons on several
        // hosts. A module of its own so that StoreSync stays free of sockets:
        // only the daemon (and tests) link it.
        .target(
            name: "StoreSyncPostgreSQL",
            dependencies: ["StoreSync", "ObjectGraph", "CLibPQ"],
            swiftSettings: swift5
        ),
        .testTarget(
            name: "StoreSyncTests",
            // StoreSyncPostgreSQL: the engine's tests run over both hubs.
            dependencies: ["StoreSync", "StoreSyncPostgreSQL", "PostgreSQLTestSupport", "ObjectGraph", "CSQLite", "SyncWorkload", "storesync-writer"],
            swiftSettings: swift5
        ),
        // Needs a PostgreSQL server: STORESYNC_TEST_POSTGRESQL (printed by
        // `scripts/postgres start`); skipped when unset.
        // The test server's settings (STORESYNC_TEST_POSTGRESQL), shared by the test targets that need it.
        .target(
            name: "PostgreSQLTestSupport",
            dependencies: ["StoreSyncPostgreSQL"],
            path: "Tests/PostgreSQLTestSupport",
            swiftSettings: swift5
        ),
        .testTarget(
            name: "StoreSyncPostgreSQLTests",
            dependencies: ["StoreSyncPostgreSQL", "StoreSync", "ObjectGraph", "CLibPQ", "PostgreSQLTestSupport"],
            swiftSettings: swift5
        ),
        // Writer processes for tests, scripts and benchmarks: saves through
        // ObjectGraph, a log of every committed change, and the checker
        // that counts lost, duplicated and echoed changes (docs/WORKLOAD.md).
        .target(
            name: "SyncWorkload",
            // CSQLite: the raw SQL writer writes Core Data's layout as a program that is not ObjectGraph would.
            dependencies: ["ObjectGraph", "StoreSync", "CSQLite"],
            swiftSettings: swift5
        ),
        .executableTarget(
            name: "storesync-writer",
            dependencies: [
                "ObjectGraph",
                "SyncWorkload",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swift5
        ),
        // storesyncd.toml, read by the daemon and by storesyncctl (to find the
        // control socket, and a group's stores when the daemon is down).
        .target(
            name: "StoreSyncConfig",
            dependencies: [
                "StoreSync",
                "ObjectGraph",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "TOMLKit", package: "TOMLKit"),
            ],
            swiftSettings: []
        ),
        // The control socket's wire format (one JSON object per line) and a
        // blocking client: shared by storesyncd (server) and storesyncctl
        // (client), which talk only through it (docs/CONTROL.md).
        .target(
            name: "StoreSyncControl",
            dependencies: [],
            swiftSettings: []
        ),
        .executableTarget(
            name: "storesyncctl",
            dependencies: [
                "ObjectGraph",
                "StoreSync",
                "StoreSyncConfig",
                "StoreSyncControl",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: []
        ),
        .testTarget(
            name: "ObjectGraphTests",
            dependencies: ["ObjectGraph"],
            swiftSettings: swift5
        ),
        .testTarget(
            name: "storesyncctlTests",
            // The engine and the configuration reader build the groups whose
            // change log, verification and attachment the CLI is tested on.
            dependencies: ["storesyncctl", "CSQLite", "ObjectGraph", "StoreSync", "StoreSyncConfig", "StoreSyncControl"],
            swiftSettings: swift5
        ),
        .testTarget(
            name: "NativeLibrariesTests",
            dependencies: ["CSQLite", "CLibUV"],
            swiftSettings: swift5
        ),
        // The daemon: a thin shell around StoreSync that owns everything the
        // engine must not (libuv event loop, signals, systemd, logging setup).
        .executableTarget(
            name: "storesyncd",
            dependencies: [
                "StoreSync",
                // A group's hub in PostgreSQL (issue 19): the daemon links it, the engine does not.
                "StoreSyncPostgreSQL",
                "ObjectGraph",
                "CLibUV",
                "StoreSyncConfig",
                "StoreSyncControl",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "TOMLKit", package: "TOMLKit"),
            ],
            swiftSettings: []
        ),
        // Runs the built storesyncd binary (config checks, demo, systemd
        // notify, end to end); ObjectGraph writes the stores it syncs.
        .testTarget(
            name: "storesyncdTests",
            // StoreSyncPostgreSQL: the shared-hub tests read the hub to check the workload.
            dependencies: ["storesyncd", "storesyncctl", "ObjectGraph", "StoreSyncControl", "CSQLite", "SyncWorkload", "storesync-writer",
                           "StoreSyncPostgreSQL", "PostgreSQLTestSupport"],
            swiftSettings: swift5
        ),
        .executableTarget(
            name: "storesync-bench",
            dependencies: [
                "ObjectGraph",
                "StoreSync",
                "StoreSyncPostgreSQL",
                "CSQLite",
                "SyncWorkload",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swift5
        ),
    ]
)
