#if canImport(Glibc)
import Glibc
#endif
import BLEWire
import BLETransport

/// btsnoop version 1 files with datalink 1002 (HCI UART/H4): the format
/// btmon -w, Android's HCI snoop log, Bumble's snooper and Wireshark share.
/// Header: "btsnoop\0", version (BE32) = 1, datalink (BE32). Records: original
/// length, included length, flags (bit 0: received; bit 1: command/event),
/// cumulative drops (all BE32), timestamp (BE64, microseconds since
/// 0000-01-01), then the packet (with its H4 indicator for datalink 1002).
public enum Btsnoop {
    public static let magic: [UInt8] = Array("btsnoop".utf8) + [0]
    public static let datalinkH4: UInt32 = 1002
    public static let datalinkHCI: UInt32 = 1001
    public static let datalinkMonitor: UInt32 = 2001
    /// Microseconds between 0000-01-01 and 1970-01-01 as btsnoop counts them.
    public static let epochOffset: UInt64 = 0x00DC_DDB3_0F2F_8000

    /// One packet record of a capture, numbered from 1; `drops` is the record's cumulative drops field.
    public struct Record: Sendable {
        public var number: Int
        public var packet: HCIPacket
        public var direction: Direction
        /// Microseconds since the Unix epoch.
        public var timestampUs: UInt64
        public var drops: UInt32
    }

    /// Why parsing stopped: the record number (nil in the file header), the byte offset and a message.
    public struct FileError: Error, Sendable, CustomStringConvertible {
        public var record: Int?
        public var offset: Int
        public var message: String
        public var description: String {
            (record.map { "record \($0) (byte offset \(offset)): " } ?? "byte offset \(offset): ") + message
        }
    }

    /// Parses a whole capture. Records before a corruption are returned with
    /// the error that stopped parsing, so a caller can print both.
    public static func parse(_ bytes: [UInt8]) -> (records: [Record], error: FileError?) {
        var r = ByteReader(bytes)
        var out: [Record] = []
        guard let m = try? r.bytes(8), m == magic else {
            return ([], FileError(record: nil, offset: 0, message: "not a btsnoop file (the first 8 bytes are not \"btsnoop\\0\")"))
        }
        guard let version = try? r.u32be(), let datalink = try? r.u32be() else {
            return ([], FileError(record: nil, offset: 8, message: "truncated header (needs 16 bytes)"))
        }
        guard version == 1 else { return ([], FileError(record: nil, offset: 8, message: "btsnoop version \(version), expected 1")) }
        guard datalink == datalinkH4 || datalink == datalinkHCI || datalink == datalinkMonitor else {
            return ([], FileError(record: nil, offset: 12, message: "datalink \(datalink) is not supported (1001 HCI, 1002 H4, 2001 monitor)"))
        }
        var n = 0
        while !r.isAtEnd {
            n += 1
            let at = r.offset
            guard r.remaining >= 24 else {
                return (out, FileError(record: n, offset: at, message: "truncated record header (\(r.remaining) of 24 bytes)"))
            }
            let orig = (try? r.u32be()) ?? 0, incl = Int((try? r.u32be()) ?? 0)
            let flags = (try? r.u32be()) ?? 0, drops = (try? r.u32be()) ?? 0, ts = (try? r.u64be()) ?? 0
            guard incl <= 65535 + 5, UInt32(incl) <= orig || orig == 0 else {
                return (out, FileError(record: n, offset: at, message: "implausible length \(incl) (original \(orig))"))
            }
            guard let data = try? r.bytes(incl) else {
                return (out, FileError(record: n, offset: at, message: "truncated packet (\(incl) bytes announced, \(r.remaining) left)"))
            }
            let dir: Direction = flags & 1 == 1 ? .received : .sent
            let us = ts >= epochOffset ? ts - epochOffset : 0
            var pkt: HCIPacket
            switch datalink {
            case datalinkH4:
                guard let t = data.first else {
                    return (out, FileError(record: n, offset: at, message: "empty packet"))
                }
                pkt = HCIPacket(HCIPacketType(rawValue: t), Array(data.dropFirst()))
            case datalinkHCI:
                // No indicator: flags bit 1 tells command/event from data.
                let isCmdEvt = flags & 2 != 0
                pkt = HCIPacket(isCmdEvt ? (dir == .sent ? .command : .event) : .acl, data)
            default:
                // btmon's monitor format: opcode in the flags word (BE: adapter<<16 | opcode).
                let opcode = flags & 0xFFFF
                switch opcode {
                case 2: pkt = HCIPacket(.command, data)
                case 3: pkt = HCIPacket(.event, data)
                case 4: pkt = HCIPacket(.acl, data)
                case 5: pkt = HCIPacket(.acl, data)
                default: continue // index added/removed, notes: not HCI traffic
                }
                out.append(Record(number: n, packet: pkt, direction: opcode == 2 || opcode == 4 ? .sent : .received, timestampUs: us, drops: drops))
                continue
            }
            out.append(Record(number: n, packet: pkt, direction: dir, timestampUs: us, drops: drops))
        }
        return (out, nil)
    }

    /// File header bytes.
    public static func header() -> [UInt8] {
        var w = ByteWriter()
        w.append(magic); w.u32be(1); w.u32be(datalinkH4)
        return w.bytes
    }

    /// One record's bytes.
    public static func record(_ packet: HCIPacket, direction: Direction, timestampUs: UInt64) -> [UInt8] {
        let data = packet.h4
        var w = ByteWriter(capacity: 24 + data.count)
        var flags: UInt32 = direction == .received ? 1 : 0
        if packet.type == .command || packet.type == .event { flags |= 2 }
        w.u32be(UInt32(data.count)); w.u32be(UInt32(data.count)); w.u32be(flags); w.u32be(0)
        w.u64be(timestampUs + epochOffset)
        w.append(data)
        return w.bytes
    }
}

/// Writes every packet to a btsnoop file as it passes, one write(2) per
/// record, so a crash or kill keeps everything captured so far.
public final class BtsnoopWriter: PacketObserver {
    private var fd: Int32
    public let path: String
    /// Wall clock at open and the monotonic instant it corresponds to.
    private let wallStart = wallClockMicroseconds()
    private let monoStart = Instant.now()

    /// The capture file could not be opened; `description` names the errno.
    public struct OpenError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Creates or truncates `path` (mode 0644 before umask) and writes the btsnoop header.
    /// - Throws: `BtsnoopWriter.OpenError` when open(2) fails.
    public init(path: String) throws {
        self.path = path
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        if fd < 0 { throw OpenError(description: errnoName(errno)) }
        writeAll(Btsnoop.header())
    }

    deinit { close() }

    /// Appends one record, its timestamp the wall clock at open plus the
    /// monotonic time since; does nothing once closed.
    public func observe(_ packet: HCIPacket, direction: Direction, at time: Instant) {
        guard fd >= 0 else { return }
        let us = wallStart + time.usSince(monoStart)
        writeAll(Btsnoop.record(packet, direction: direction, timestampUs: us))
    }

    private func writeAll(_ b: [UInt8]) {
        if fd >= 0 { SystemIO.writeAll(fd, b) }
    }

    /// Closes the file; packets observed afterwards are dropped. Safe to call twice.
    public func close() {
        if fd >= 0 { _ = Glibc.close(fd); fd = -1 }
    }
}
