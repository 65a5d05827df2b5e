// swift-tools-version:6.0
// An example program that uses attled as a library: it depends on the root
// package by path and uses only its public API (`import Attled`).
import PackageDescription

let package = Package(
    name: "SetColour",
    dependencies: [.package(name: "attled", path: "../..")],
    targets: [
        .executableTarget(name: "SetColour", dependencies: [.product(name: "Attled", package: "attled")],
                          swiftSettings: [.swiftLanguageMode(.v6)]),
    ]
)
