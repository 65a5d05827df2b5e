import BLEWire
import BLEHCI
import BLEATT

/// Reading several values in one round trip (Core Vol 3 Part G 4.8.4, 4.8.5).
extension GATTClient {
    /// How several values are read: the request that worked, or single reads.
    public enum MultipleReadMethod: String, Sendable {
        /// Read Multiple Variable Length (ATT 0x20, 4.8.5): values of any length, one round trip.
        case variable = "read-multiple-variable"
        /// Read Multiple (ATT 0x0E, 4.8.4): concatenated values of known lengths.
        case multiple = "read-multiple"
        /// One Read (and Read Blobs) per value (4.8.1, 4.8.3).
        case single = "read"
    }

    /// The values of several attributes, in the order of `handles`, each in
    /// full (up to 512 bytes).
    ///
    /// First Read Multiple Variable Length Characteristic Values (4.8.5): one
    /// request for all. A value the server cut at the MTU, and those it had
    /// no room for, are completed with Read Blob / Read. When the server
    /// answers Request Not Supported (a server before ATT 5.2), Read Multiple
    /// (4.8.4) when `lengths` gives every value's length but the last's (Read
    /// Multiple carries no lengths), else one read per value. A refusal is
    /// remembered for this client, so later calls go straight to what works.
    /// - Parameters:
    ///   - handles: two or more attribute handles (one is read with Read).
    ///   - lengths: the values' lengths when the caller knows them (fixed-size characteristics).
    /// - Returns: a future of the values and the method that read them; it
    ///   fails with the first error other than Request Not Supported (e.g.
    ///   Read Not Permitted naming the handle, Insufficient Encryption).
    public func startReadMultiple(_ handles: [UInt16], lengths: [Int]? = nil) -> Future<(values: [[UInt8]], method: MultipleReadMethod)> {
        guard handles.count >= 2 else { return readEach(handles, from: [:]).map { ($0, .single) } }
        if !refusedVariable {
            return request(ATT.ReadMultipleVariableRequest(handles), ATT.ReadMultipleVariableResponse.self).flatMap { rsp in
                guard rsp.values.count <= handles.count else {
                    throw GATTError.malformed(procedure: "Read Multiple Variable", reason: "\(rsp.values.count) values for \(handles.count) handles")
                }
                var known: [Int: [UInt8]] = [:], partial: [Int: LengthValue] = [:]
                for (i, v) in rsp.values.enumerated() {
                    if v.isTruncated { partial[i] = v } else { known[i] = v.value }
                }
                return self.readEach(handles, from: known, partial: partial).map { ($0, .variable) }
            }.recover { e in
                guard Self.isNotSupported(e) else { throw e }
                self.refusedVariable = true
                return self.readMultipleFixed(handles, lengths: lengths)
            }
        }
        return readMultipleFixed(handles, lengths: lengths)
    }

    /// Blocking form of `startReadMultiple(_:lengths:)`.
    /// - Throws: `ATTError`, `GATTError`, `HCIError`.
    public func readMultiple(_ handles: [UInt16], lengths: [Int]? = nil) throws -> (values: [[UInt8]], method: MultipleReadMethod) {
        try host.wait(startReadMultiple(handles, lengths: lengths))
    }

    /// True when the server refused the request as one it does not support.
    static func isNotSupported(_ e: any Error) -> Bool {
        if case let ATTError.errorResponse(_, _, code) = e { return code == .requestNotSupported }
        return false
    }

    /// Read Multiple with known lengths, else single reads.
    private func readMultipleFixed(_ handles: [UInt16], lengths: [Int]?) -> Future<(values: [[UInt8]], method: MultipleReadMethod)> {
        guard !refusedMultiple, let lengths, lengths.count == handles.count else {
            return readEach(handles, from: [:]).map { ($0, .single) }
        }
        return request(ATT.ReadMultipleRequest(handles), ATT.ReadMultipleResponse.self).flatMap { rsp in
            // Split by the known lengths; the server stops at ATT_MTU - 1 bytes,
            // so a value it cut or left out is read on its own.
            var known: [Int: [UInt8]] = [:]
            var at = 0
            for (i, n) in lengths.enumerated() {
                let isLast = i == lengths.count - 1
                let take = isLast ? rsp.values.count - at : n
                guard take >= 0, at + take <= rsp.values.count, isLast || take == n else { break }
                if isLast && rsp.values.count == self.bearer.mtu - 1 { break }  // the last may be cut: read it whole
                known[i] = Array(rsp.values[at..<at + take])
                at += take
            }
            return self.readEach(handles, from: known).map { ($0, .multiple) }
        }.recover { e in
            guard Self.isNotSupported(e) else { throw e }
            self.refusedMultiple = true
            return self.readEach(handles, from: [:]).map { ($0, .single) }
        }
    }

    /// The values of `handles`: those in `known` as they are, those in
    /// `partial` (cut by the server, with the attribute's length) read again
    /// whole when one Read Response holds them, else continued with Read Blob
    /// (a server may answer Read Blob on a value under ATT_MTU - 1 bytes with
    /// Attribute Not Long), the rest read in full; one after the other.
    private func readEach(_ handles: [UInt16], from known: [Int: [UInt8]], partial: [Int: LengthValue] = [:]) -> Future<[[UInt8]]> {
        let mtu = bearer.mtu
        var values: [[UInt8]] = []
        func next(_ i: Int) -> Future<[[UInt8]]> {
            guard i < handles.count else { return Future(value: values) }
            let part: Future<[UInt8]>
            if let v = known[i] { part = Future(value: v) }
            else if let p = partial[i], Int(p.length) > mtu - 1 { part = startReadBlobs(handles[i], from: p.value) }
            else if partial[i] != nil { part = startRead(handles[i]) }  // the whole value fits one Read Response
            else { part = startReadLong(handles[i]) }
            return part.flatMap { v in values.append(v); return next(i + 1) }
        }
        return next(0)
    }
}
