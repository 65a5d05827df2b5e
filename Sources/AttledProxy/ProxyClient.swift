import Attled
import ESPHomeAPI

/// One API client's connection (Home Assistant, or any aioesphomeapi
/// client): its socket on the loop, its framing (plaintext, or Noise from
/// the handshake on), what it subscribed to, and the Bluetooth links it
/// made. Messages in go to the proxy; `send` frames a message out.
final class ProxyClient {
    let stream: TCPStream
    let id: Int
    private weak var proxy: Proxy?
    private var watch: EventLoop.Token?

    /// How the client's bytes are framed, each state with what it needs.
    private enum Framing {
        case plaintext(PlaintextFrameDecoder)
        case handshake(NoiseResponder)
        case noise(NoiseTransport)
        case closed
    }
    private var framing: Framing

    /// Hello answered.
    var helloDone = false
    /// The client's name (HelloRequest.client_info), for log lines.
    var clientInfo = "?"
    /// Raw advertisements are sent to it.
    var wantsAdvertisements = false
    /// BluetoothConnectionsFree is sent to it on every change.
    var wantsConnectionsFree = false
    /// Its Bluetooth links, by API address.
    var links: [UInt64: ProxyLink] = [:]
    /// Advertisements waiting for the next batch.
    var batch: [BluetoothLERawAdvertisement] = []
    var batchTimer: EventLoop.Token?

    var label: String { "\(stream.peer) (\(clientInfo))" }
    var isClosed: Bool { if case .closed = framing { return true } else { return false } }

    init(stream: TCPStream, id: Int, proxy: Proxy, key: NoisePSK?, name: String, mac: [UInt8]) {
        self.stream = stream
        self.id = id
        self.proxy = proxy
        framing = key.map { .handshake(NoiseResponder(psk: $0, name: name, macAddress: mac)) } ?? .plaintext(PlaintextFrameDecoder())
        watch = proxy.loop.watch(stream.fd, .readable) { [weak self] ev in self?.ready(ev) }
    }

    // MARK: bytes in

    private func ready(_ ev: EventLoop.Events) {
        if ev.contains(.writable) {
            guard stream.flush() else { return close("the connection failed while writing") }
            if !stream.wantsWrite, let w = watch { proxy?.loop.update(w, .readable) }
        }
        guard ev.contains(.readable) || ev.contains(.hangup) else { return }
        // Read until the socket is empty: edge or level, nothing is left behind.
        while !isClosed {
            switch stream.read() {
            case .data(let bytes): receive(bytes)
            case .wouldBlock: return
            case .closed: return close("the client closed the connection")
            case .failed(let e): return close("read failed: \(errnoName(e))")
            }
        }
    }

    private func receive(_ bytes: [UInt8]) {
        switch framing {
        case .closed:
            return
        case var .plaintext(decoder):
            decoder.append(bytes)
            var frames: [PlaintextFrame] = []
            loop: while true {
                switch decoder.next() {
                case .needMoreBytes: break loop
                case let .frame(f): frames.append(f)
                case let .corrupt(why):
                    // A Noise client to a plaintext proxy: ESPHome answers that it speaks plaintext.
                    if case .wrongIndicator = why { stream.send(PlaintextFrame.badIndicatorReply) }
                    return close("bad frame: \(why)")
                }
            }
            framing = .plaintext(decoder)
            for f in frames where !isClosed { message(f.type, f.payload) }
        case var .handshake(responder):
            let actions = responder.receive(bytes)
            framing = .handshake(responder)
            for a in actions {
                switch a {
                case let .send(out): stream.send(out)
                case let .failed(why): return close("Noise handshake failed: \(why)")
                case let .handshakeComplete(transport):
                    framing = .noise(transport)
                    proxy?.log("proxy: \(stream.peer): encrypted (Noise)")
                    // Bytes the client sent past the handshake are already in the transport.
                    receive([])
                }
            }
        case var .noise(transport):
            let events = transport.receive(bytes)
            framing = .noise(transport)
            for e in events where !isClosed {
                switch e {
                case let .message(type, payload): message(type, payload)
                case let .failed(why): return close("\(why)")
                }
            }
        }
    }

    private func message(_ type: APIMessageType, _ payload: [UInt8]) {
        let decoded: DecodedAPIMessage
        do { decoded = try APIMessages.decode(type: type, payload: payload) } catch {
            return close("a malformed \(type): \(error)")
        }
        guard case let .known(m) = decoded else {
            proxy?.trace?("proxy: \(label) >> \(type): not one of ours, ignored")
            return  // unknown message types are ignored, as ESPHome does
        }
        proxy?.trace?("proxy: \(label) >> \(m.traceDescription)")
        proxy?.handle(m, from: self)
    }

    // MARK: bytes out

    /// Frames `message` and writes it (what the socket does not take now
    /// goes out when it is writable).
    func send(_ message: some APIMessage) {
        let bytes: [UInt8]
        switch framing {
        case .closed, .handshake: return
        case .plaintext: bytes = PlaintextFrame.encode(message)
        case var .noise(t):
            do { bytes = try t.encrypt(message) } catch { return close("cannot encrypt \(type(of: message)): \(error)") }
            framing = .noise(t)
        }
        proxy?.trace?("proxy: \(label) << \(message.traceDescription)")
        guard stream.send(bytes) else { return close("the connection failed while writing") }
        if stream.wantsWrite, let w = watch { proxy?.loop.update(w, [.readable, .writable]) }
    }

    /// Ends the connection (once): the proxy drops the client's links.
    func close(_ why: String) {
        guard !isClosed else { return }
        framing = .closed
        if let w = watch { proxy?.loop.cancel(w) }
        watch = nil
        if let t = batchTimer { proxy?.loop.cancel(t) }
        batchTimer = nil
        _ = stream.flush()
        stream.close()
        proxy?.clientClosed(self, why)
    }
}
