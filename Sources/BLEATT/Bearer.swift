import BLEWire
import BLEHCI
import BLEL2CAP

/// Failures of an ATT transaction, each naming the request and handle.
public enum ATTError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The server answered with an Error Response.
    case errorResponse(request: ATTOpcode, handle: UInt16, code: ATTErrorCode)
    /// No response within the transaction deadline; the bearer is now unusable (Core Vol 3 Part F 3.3.3).
    case timeout(request: ATTOpcode, handle: UInt16?, ms: Int)
    /// The link went down while the request was outstanding (or before it was sent).
    case disconnected(reason: HCIStatus?)
    /// The server answered with a PDU that is not the response to the request.
    case unexpectedResponse(request: ATTOpcode, received: ATTOpcode)
    /// The response could not be decoded.
    case malformedResponse(request: ATTOpcode, reason: String)
    /// The PDU does not fit the negotiated ATT_MTU.
    case tooLong(request: ATTOpcode, size: Int, mtu: Int)
    /// A previous transaction timed out; ATT allows no further requests on this bearer.
    case bearerClosed

    public var description: String {
        switch self {
        case let .errorResponse(req, h, code):
            return "the device answered \(req.name) on handle 0x\(Hex.int(h, width: 4)) with \(code)"
        case let .timeout(req, h, ms):
            let on = h.map { " on handle 0x\(Hex.int($0, width: 4))" } ?? ""
            return "the device did not answer \(req.name)\(on) within \(ms) ms"
        case .disconnected(let r):
            return "the link was lost" + (r.map { ": \($0)" } ?? "")
        case let .unexpectedResponse(req, got):
            return "the device answered \(req.name) with \(got.name) (protocol violation)"
        case let .malformedResponse(req, reason):
            return "malformed response to \(req.name): \(reason)"
        case let .tooLong(req, size, mtu):
            return "\(req.name) of \(size) bytes does not fit ATT_MTU \(mtu)"
        case .bearerClosed:
            return "an earlier ATT transaction timed out; no further requests are allowed on this link"
        }
    }
}

/// The server side of a bearer: answers the peer's requests and takes its
/// commands and confirmations (Core Vol 3 Part F 3.4). Exchange MTU stays
/// the bearer's own.
public protocol ATTServer: AnyObject {
    /// The answer to a request (its response, or an Error Response); nil for a command.
    func serve(_ pdu: any ATTPDU, opcode: ATTOpcode, on bearer: ATTBearer) -> (any ATTPDU)?
    /// A Handle Value Confirmation arrived (the indication outstanding is done).
    func confirmed(on bearer: ATTBearer)
}

/// One ATT bearer (Core Vol 3 Part F 3.3). The client side: one
/// outstanding request at a time (the rest wait in a queue, in order), a
/// deadline per transaction, Error Response mapped to `ATTError`, MTU
/// exchange, notifications delivered, indications delivered and confirmed.
/// The peer's requests: Exchange MTU answered with our MTU; the rest by the
/// `server` when there is one (a GATT server), else with Request Not
/// Supported.
///
/// Lifecycle: `open` until the link goes down, the host fails, `close()` is
/// called, or a transaction times out (3.3.3: no further requests on the
/// bearer). Then the outstanding request and every queued one fail, each
/// exactly once, and later requests fail at once.
public final class ATTBearer {
    /// The L2CAP link this bearer runs on (CID 0x0004).
    public let link: L2CAPLink
    /// The HCI layer below.
    public var host: HCIHost { link.host }
    /// The MTU attled offers (and answers a peer's request with).
    public var preferredMTU: UInt16 = 517
    /// Effective ATT_MTU (23 until an exchange).
    public private(set) var mtu: Int = 23
    /// True once an MTU exchange happened (either side asked).
    public private(set) var mtuExchanged = false
    /// Default deadline per transaction; the specification's 30 s is far too long for a CLI.
    public var transactionTimeoutMs = 5000

