// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "viewline",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "viewline-server", targets: ["viewline-server"]),
        .executable(name: "viewline", targets: ["viewline"]),
        .library(name: "ViewlineProtocol", targets: ["ViewlineProtocol"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
    ],
    targets: [
        // Wire protocol: framing-independent codec, commands, events, error codes. No NIO.
        .target(name: "ViewlineProtocol"),
        // Salted password hashing through the system's libxcrypt (yescrypt).
        .target(name: "CPasswordHash", linkerSettings: [.linkedLibrary("crypt")]),
        // Persistence: one narrow type over GRDB.
        .target(
            name: "ViewlinePersistence",
            dependencies: [.product(name: "GRDB", package: "GRDB.swift")]
        ),
        // Session core: views, flows, alerts, backends. No sockets, no real clock.
        .target(
            name: "ViewlineCore",
            dependencies: ["ViewlineProtocol", "ViewlinePersistence", "CPasswordHash"]
        ),
        // TCP transport on SwiftNIO.
        .target(
            name: "ViewlineServer",
            dependencies: [
                "ViewlineProtocol", "ViewlineCore", "ViewlinePersistence",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
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
        // The interactive and scripted client.
        .target(name: "ViewlineREPL", dependencies: ["ViewlineProtocol", "CEditLineShim"]),
        .executableTarget(
            name: "viewline-server",
            dependencies: [
                "ViewlineServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "viewline",
            dependencies: [
                "ViewlineREPL",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Load generator for benchmarks (loopback only, bounded in time).
        .executableTarget(
            name: "viewline-bench",
            dependencies: [.product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // Fakes, a manual clock and a raw TCP client: test support as a module, not copy-paste.
        .target(name: "CPseudoTerminal"),
        .target(
            name: "ViewlineTestSupport",
            dependencies: ["ViewlineProtocol", "ViewlineCore", "ViewlinePersistence", "CPseudoTerminal"]
        ),
        .testTarget(name: "ViewlineProtocolTests", dependencies: ["ViewlineProtocol"]),
        .testTarget(
            name: "ViewlineCoreTests",
            dependencies: ["ViewlineCore", "ViewlineTestSupport", "ViewlinePersistence"]
        ),
        .testTarget(
            name: "ViewlineServerTests",
            dependencies: [
                "ViewlineServer",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]
        ),
        .testTarget(name: "ViewlineREPLTests", dependencies: ["ViewlineREPL", "ViewlineProtocol"]),
        .testTarget(
            name: "ViewlineEndToEndTests",
            dependencies: [
                "ViewlineServer", "ViewlineTestSupport", "ViewlineProtocol",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ]
)
