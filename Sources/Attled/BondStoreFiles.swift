import BLETransport

extension BondStore {
    /// Writes another record beside the bonds (mode 0600, atomically), for
    /// what a role keeps of a bonded peer (attled serve: a client's CCCDs).
    /// - Throws: `BondStoreError` naming the file and errno.
    public func writeRecord(named name: String, _ bytes: [UInt8]) throws(BondStoreError) {
        try makeDirectory()
        try writeAtomically(directory + "/" + name, bytes)
    }

    /// A record written by `writeRecord`, nil when there is none.
    public func readRecord(named name: String) -> [UInt8]? {
        SystemIO.readFile(directory + "/" + name, limit: 1 << 16)
    }
}
