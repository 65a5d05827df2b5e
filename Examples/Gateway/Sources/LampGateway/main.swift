// LampGateway TRANSPORT BROKER_HOST[:PORT]
// Keeps a link to the lamp named "CassarTech" and bridges it to an MQTT
// broker with Home Assistant's discovery convention (topics attled/...),
// using only attled's public library API. Ctrl-C stops it cleanly: the lamp
// and the gateway are published offline, the broker is left, the link closed.
#if canImport(Glibc)
import Glibc
#endif
import Attled
import AttledGateway

let lamp = "CassarTech"

func runGateway(transport: String, broker: String) -> Int32 {
    let parts = broker.split(separator: ":", maxSplits: 1).map(String.init)
    guard let host = parts.first, !host.isEmpty, let port = parts.count == 2 ? Int(parts[1]) : 1883 else {
        Console.out("LampGateway: '\(broker)' is not HOST[:PORT]")
        return 64
    }
    let loop = EventLoop()
    loop.watchSignals()  // SIGINT/SIGTERM end the run
    let stack: BLEStack
    do { stack = try BLEStack.open(transport, loop: loop) } catch {
        Console.out("LampGateway: \(error)")
        return 69
    }
    defer { stack.close() }
    var config = GatewayConfig(brokerHost: host, brokerPort: port, gatewayID: "example")
    config.names = [lamp]
    do {
        let gateway = try Gateway(config: config, stack: stack)
        gateway.log = { Console.out("LampGateway: " + $0) }  // Console: flushed line by line
        Console.out("LampGateway: keeping \(lamp), broker \(host):\(port)")
        do {
            try gateway.run()
        } catch HCIError.interrupted where gateway.stopped {
            Console.out("LampGateway: stopped")
            return 0
        }
        return 0
    } catch {
        Console.out("LampGateway: \(error)")
        return 1
    }
}

let args = CommandLine.arguments
guard args.count == 3 else {
    Console.out("usage: LampGateway TRANSPORT BROKER_HOST[:PORT]   (e.g. LampGateway tcp:127.0.0.1:9000 127.0.0.1:1883)")
    exit(64)
}
exit(runGateway(transport: args[1], broker: args[2]))