    /// Answers the peer's requests and commands (nil: a client only).
    public var server: (any ATTServer)?
    /// Handle Value Notifications.
    public var onNotification: ((HandleValue) -> Void)?
    /// Handle Value Indications (already confirmed).
    public var onIndication: ((HandleValue) -> Void)?
    /// PDUs that arrived with no request waiting for them, or failed to decode.
    public var onUnexpected: ((String) -> Void)?
    /// Called once when a transaction times out: the bearer is now unusable
    /// and the owner should disconnect the link (Core Vol 3 Part F 3.3.3).
    public var onTimeout: ((ATTError) -> Void)?

    /// One finished transaction, for the timing summary.
    public struct Transaction: Sendable {
        public var request: ATTOpcode
        public var response: ATTOpcode?
        public var start: Instant
        public var end: Instant
    }
    /// Every finished transaction, in order.
    public private(set) var transactions: [Transaction] = []
    /// Commands and notifications sent without a response.
    public private(set) var commandsSent = 0

    /// Where the bearer is in its life.
    public enum State: Equatable, Sendable {
        /// Requests are sent (one at a time) and answered.
        case open
        /// Closed with this error; every request fails with it.
        case closed(ATTError)
    }
    /// Where the bearer is in its life.
    public private(set) var state = State.open

    struct Request {
        var pdu: any ATTPDU
        var bytes: [UInt8]
        var timeoutMs: Int
        var future: Future<any ATTPDU>
    }
    struct Outstanding {
        var request: Request
        var opcode: ATTOpcode
        var handle: UInt16?
        var start: Instant
        var timer: HostToken
    }
    private var queue: [Request] = []
    private var outstanding: Outstanding?
    private var tokens: [HostToken] = []

    /// The request waiting for its response, if any.
    public var pendingRequest: ATTOpcode? { outstanding?.opcode }
    /// Requests waiting behind the outstanding one.
    public var queuedRequests: Int { queue.count }

    /// - Parameters:
    ///   - link: the L2CAP link; the bearer takes its ATT channel.
    ///   - ownsDisconnection: false when the connection's owner closes the
    ///     bearer on disconnection itself (`close(.disconnected(...))`, the
    ///     facade's Link, in its fixed order); true (alone, as in tests): the
    ///     bearer watches for Disconnection Complete on its own.
    public init(link: L2CAPLink, ownsDisconnection: Bool = true) {
        self.link = link
        link.register(cid: CID.att) { [weak self] in self?.receive($0) }
        if ownsDisconnection {
            tokens.append(link.host.onEvent { [weak self] ev in
                if case let .disconnectionComplete(d) = ev, let self, d.handle == self.link.handle, d.status == .success {
                    self.close(.disconnected(reason: d.reason))
                }
            })
        }
        tokens.append(link.host.onClose { [weak self] _ in self?.close(.disconnected(reason: nil)) })
    }

    /// Closes the bearer: the outstanding and queued requests fail with
    /// `error`, as does every later one. Idempotent (the first error stays).
    public func close(_ error: ATTError = .bearerClosed) {
        guard state == .open else { return }
        state = .closed(error)
        host.cancel(tokens)
        tokens.removeAll()
        let out = outstanding
        outstanding = nil
        let q = queue
        queue.removeAll()
        if let o = out {
            host.cancel(o.timer)
            transactions.append(Transaction(request: o.opcode, response: nil, start: o.start, end: Instant.now()))
            o.request.future.fail(error)
        }
        for r in q { r.future.fail(error) }
    }

    private var closedError: ATTError? {
        if case let .closed(e) = state { return e }
        if !link.isOpen { return .disconnected(reason: nil) }
        return nil
    }

    /// Queues a request; it is sent when the ones before it are answered.
    /// - Returns: a future of the response. An Error Response fails it with
    ///   `ATTError.errorResponse`; so do a timeout, a disconnection, a PDU
    ///   over ATT_MTU and a response of the wrong kind, each with its own case.
    public func submit(_ pdu: any ATTPDU, timeoutMs: Int? = nil) -> Future<any ATTPDU> {
        let f = Future<any ATTPDU>()
        if let e = closedError { f.fail(e); return f }
        let bytes = pdu.encoded
        guard bytes.count <= mtu else { f.fail(ATTError.tooLong(request: pdu.opcode, size: bytes.count, mtu: mtu)); return f }
        queue.append(Request(pdu: pdu, bytes: bytes, timeoutMs: timeoutMs ?? transactionTimeoutMs, future: f))
        sendNext()
        return f
    }

