// swift-tools-version:6.0
import Foundation
import PackageDescription

/// The browser page's files (HTML, modules, style), read from its directory.
let pageFiles = ((try? FileManager.default.contentsOfDirectory(atPath: Context.packageDirectory + "/Sources/ViewlineKit/Web/page")) ?? [])
    .filter { !$0.hasPrefix(".") }.sorted()

/// The protocol and SwiftNIO's TCP, HTTP and WebSocket: what the server's transport
/// and the Swift client both speak the line protocol over. TLS (swift-nio-ssl, which
/// builds BoringSSL) is added only where it is asked for: `ViewlineTLS`, the client.
let lineTransport: [Target.Dependency] = [
    "ViewlineProtocol",
    .product(name: "NIOCore", package: "swift-nio"),
    .product(name: "NIOPosix", package: "swift-nio"),
    .product(name: "NIOHTTP1", package: "swift-nio"),
    .product(name: "NIOWebSocket", package: "swift-nio"),
]
let nioSSL: Target.Dependency = .product(name: "NIOSSL", package: "swift-nio-ssl")

let package = Package(
    name: "viewline",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "viewline-server", targets: ["viewline-server"]),
        .executable(name: "viewline", targets: ["viewline"]),
        .library(name: "ViewlineKit", targets: ["ViewlineKit"]),
        .library(name: "ViewlineTLS", targets: ["ViewlineTLS"]),
        .library(name: "ViewlineTesting", targets: ["ViewlineTesting"]),
        .library(name: "ViewlineApps", targets: ["ViewlineApps"]),
        .library(name: "ViewlineProtocol", targets: ["ViewlineProtocol"]),
        .library(name: "ViewlineClient", targets: ["ViewlineClient"]),
        .library(name: "ViewlinePostgres", targets: ["ViewlinePostgres"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    ],
    targets: [
        // Wire protocol: framing-independent codec, commands, events, error codes. No NIO.
        .target(name: "ViewlineProtocol"),
        // Input framing (lines over TCP, text messages over WebSocket) and the budget
        // that bounds what a connection holds: NIOCore and NIOWebSocket only, so the
        // fuzzer (`viewline-fuzz`) builds with its sanitizers without the server.
        .target(
            name: "ViewlineFraming",
            dependencies: [
                "ViewlineProtocol",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ]
        ),
        // Salted password hashing through the system's libxcrypt (yescrypt).
        .target(name: "CPasswordHash", linkerSettings: [.linkedLibrary("crypt")]),
        // Persistence: one narrow type over GRDB, and a single node's session records.
        .target(
            name: "ViewlinePersistence",
            dependencies: ["ViewlineKit", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        // A cluster over PostgreSQL (postgres-nio): session records, node leases and
        // shared settings in tables of its own, over a bare PostgresClient; the
        // deadlines, health watch and lease fence every part on PostgreSQL shares.
        .target(
            name: "ViewlinePostgres",
            dependencies: [
                "ViewlineKit", nioSSL,
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        // The seed apps' store on PostgreSQL, for several nodes over one database:
        // LISTEN/NOTIFY observations, cluster-wide single flight, fenced writes.
        .target(
            name: "ViewlineAppsPostgres",
            dependencies: [
                "ViewlinePersistence", "ViewlineKit", "ViewlinePostgres",
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        // SHA-256 from the system's libcrypto: what a cluster record keeps of a token
        // (one function; a second BoringSSL build in every package that uses the kit would cost minutes).
        .target(name: "CSHA256", linkerSettings: [.linkedLibrary("crypto")]),
        .target(name: "CEpoll"),
        // A cache prefetch hint (a compiler builtin Swift has no spelling for).
        .target(name: "CPrefetch"),
        // glibc's allocator told to give large buffers back (mallopt has no Swift module).
        .target(name: "CHeap"),
        // The runtime as a library: view-model API, sessions, alerts, task slots,
        // shared observations, and the SwiftNIO transport. Knows no app.
        .target(
            name: "ViewlineKit",
            dependencies: lineTransport + [
                "ViewlineFraming",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                "CSHA256", "CPrefetch",
            ],
            // The browser page, compiled into the binary (no files to deploy beside it):
            // every file of Web/page, so a new module is the file and its line in WebAssets.
            resources: pageFiles.map { .embedInCode("Web/page/\($0)") }
        ),
        // TLS for the server's listeners (`ServerConfiguration.tls`), kept apart so that
        // a package serving plain TCP never builds BoringSSL.
        .target(name: "ViewlineTLS", dependencies: ["ViewlineKit", nioSSL]),
        // The Swift client: a session's commands, events and alerts over async/await, and
        // an @Observable model a SwiftUI view binds to. The protocol module and NIO only.
        .target(
            name: "ViewlineClient",
            dependencies: lineTransport + [nioSSL]
        ),
        // Testing view-models without sockets: a test store, a manual clock.
        .target(
            name: "ViewlineTesting",
            dependencies: [
                "ViewlineKit",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The seed flows (search, drafts, contacts, playlist, log-in), built on ViewlineKit's public API.
        .target(
            name: "ViewlineApps",
            dependencies: [
                "ViewlineKit", "ViewlinePersistence", "CPasswordHash",
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        // The system libedit, through pkg-config.
        .systemLibrary(
            name: "CLibEdit",
            pkgConfig: "libedit",
            providers: [.apt(["libedit-dev"])]
        ),
        // Non-variadic wrappers for el_set / el_get / history, which Swift cannot call.
        .target(name: "CEditLineShim", dependencies: ["CLibEdit"], linkerSettings: [.linkedLibrary("edit")]),
        // The interactive and scripted client: libedit over ViewlineClient (the one
        // implementation of the protocol's client side).
        .target(name: "ViewlineREPL", dependencies: ["ViewlineClient", "CEditLineShim"]),
        .executableTarget(
            name: "viewline-server",
            dependencies: [
                "ViewlineKit", "ViewlineTLS", "ViewlineApps", "ViewlinePersistence", "ViewlinePostgres", "ViewlineAppsPostgres", "CHeap",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .executableTarget(
            name: "viewline",
            dependencies: [
                "ViewlineREPL",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // libFuzzer target over framing, request decoding and argument checking
        // (`./dev fuzz`); built normally it replays a corpus.
        .executableTarget(
            name: "viewline-fuzz",
            dependencies: [
                "ViewlineFraming", "ViewlineProtocol",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]
        ),
        // Load generator for benchmarks (loopback only, bounded in time).
        .executableTarget(
            name: "viewline-bench",
            dependencies: [
                "CEpoll", .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The Swift client's driver of the conformance suite (clients/conformance), built
        // with the rest so `./dev test` runs the scenarios for Swift as for Python and Node.
        .executableTarget(
            name: "viewline-conformance",
            dependencies: ["ViewlineClient"],
            path: "clients/conformance/drivers/swift"
        ),
        // The Todos example, built and tested with the rest so a run compiles it once.
        // Examples/Todos/Package.swift declares the same three targets as a package
        // of its own, the way an app depends on Viewline.
        .target(name: "Todos", dependencies: ["ViewlineKit"], path: "Examples/Todos/Sources/Todos"),
        .executableTarget(
            name: "todo-server", dependencies: ["Todos", "ViewlineKit", "ViewlineApps"], path: "Examples/Todos/Sources/todo-server"
        ),
        .testTarget(
            name: "TodosTests", dependencies: ["Todos", "ViewlineTesting", "ViewlineClient"], path: "Examples/Todos/Tests/TodosTests",
            exclude: ["Recordings"]
        ),
        // Fakes, a manual clock and a raw TCP client: test support as a module, not copy-paste.
        .target(name: "CPseudoTerminal"),
        .target(name: "ViewlineTestSupport", dependencies: ["ViewlineProtocol", "CPseudoTerminal"]),
        .testTarget(name: "ViewlineProtocolTests", dependencies: ["ViewlineProtocol", "ViewlineApps"]),
        .testTarget(
            name: "ViewlineAppsTests",
            dependencies: [
                "ViewlineApps", "ViewlineTesting", "ViewlinePersistence", "ViewlinePostgres", "ViewlineAppsPostgres", "ViewlineTestSupport",
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            exclude: ["Recordings"]
        ),
        .testTarget(
            name: "ViewlineKitTests",
            dependencies: [
                "ViewlineKit", "ViewlineTesting", "ViewlineTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .testTarget(name: "ViewlineREPLTests", dependencies: ["ViewlineREPL", "ViewlineProtocol", "ViewlineClient"]),
        .testTarget(name: "ViewlineClientTests", dependencies: ["ViewlineClient", "ViewlineTestSupport"]),
        .testTarget(
            name: "ViewlineEndToEndTests",
            dependencies: [
                "ViewlineKit", "ViewlineApps", "ViewlineTestSupport", "ViewlineProtocol", "ViewlinePersistence",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
    ]
)
