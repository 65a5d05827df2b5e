// One fuzzer binary, many harnesses: the harness is the name the binary was
// started under (Fuzz/run.sh links fuzz-<harness> to attled-fuzz), or
// ATTLED_FUZZ_HARNESS when that is set.
#if canImport(Glibc)
import Glibc
#endif

/// Every harness by name. Each takes one input and must never trap on it.
nonisolated(unsafe) let harnesses: [(name: String, run: ([UInt8]) -> Void)] = [
    ("h4", fuzzH4),
    ("hci-event", fuzzHCIEvent),
    ("adv", fuzzAdvertising),
    ("l2cap", fuzzL2CAP),
    ("att", fuzzATT),
    ("signalling", fuzzSignalling),
    ("btsnoop", fuzzBtsnoop),
    ("trace", fuzzTrace),
    ("cli", fuzzCLI),
    ("transport-spec", fuzzTransportSpec),
    ("smp", fuzzSMP),
    ("smp-responder", fuzzSMPResponder),
    ("gatt-server", fuzzGATTServer),
    ("json", fuzzJSON),
    ("ha-command", fuzzHACommand),
    ("api-frames", fuzzAPIFrames),
    ("api-message", fuzzAPIMessage),
    ("api-noise", fuzzAPINoise),
]

nonisolated(unsafe) var selectedHarness: (([UInt8]) -> Void)? = nil

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<CInt>,
                           _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> CInt {
    var name = ""
    if let env = getenv("ATTLED_FUZZ_HARNESS") {
        name = String(cString: env)
    } else if let a0 = argv.pointee?.pointee {
        let path = String(cString: a0)
        name = String(path.split(separator: "/").last ?? "")
        if name.hasPrefix("fuzz-") { name = String(name.dropFirst(5)) }
    }
    guard let h = harnesses.first(where: { $0.name == name }) else {
        warn("attled-fuzz: unknown harness '\(name)'; run as fuzz-NAME or set ATTLED_FUZZ_HARNESS to one of: "
             + harnesses.map(\.name).joined(separator: " "))
        exit(2)
    }
    selectedHarness = h.run
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size)) : []
    selectedHarness?(bytes)
    return 0
}
