// SetColour TRANSPORT NAME R,G,B
// Finds the LED device advertising NAME, connects, finds its LED service and
// writes the colour, using only attled's public library API.
#if canImport(Glibc)
import Glibc
#endif
import Attled
import AttledLED

/// Sets the colour; returns the process exit code.
func setColour(transport: String, name: String, colour: RGB) -> Int32 {
    let stack: BLEStack
    do { stack = try BLEStack.open(transport) } catch {
        print("SetColour: \(error)")
        return 69
    }
    defer { stack.close() } // stops scanning, disconnects, closes the transport
    do {
        let lamp = try stack.find(.name(name), timeoutMs: 5000)
        let link = try stack.connect(to: lamp.address)
        let led = try link.resolveLED(advertised: lamp.serviceUUIDs)
        try link.setColour(colour, on: led)
        print("set \(lamp.name ?? name) (\(lamp.address), \(led.profile.name)) to \(colour)")
        return 0
    } catch let e as StackError {
        print("SetColour: \(e)") // not found
        return 3
    } catch let e as GAPError {
        print("SetColour: \(e)") // could not connect
        return 4
    } catch {
        print("SetColour: \(error)")
        return 1
    }
}

let args = CommandLine.arguments
guard args.count == 4 else {
    print("usage: SetColour TRANSPORT NAME R,G,B   (e.g. SetColour tcp:127.0.0.1:9000 CassarTech 255,0,0)")
    exit(64)
}
switch RGB.parse(args[3]) {
case .success(let c): exit(setColour(transport: args[1], name: args[2], colour: c))
case .failure(let e): print("SetColour: \(e.message)"); exit(64)
}
