// cli: the input is an argument vector, arguments separated by NUL bytes; a
// first argument starting with '@' is ATTLED_TRANSPORT instead. Options.parse
// must return options or a UsageError (exit 64), nothing else, and never trap.
import BLEWire
import AttledCLI

func fuzzCLI(_ data: [UInt8]) {
    var args = data.split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    if data.isEmpty { args = [] }
    var env: [String: String] = [:]
    if let first = args.first, first.hasPrefix("@") {
        env["ATTLED_TRANSPORT"] = String(first.dropFirst())
        args.removeFirst()
    }
    do {
        let o = try Options.parse(args, environment: env)
        switch o.command {
        case .set: require(o.led.rgb != nil, "set without a colour parsed")
        case .send: require(o.value.map { !$0.isEmpty && $0.count <= 512 } ?? false, "send without a value parsed")
        case .decode: require(o.files.count == 1, "decode without one file parsed")
        default: break
        }
        _ = (o.explicitProfile, o.transport?.description)
    } catch let e as UsageError {
        require(!e.message.isEmpty, "empty usage message")
    } catch {
        require(false, "Options.parse threw \(type(of: error)) instead of a UsageError: \(error)")
    }
}