    /// Sends a request and waits for its response (pumping the loop, so
    /// other links make progress meanwhile).
    /// - Returns: the response.
    /// - Throws: `ATTError` (Error Response, timeout, disconnected, ...), or
    ///   the host's `HCIError`.
    public func request(_ pdu: any ATTPDU, timeoutMs: Int? = nil) throws -> any ATTPDU {
        try host.wait(submit(pdu, timeoutMs: timeoutMs))
    }

    private var timingOut = false

    private func sendNext() {
        guard outstanding == nil, state == .open, !timingOut, !queue.isEmpty else { return }
        let r = queue.removeFirst()
        // The MTU may have shrunk? It only grows; still, re-check what was queued at 23.
        let op = r.pdu.opcode
        let timer = host.schedule(afterMs: r.timeoutMs) { [weak self] in self?.timedOut() }
        outstanding = Outstanding(request: r, opcode: op, handle: r.pdu.firstHandle, start: Instant.now(), timer: timer)
        link.send(cid: CID.att, r.bytes)
    }

    /// The outstanding request fails with `.timeout`; the bearer closes, so
    /// the queued and later requests fail with `.bearerClosed`.
    private func timedOut() {
        guard let o = outstanding else { return }
        timingOut = true
        let e = ATTError.timeout(request: o.opcode, handle: o.handle, ms: o.request.timeoutMs)
        finish(.failure(e))
        close(.bearerClosed)
        onTimeout?(e)
    }

    /// Ends the outstanding transaction with `result` and sends the next request.
    private func finish(_ result: Result<any ATTPDU, ATTError>) {
        guard let o = outstanding else { return }
        outstanding = nil
        host.cancel(o.timer)
        let response: ATTOpcode? = (try? result.get())?.opcode
        transactions.append(Transaction(request: o.opcode, response: response, start: o.start, end: Instant.now()))
        switch result {
        case .success(let rsp):
            if let e = rsp as? ATT.ErrorResponse { o.request.future.fail(ATTError.errorResponse(request: o.opcode, handle: e.handle, code: e.error)) }
            else { o.request.future.succeed(rsp) }
        case .failure(let e):
            o.request.future.fail(e)
        }
        sendNext()
    }

    /// Sends a PDU that has no response (Write Command).
    /// - Throws: `ATTError` when the bearer is closed or the PDU does not fit ATT_MTU.
    public func send(_ pdu: any ATTPDU) throws {
        if let e = closedError { throw e }
        let bytes = pdu.encoded
        guard bytes.count <= mtu else { throw ATTError.tooLong(request: pdu.opcode, size: bytes.count, mtu: mtu) }
        commandsSent += 1
        link.send(cid: CID.att, bytes)
    }

    /// Exchange MTU (3.4.2.1), queued like any request.
    /// - Returns: a future of the effective MTU, the smaller of the two.
    public func startExchangeMTU() -> Future<Int> {
        submit(ATT.ExchangeMTURequest(mtu: preferredMTU)).map { [weak self] rsp in
            guard let server = (rsp as? ATT.ExchangeMTUResponse)?.mtu else {
                throw ATTError.unexpectedResponse(request: .exchangeMTURequest, received: rsp.opcode)
            }
            guard let self else { return 23 }
            self.applyMTU(server)
            return self.mtu
        }
    }

    /// Exchange MTU (3.4.2.1): offers `preferredMTU`; the effective MTU is the smaller of the two.
    /// - Returns: the effective MTU.
    /// - Throws: `ATTError`, `HCIError`.
    @discardableResult
    public func exchangeMTU() throws -> Int {
        try host.wait(startExchangeMTU())
    }

