import BLEWire
import BLEHCI

/// An L2CAP basic frame (B-frame, Core Vol 3 Part A 3.1): the Length field,
/// the channel ID and the information payload.
public struct BasicFrame: Hashable, Sendable {
    /// The Length field: how many payload bytes the header announces.
    public var length: UInt16
    /// The destination channel ID.
    public var cid: UInt16
    /// The information payload.
    public var payload: [UInt8]

    /// A frame from its header fields and payload.
    public init(length: UInt16, cid: UInt16, payload: [UInt8]) {
        self.length = length; self.cid = cid; self.payload = payload
    }

    /// Reads the 4-byte basic header and takes every byte after it as the
    /// payload, whether or not their number matches the Length field (the
    /// tracer shows a mismatch; the reassembler never hands one out).
    /// - Throws: `WireError.truncated` when the header is incomplete.
    public static func decode(_ bytes: [UInt8]) throws -> BasicFrame {
        var r = ByteReader(bytes)
        let len = try r.u16("Length")
        let cid = try r.u16("Channel ID")
        return BasicFrame(length: len, cid: cid, payload: r.rest())
    }
}

/// Why fragments were dropped during reassembly (Core Vol 3 Part A 7.2).
public enum ReassemblyError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A start fragment arrived while a PDU was incomplete; that PDU was
    /// dropped. `missing` is how many bytes it lacked, nil when its length
    /// field itself was incomplete.
    case interrupted(missing: Int?)
    /// A continuation fragment of `length` bytes arrived with no PDU in
    /// progress; it was dropped.
    case continuationWithoutStart(length: Int)
    /// The fragments carried more payload than the basic header announced
    /// (`received` > `announced`); the PDU, `bytes` with its header, was dropped.
    case overlong(received: Int, announced: Int, bytes: [UInt8])

    /// One sentence saying what was dropped and why.
    public var description: String {
        switch self {
        case .interrupted(let missing):
            return "start fragment while \(missing.map(String.init) ?? "an unknown number of") byte(s) of the previous PDU were missing; previous PDU dropped"
        case .continuationWithoutStart(let n):
            return "continuation fragment (\(n) bytes) without a start fragment; dropped"
        case let .overlong(received, announced, _):
            return "PDU longer than its basic header says (\(received) > \(announced) bytes); dropped"
        }
    }
}

/// Reassembly of ACL fragments into L2CAP basic frames for one connection
/// and direction (Core Vol 3 Part A 7.2). The state is explicit: a start
/// fragment begins a PDU (dropping an incomplete one), a continuation adds
/// to it, a continuation without a start is dropped, and data past the
/// announced length drops the PDU. The length field may itself be split
/// across fragments. Used by `L2CAPLink` and by the tracer, so both see the
/// same frames.
public struct L2CAPReassembler: Sendable {
    /// What a fragment led to.
    public enum Progress: Hashable, Sendable {
        /// A whole frame, exactly as long as its header announces.
        case complete(BasicFrame)
        /// More fragments are due: bytes received so far and the total the
        /// header announces, both counting the 4-byte header; `expected` is
        /// nil while the length field is incomplete.
        case partial(received: Int, expected: Int?)
    }

    /// The result of one fragment.
    public struct Step: Hashable, Sendable {
        /// What this fragment caused to be dropped, in order: the incomplete PDU
        /// a start fragment cut short (`.interrupted`), then the fragment itself
        /// (`.continuationWithoutStart`) or the PDU it made too long (`.overlong`).
        public var dropped: [ReassemblyError]
        /// A complete frame or the progress so far; nil when the fragment was dropped.
        public var progress: Progress?
    }

    private var buffer: [UInt8] = []
    private var active = false

    /// A reassembler with no PDU in progress.
    public init() {}

    /// True while a PDU has been started and is not yet complete.
    public var inProgress: Bool { active }

    /// Forgets any PDU in progress (on disconnection).
    public mutating func reset() {
        buffer.removeAll()
        active = false
    }

    /// The total length (header included) announced by the buffered bytes, nil
    /// while fewer than 2 bytes are buffered.
    private var expected: Int? {
        guard buffer.count >= 2 else { return nil }
        return Int(UInt16(buffer[0]) | UInt16(buffer[1]) << 8) + 4
    }

    /// Adds one ACL fragment (its Packet_Boundary_Flag says start or continuation).
    /// Never traps: every problem is reported in `Step.dropped`, and after a
    /// dropped fragment or PDU the state is empty.
    /// - Returns: a complete frame or the progress so far, and what was dropped.
    public mutating func receive(_ acl: ACLPacket) -> Step {
        var dropped: [ReassemblyError] = []
        if acl.isStart {
            if active { dropped.append(.interrupted(missing: expected.map { $0 - buffer.count })) }
            buffer = acl.data
            active = true
        } else {
            guard active else { return Step(dropped: [.continuationWithoutStart(length: acl.data.count)], progress: nil) }
            buffer += acl.data
        }
        guard let total = expected else {
            return Step(dropped: dropped, progress: .partial(received: buffer.count, expected: nil))
        }
        if buffer.count > total {
            let bytes = buffer
            reset()
            return Step(dropped: dropped + [.overlong(received: bytes.count - 4, announced: total - 4, bytes: bytes)], progress: nil)
        }
        guard buffer.count == total else {
            return Step(dropped: dropped, progress: .partial(received: buffer.count, expected: total))
        }
        let bytes = buffer
        reset()
        // total >= 4, so the header is whole and decode cannot fail.
        let frame = (try? BasicFrame.decode(bytes)) ?? BasicFrame(length: 0, cid: 0, payload: [])
        return Step(dropped: dropped, progress: .complete(frame))
    }
}
