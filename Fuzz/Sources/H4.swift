// h4: the input is a byte stream from a UART or socket. It is fed to
// H4Framer three ways (whole, one byte at a time, in pieces whose sizes come
// from the input), and all three must frame the same packets, stop at the
// same corrupt indicator, and give back exactly the bytes they consumed.
import BLEWire
import BLETransport

struct FramerRun {
    var packets: [HCIPacket] = []
    var failed = false
    var pending = 0
}

/// Feeds `pieces` in order, taking every whole packet after each piece.
func frame(_ pieces: [ArraySlice<UInt8>]) -> FramerRun {
    var f = H4Framer()
    var run = FramerRun()
    outer: for piece in pieces {
        f.feed(piece)
        while true {
            do {
                guard let p = try f.next() else { break }
                run.packets.append(p)
            } catch {
                run.failed = true
                break outer
            }
        }
    }
    run.pending = f.pendingByteCount
    return run
}

func fuzzH4(_ data: [UInt8]) {
    let whole = frame([data[...]])
    let bytewise = frame(data.indices.map { data[$0..<$0 + 1] })
    let chunked = frame(socketPieces(data))

    // Re-serialised output is exactly the consumed prefix of the stream.
    var out: [UInt8] = []
    for p in whole.packets { out += p.h4 }
    require(out.count <= data.count && Array(data[0..<out.count]) == out, "framed packets are not the stream prefix")
    if whole.failed {
        require(out.count < data.count && !(1...5).contains(data[out.count]), "framer failed on a valid indicator")
    } else {
        require(whole.pending == data.count - out.count, "pending \(whole.pending) != unconsumed \(data.count - out.count)")
    }
    for run in [bytewise, chunked] {
        require(run.packets == whole.packets, "framing depends on how the stream was split")
        require(run.failed == whole.failed, "framer failure depends on how the stream was split")
        // After a failure the framer holds whatever had been fed; otherwise exactly the unconsumed tail.
        require(run.failed || run.pending == whole.pending, "framer pending bytes depend on how the stream was split")
    }
    // Each packet's own length field agrees with its size.
    for p in whole.packets {
        switch p.type.rawValue {
        case 0x01, 0x03: require(p.bytes.count == 3 + Int(p.bytes[2]), "command/SCO length")
        case 0x02: require(p.bytes.count == 4 + (Int(p.bytes[2]) | Int(p.bytes[3]) << 8), "ACL length")
        case 0x04: require(p.bytes.count == 2 + Int(p.bytes[1]), "event length")
        case 0x05: require(p.bytes.count == 4 + ((Int(p.bytes[2]) | Int(p.bytes[3]) << 8) & 0x3FFF), "ISO length")
        default: require(false, "framer produced packet type \(p.type.rawValue)")
        }
    }
    // drain() yields the same packets when the stream is sound.
    var f = H4Framer()
    f.feed(data)
    if let drained = try? f.drain() {
        require(!whole.failed && drained == whole.packets, "drain() disagrees with next()")
    }
}