    private func applyMTU(_ peer: UInt16) {
        mtu = max(23, Int(min(peer, preferredMTU)))
        mtuExchanged = true
    }

    /// One ATT PDU from L2CAP (public for unit tests).
    public func receive(_ bytes: [UInt8]) {
        guard let first = bytes.first else { return }
        let op = ATTOpcode(rawValue: first)
        // No ATT PDU may exceed ATT_MTU (Core Vol 3 Part F 3.2.8): the MTU
        // agreed, 23 before an exchange. A request over it is answered with
        // Invalid PDU (its answer, of the same length or longer, could not be
        // sent: a Prepare Write Response echoes the value), never served.
        if bytes.count > mtu {
            let why = "\(op.name) of \(bytes.count) bytes exceeds ATT_MTU \(mtu)"
            if let p = outstanding?.opcode, op.kind == .response, op == .errorResponse || p.info?.response == op {
                finish(.failure(.malformedResponse(request: p, reason: why)))
            } else if op.kind == .request {
                onUnexpected?(why + "; answered Invalid PDU")
                link.send(cid: CID.att, ATT.ErrorResponse(request: op, handle: 0, error: .invalidPDU).encoded)
            } else {
                onUnexpected?(why + "; dropped")
            }
            return
        }
        let pdu: any ATTPDU
        do {
            pdu = try ATT.decode(bytes)
        } catch {
            let reason = (error as? WireError)?.description ?? "undecodable"
            if let p = outstanding?.opcode, op.kind == .response, op == .errorResponse || p.info?.response == op {
                finish(.failure(.malformedResponse(request: p, reason: reason)))
            } else if op.kind == .request {
                link.send(cid: CID.att, ATT.ErrorResponse(request: op, handle: 0, error: .invalidPDU).encoded)
            } else {
                onUnexpected?("undecodable \(op): \(reason)")
            }
            return
        }
        switch op.kind {
        case .response:
            guard let p = outstanding?.opcode else {
                onUnexpected?("\(op.name) with no request outstanding; ignored")
                return
            }
            if let req = (pdu as? ATT.ErrorResponse)?.request {
                if req == p { finish(.success(pdu)) }
                else { onUnexpected?("Error Response for \(req.name), but \(p.name) is outstanding; ignored") }
                return
            }
            if p.info?.response == op { finish(.success(pdu)) }
            else { finish(.failure(.unexpectedResponse(request: p, received: op))) }
        case .notification:
            if let n = pdu as? ATT.HandleValueNotification { onNotification?(HandleValue(handle: n.handle, value: n.value)) }
            if let n = pdu as? ATT.MultipleHandleValueNotification {
                for v in n.values { onNotification?(HandleValue(handle: v.handle, value: v.value)) }
            }
        case .indication:
            if let i = pdu as? ATT.HandleValueIndication {
                link.send(cid: CID.att, ATT.HandleValueConfirmation().encoded)
                onIndication?(HandleValue(handle: i.handle, value: i.value))
            }
        case .request:
            if let m = (pdu as? ATT.ExchangeMTURequest)?.mtu {
                link.send(cid: CID.att, ATT.ExchangeMTUResponse(mtu: preferredMTU).encoded)
                applyMTU(m)
            } else if let server, let answer = server.serve(pdu, opcode: op, on: self) {
                link.send(cid: CID.att, answer.encoded)
            } else {
                let h = pdu.firstHandle ?? 0
                link.send(cid: CID.att, ATT.ErrorResponse(request: op, handle: h, error: .requestNotSupported).encoded)
            }
        case .command:
            _ = server?.serve(pdu, opcode: op, on: self)
        case .confirmation:
            server?.confirmed(on: self)
        case .unknown:
            // Unknown opcode: requests (command flag clear) get Request Not Supported (3.4.1.1).
            if !op.isCommandFlagSet {
                link.send(cid: CID.att, ATT.ErrorResponse(request: op, handle: 0, error: .requestNotSupported).encoded)
            }
        }
    }
}
