// swift-tools-version:6.0
import Foundation
import PackageDescription

// Viewline is the package two folders up; SwiftPM names a path dependency after
// its folder, so the name is read from the path rather than assumed.
let viewlinePath = "../.."
let viewline = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .appendingPathComponent(viewlinePath).standardizedFileURL.lastPathComponent.lowercased()

let package = Package(
    name: "Todos",
    platforms: [.macOS(.v14)],
    dependencies: [.package(path: viewlinePath)],
    targets: [
        // The view-model: only ViewlineKit.
        .target(name: "Todos", dependencies: [.product(name: "ViewlineKit", package: viewline)]),
        // A server with the to-do list and Viewline's search flow.
        .executableTarget(
            name: "todo-server",
            dependencies: [
                "Todos",
                .product(name: "ViewlineKit", package: viewline),
                .product(name: "ViewlineApps", package: viewline),
            ]
        ),
        .testTarget(
            name: "TodosTests",
            dependencies: [
                "Todos", .product(name: "ViewlineTesting", package: viewline),
                // Driving the built todo-server from Swift, as an app would.
                .product(name: "ViewlineClient", package: viewline),
            ],
            exclude: ["Recordings"]
        ),
    ]
)
