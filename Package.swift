// swift-tools-version:6.0
// attled: a Bluetooth Low Energy host stack that drives the controller over HCI,
// and the LED command-line tool built on it. Targets follow the stack's layers;
// dependencies point only downward.
import PackageDescription
import Foundation

// The normal build opens libmosquitto (the gateway) and libcrypto (pairing)
// with dlopen when first needed, so a one-shot run maps neither.
// ATTLED_FULLY_STATIC=1 is the fully static (-static-executable) build the kernel VM
// and arm64's static binary use: no gateway (Debian ships libmosquitto as a
// shared library only) and libcrypto.a linked in. ATTLED_NO_MQTT=1 only leaves
// the gateway out.
let environment = ProcessInfo.processInfo.environment
let fullyStatic = environment["ATTLED_FULLY_STATIC"] != nil
let withGateway = environment["ATTLED_NO_MQTT"] == nil && !fullyStatic

// Swift 6 language mode everywhere. The stack's targets also leave out the
// implicit import of _StringProcessing: one use of its string search links the
// whole regex engine in (1.1 MB of a 12 MB binary); BLEWire's TextSearch.swift
// has the searches attled needs. (Unsafe flags: depend on attled by path or
// branch, as README's library section does.)
let language: [SwiftSetting] = [.swiftLanguageMode(.v6)]
let strict: [SwiftSetting] = language + [.unsafeFlags(["-Xfrontend", "-disable-implicit-string-processing-module-import"])]

