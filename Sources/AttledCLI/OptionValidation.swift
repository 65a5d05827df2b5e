/// The checks that span options: first every option given to a command it
/// does not apply to (by its declaration's `commands`), then what goes
/// together and what a command needs.
extension Options {
    func validate() throws {
        // First, so a misapplied option is what the user hears about (not, say, "send needs --value").
        for spec in OptionSpec.all where given.contains(spec.names[0]) {
            if let refusal = spec.refusal(for: command) { throw UsageError(refusal) }
        }
        let custom = [led.red, led.green, led.blue].compactMap { $0 }.count
        if custom > 0 && custom < 3 { throw UsageError("--red, --green and --blue go together") }
        if custom == 3 && service == nil { throw UsageError("--red/--green/--blue need --service UUID for the service that holds them") }
        if custom == 3 && led.profile != nil { throw UsageError("--profile and --red/--green/--blue exclude each other") }
        if characteristics.count > 1 && command != .read {
            throw UsageError("--char is given \(characteristics.count) times: only read takes several (\(command.rawValue) works on one)")
        }
        switch command {
        case .set:
            if led.rgb == nil { throw UsageError("nothing to do: give a colour with --rgb R,G,B (or a command: scan, get, send, listen, gatt)") }
            if led.profile == .harness { throw UsageError("the harness profile has no RGB LED: use 'send --value 01' (press) / '--value 00' (release)") }
        case .send:
            if value == nil { throw UsageError("send needs --value HEX") }
        case .read:
            guard !characteristics.isEmpty, characteristics.allSatisfy(\.isGeneric) else { throw UsageError("read needs --char 0xHHHH|UUID (the handle or UUID of what to read, repeatable; 'attled gatt' lists them)") }
        case .write:
            guard let c = characteristic, c.isGeneric else { throw UsageError("write needs --char 0xHHHH|UUID (the handle or UUID of what to write; 'attled gatt' lists them)") }
            if value == nil { throw UsageError("write needs --value HEX") }
        case .decode:
            if files.count != 1 { throw UsageError("decode needs one FILE (or - for stdin)") }
        case .gateway:
            if gateway.mqttHost.isEmpty { throw UsageError("gateway needs --mqtt HOST[:PORT] (the MQTT broker)") }
        case .serve:
            if (led.profile == nil) == (serve.gattFile == nil) { throw UsageError("serve needs one of --profile pycom|particle|harness or --gatt FILE") }
            if names.count > 1 { throw UsageError("serve plays one device: give one --name") }
        default: break
        }
        if gateway.mqttPasswordFile != nil && gateway.mqttUser == nil { throw UsageError("--mqtt-password-file needs --mqtt-user") }
        if pair == .always && noRepair { throw UsageError("--pair and --no-repair exclude each other") }
        if names.count + addresses.count > 1 && (isGeneric || [.gatt, .ui].contains(command)) {
            throw UsageError("\(command.rawValue) takes one target: give one --name or --address")
        }
        if Set(names).count != names.count || Set(addresses.map(\.address)).count != addresses.count {
            throw UsageError("the same target is given twice")
        }
        if command != .decode && !files.isEmpty { throw UsageError("unexpected argument '\(files[0])'") }
    }
}
