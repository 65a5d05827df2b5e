import BLEWire

// The trace's account of HCI commands, from their declarations (one line per
// parameter, not indented: the tracer indents). Events: `HCIEvent.traceFields`.

extension HCICommand {
    /// One line per parameter, as the command's declaration names them;
    /// undeclared commands' parameters as hex. Parameters that do not decode
    /// end the lines with the reason and their hex. Keys are masked.
    public var traceFields: [String] { traceFields(showKeys: false) }

    /// The parameters' lines; `showKeys` (`--trace=keys`) shows LE Enable
    /// Encryption's and LE Long Term Key Request Reply's keys.
    public func traceFields(showKeys: Bool) -> [String] {
        guard let d = HCI.commandTable[opcode.rawValue] else { return Hex.lines(parameters) }
        do { return try d.traceLines(parameters, showKeys: showKeys) } catch {
            return ["malformed parameters: \(error)"] + Hex.lines(parameters)
        }
    }

    /// The byte ranges of `parameters` that hold fields the command's
    /// declaration marks `secret` (LE Enable Encryption's Rand, EDIV and LTK,
    /// LE Long Term Key Request Reply's LTK): what a hex dump masks.
    /// Parameters that do not match the declaration are masked from its first
    /// secret field on; an undeclared command has none.
    public var secretRanges: [Range<Int>] {
        HCI.commandTable[opcode.rawValue]?.secretRanges(parameters) ?? []
    }
}