let package = Package(
    name: "attled",
    products: [
        .executable(name: "attled", targets: ["attled"]),
        // The whole stack for other Swift programs: `import Attled` brings the facade
        // (BLEStack, Link) and re-exports every layer; BLETrace decodes packets.
        .library(name: "Attled", targets: ["Attled", "AttledLED", "BLEWire", "BLETransport", "BLEHCI", "BLEGAP", "BLEL2CAP",
                                           "BLEATT", "BLEGATT", "LEDProfile", "BLETrace", "BLESMP", "AttledJSON"]),
    ] + (withGateway ? [
        // The MQTT / Home Assistant gateway as a library: `Gateway(config:stack:)`.
        .library(name: "AttledGateway", targets: ["AttledGateway", "AttledHomeAssistant", "MQTT"]),
    ] : []),
    targets: [
        // Kernel socket ABI (sockaddr_hci, HCI_CHANNEL_USER, ioctls) from libbluetooth-dev's headers.
        .systemLibrary(name: "CBluetooth", path: "Sources/CBluetooth",
                       providers: [.apt(["libbluetooth-dev"])]),
        // Bounds-checked byte reader/writer, addresses, UUIDs, assigned numbers, clocks.
        .target(name: "BLEWire", swiftSettings: strict),
        // JSON values: the CLI's --json output, the gateway's MQTT payloads.
        .target(name: "AttledJSON", swiftSettings: strict),
        // Moves whole HCI packets: H4 over TCP/Unix/serial, Linux HCI user channel;
        // the event loop (descriptors, timers, signals) the whole program runs on.
        .target(name: "BLETransport", dependencies: ["BLEWire", "CBluetooth", "CEpoll"], swiftSettings: strict),
        // HCI commands/events, command flow control, ACL credits; drives the event loop.
        .target(name: "BLEHCI", dependencies: ["BLEWire", "BLETransport"], swiftSettings: strict),
        // Advertising data, scanning, connecting.
        .target(name: "BLEGAP", dependencies: ["BLEWire", "BLEHCI"], swiftSettings: strict),
        // LE fixed channels: reassembly, signalling, SMP rejection.
        .target(name: "BLEL2CAP", dependencies: ["BLEWire", "BLEHCI"], swiftSettings: strict),
        // ATT PDUs and the client bearer.
        .target(name: "BLEATT", dependencies: ["BLEWire", "BLEHCI", "BLEL2CAP"], swiftSettings: strict),
        // GATT client procedures.
        .target(name: "BLEGATT", dependencies: ["BLEWire", "BLEHCI", "BLEATT"], swiftSettings: strict),
        // The GATT server: a database, its sessions per client, every request answered.
        .target(name: "BLEGATTServer", dependencies: ["BLEWire", "BLEATT", "BLEGATT", "BLESMP"], swiftSettings: strict),
        // Packet decoder for --trace (dispatch and layout; each layer describes its own PDUs), btsnoop capture files.
        .target(name: "BLETrace", dependencies: ["BLEWire", "BLETransport", "BLEHCI", "BLEGAP", "BLEL2CAP", "BLEATT", "BLEGATT", "BLESMP"], swiftSettings: strict),
        // The three LED devices and generic RGB descriptions.
        .target(name: "LEDProfile", dependencies: ["BLEWire", "BLEHCI", "BLEATT", "BLEGATT"], swiftSettings: strict),
        // The facade: open, scan, connect, a GATT client per link; re-exports the layers. It knows no app.
        .target(name: "Attled", dependencies: ["BLEWire", "AttledJSON", "BLETransport", "BLEHCI", "BLEGAP", "BLEL2CAP", "BLEATT", "BLEGATT", "BLESMP"], swiftSettings: strict),
        // The LED lamps on the facade: Link.resolveLED/setColour/readColour, DeviceFilter.led.
        .target(name: "AttledLED", dependencies: ["Attled", "LEDProfile"], swiftSettings: strict),
        // attled as the device: the boards as data, the GATT JSON, the LED a server plays.
        .target(name: "AttledServe", dependencies: ["Attled", "AttledJSON", "BLEGATTServer", "LEDProfile"], swiftSettings: strict),
        // Argument parsing and the jobs the CLI runs.
        // Linux's epoll header (the event loop's descriptor set, in BLETransport).
        .systemLibrary(name: "CEpoll", path: "Sources/CEpoll"),
        .target(name: "AttledCLI",
                dependencies: ["Attled", "AttledLED", "AttledJSON", "BLEWire", "BLETransport", "BLEHCI", "BLEGAP", "BLEL2CAP", "BLEATT", "BLEGATT", "BLETrace", "LEDProfile", "BLESMP", "BLEGATTServer", "AttledServe", "AttledProxy"]
                    + (withGateway ? ["MQTT", "AttledGateway"] : []),
                swiftSettings: strict + (withGateway ? [.define("ATTLED_GATEWAY")] : [])),
        // --static-swift-stdlib links with -export-dynamic, which puts every Swift symbol in
        // the dynamic symbol table (1 MB of the binary, and pages the loader touches);
        // nothing resolves attled's symbols at run time, so they stay local.
        .executableTarget(name: "attled", dependencies: ["AttledCLI"], swiftSettings: strict,
                          linkerSettings: [.unsafeFlags(["-Xlinker", "--no-export-dynamic"])]),
        // Parser throughput micro-benchmark (make bench).
        .executableTarget(name: "attled-bench", dependencies: ["BLEWire", "BLEHCI", "BLEGAP", "BLEATT"], swiftSettings: strict),
        // libmosquitto from Debian's libmosquitto-dev. Shared library only: a
        // fully static build (-static-executable) must not link anything that
        // depends on this module.
        .systemLibrary(name: "CMosquitto", path: "Sources/CMosquitto",
                       providers: [.apt(["libmosquitto-dev"])]),
        // libmosquitto.so.1 opened with dlopen when the gateway first needs it:
        // trampolines for the functions MQTT calls (a one-shot run maps none
        // of libmosquitto, libssl, libcares, libcjson).
        .target(name: "CMosquittoLoader", linkerSettings: [.linkedLibrary("dl")]),
        // An MQTT 3.1.1 client over libmosquitto, driven by its owner's event loop. It knows MQTT only.
        .target(name: "MQTT", dependencies: ["BLEWire", "BLETransport", "CMosquitto", "CMosquittoLoader"], swiftSettings: strict),
        // Home Assistant's MQTT contract as pure functions: topics, discovery
        // configs, the JSON light's commands and state (no I/O, no MQTT client).
        .target(name: "AttledHomeAssistant", dependencies: ["BLEWire", "AttledJSON", "LEDProfile"], swiftSettings: strict),
        // The gateway: a DeviceKeeper's lamps bridged to MQTT and Home Assistant, from a GatewayConfig.
        .target(name: "AttledGateway", dependencies: ["Attled", "AttledLED", "MQTT", "AttledHomeAssistant"], swiftSettings: strict),
        .testTarget(name: "BLEStackTests",
                    dependencies: ["BLEWire", "AttledJSON", "BLETransport", "BLEHCI", "BLEGAP", "BLEL2CAP", "BLEATT", "BLEGATT", "BLETrace", "LEDProfile", "Attled", "AttledLED", "AttledCLI", "BLESMP", "MQTT", "AttledHomeAssistant", "AttledGateway", "BLEGATTServer", "AttledServe", "ESPHomeAPI", "AttledProxy"],
                    exclude: ["Golden"], // read through #filePath by GoldenTraceTests
                    swiftSettings: language + (withGateway ? [.define("ATTLED_GATEWAY")] : [])),
        // libcrypto (AES-128, AES-CMAC, P-256; X25519, ChaCha20-Poly1305, SHA-256, HMAC for Noise; OpenSSL 3, headers from Debian's libssl-dev):
        // libcrypto.so.3 opened on first use, or libcrypto.a linked in the fully static build.
        .target(name: "CCrypto",
                cSettings: fullyStatic ? [.define("ATTLED_CRYPTO_LINKED")] : [],
                linkerSettings: fullyStatic ? [.linkedLibrary("crypto")] : [.linkedLibrary("dl")]),
        // Security Manager (Core Vol 3 Part H): PDUs, crypto toolbox, the central's pairing state machine.
        .target(name: "BLESMP", dependencies: ["BLEWire", "CCrypto"], swiftSettings: strict),
        // The ESPHome native API (a Home Assistant Bluetooth proxy's wire): protobuf messages,
        // plaintext and Noise frames, the Noise_NNpsk0 responder; sans I/O.
        .target(name: "ESPHomeAPI", dependencies: ["BLEWire", "CCrypto"], swiftSettings: strict),
        // The Home Assistant Bluetooth proxy: ESPHome's native API served on the keeper's loop, each client's link a claim.
        .target(name: "AttledProxy", dependencies: ["Attled", "ESPHomeAPI", "CAvahi"], swiftSettings: strict),
        // The proxy's mDNS announcement through avahi-daemon: libavahi-client.so.3 opened
        // with dlopen when a proxy announces itself (none in the fully static build).
        .target(name: "CAvahi",
                cSettings: fullyStatic ? [.define("ATTLED_NO_DLOPEN")] : [],
                linkerSettings: fullyStatic ? [] : [.linkedLibrary("dl")]),
        // Checks the SMP crypto against the specification's sample data; proves OpenSSL links (also fully static).
        .executableTarget(name: "smp-selftest", dependencies: ["BLESMP"], swiftSettings: strict),
    ]
)
