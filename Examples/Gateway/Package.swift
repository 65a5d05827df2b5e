// swift-tools-version:6.0
// An example program that runs attled's MQTT / Home Assistant gateway as a
// library: it depends on the root package by path and uses only its public
// API (`import AttledGateway`).
import PackageDescription

let package = Package(
    name: "LampGateway",
    dependencies: [.package(name: "attled", path: "../..")],
    targets: [
        .executableTarget(name: "LampGateway",
                          dependencies: [.product(name: "Attled", package: "attled"),
                                         .product(name: "AttledGateway", package: "attled")],
                          swiftSettings: [.swiftLanguageMode(.v6)]),
    ]
)
