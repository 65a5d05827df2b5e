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

/// The client side of one ATT bearer (Core Vol 3 Part F 3.3): one outstanding
/// request at a time with a deadline, Error Response mapped to `ATTError`,
/// MTU exchange, the peer's own requests answered (its Exchange MTU Request
/// with our MTU; anything else with Request Not Supported, as attled has no
/// GATT server), notifications delivered, indications delivered and
/// confirmed, and the pending request failed exactly once on disconnect.
public final class ATTBearer {
    public let link: L2CAPLink
    public var host: HCIHost { link.host }
    /// The MTU attled offers (and answers a peer's request with).
    public var preferredMTU: UInt16 = 517
    /// Effective ATT_MTU (23 until an exchange).
    public private(set) var mtu: Int = 23
    public private(set) var mtuExchanged = false
    /// Default deadline per transaction; the specification's 30 s is far too long for a CLI.
    public var transactionTimeoutMs = 5000

    public var onNotification: ((HandleValue) -> Void)?
    public var onIndication: ((HandleValue) -> Void)?
    /// PDUs that arrived with no request waiting for them, or failed to decode.
    public var onUnexpected: ((String) -> Void)?

    /// One finished transaction, for the timing summary.
    public struct Transaction: Sendable {
        public var request: ATTOpcode
        public var response: ATTOpcode?
        public var start: Instant
        public var end: Instant
    }
    public private(set) var transactions: [Transaction] = []
    /// Commands and notifications sent without a response.
    public private(set) var commandsSent = 0

    private var pending: ATTOpcode?
    private var pendingHandle: UInt16?
    private var result: Result<ATTPDU, ATTError>?
    private var closed = false
    private var disconnectReason: HCIStatus?

    public init(link: L2CAPLink) {
        self.link = link
        link.register(cid: CID.att) { [unowned self] in self.receive($0) }
        link.host.onEvent { [weak self] ev in
            if case let .disconnectionComplete(d) = ev, let self, d.handle == self.link.handle, d.status == .success {
                self.disconnectReason = d.reason
                if self.pending != nil, self.result == nil { self.result = .failure(.disconnected(reason: d.reason)) }
            }
        }
    }

    /// Sends a request and waits for its response. An Error Response throws
    /// `ATTError.errorResponse`.
    public func request(_ pdu: ATTPDU, timeoutMs: Int? = nil) throws -> ATTPDU {
        let op = pdu.opcode
        if closed { throw ATTError.bearerClosed }
        guard link.isOpen else { throw ATTError.disconnected(reason: disconnectReason) }
        let bytes = pdu.encoded
        guard bytes.count <= mtu else { throw ATTError.tooLong(request: op, size: bytes.count, mtu: mtu) }
        precondition(pending == nil, "ATT allows one outstanding request per bearer")
        pending = op
        pendingHandle = Self.handle(of: pdu)
        result = nil
        defer { pending = nil; pendingHandle = nil; result = nil }
        let start = Instant.now()
        let ms = timeoutMs ?? transactionTimeoutMs
        link.send(cid: CID.att, bytes)
        let done = try host.pump(until: start.adding(ms: ms)) { result != nil }
        guard done, let res = result else {
            closed = true
            throw ATTError.timeout(request: op, handle: pendingHandle, ms: ms)
        }
        let end = Instant.now()
        switch res {
        case .success(let rsp):
            transactions.append(Transaction(request: op, response: rsp.opcode, start: start, end: end))
            if case let .errorResponse(_, h, code) = rsp { throw ATTError.errorResponse(request: op, handle: h, code: code) }
            return rsp
        case .failure(let e):
            transactions.append(Transaction(request: op, response: nil, start: start, end: end))
            throw e
        }
    }

    /// Sends a PDU that has no response (Write Command).
    public func send(_ pdu: ATTPDU) throws {
        if closed { throw ATTError.bearerClosed }
        guard link.isOpen else { throw ATTError.disconnected(reason: disconnectReason) }
        let bytes = pdu.encoded
        guard bytes.count <= mtu else { throw ATTError.tooLong(request: pdu.opcode, size: bytes.count, mtu: mtu) }
        commandsSent += 1
        link.send(cid: CID.att, bytes)
    }

    /// Exchange MTU (3.4.2.1): offers `preferredMTU`; the effective MTU is the smaller of the two.
    @discardableResult
    public func exchangeMTU() throws -> Int {
        let rsp = try request(.exchangeMTURequest(mtu: preferredMTU))
        guard case let .exchangeMTUResponse(server) = rsp else {
            throw ATTError.unexpectedResponse(request: .exchangeMTURequest, received: rsp.opcode)
        }
        applyMTU(server)
        return mtu
    }

    private func applyMTU(_ peer: UInt16) {
        mtu = max(23, Int(min(peer, preferredMTU)))
        mtuExchanged = true
    }

    static func handle(of pdu: ATTPDU) -> UInt16? {
        switch pdu {
        case let .readRequest(h), let .readBlobRequest(h, _), let .writeRequest(h, _), let .prepareWriteRequest(h, _, _): return h
        case let .findInformationRequest(s, _), let .findByTypeValueRequest(s, _, _, _), let .readByTypeRequest(s, _, _), let .readByGroupTypeRequest(s, _, _): return s
        default: return nil
        }
    }

    /// One ATT PDU from L2CAP (public for unit tests).
    public func receive(_ bytes: [UInt8]) {
        guard let first = bytes.first else { return }
        let op = ATTOpcode(rawValue: first)
        // No ATT PDU may exceed ATT_MTU (Core Vol 3 Part F 3.2.8); the peer must
        // respect the MTU we agreed (and our own, for its requests).
        if bytes.count > max(mtu, op.kind == .request ? Int(preferredMTU) : mtu) {
            let why = "\(op.name) of \(bytes.count) bytes exceeds ATT_MTU \(mtu)"
            if let p = pending, result == nil, op.kind == .response, op == .errorResponse || p.info?.response == op {
                result = .failure(.malformedResponse(request: p, reason: why))
            } else {
                onUnexpected?(why + "; dropped")
            }
            return
        }
        let pdu: ATTPDU
        do {
            pdu = try ATTPDU.decode(bytes)
        } catch {
            let reason = (error as? WireError)?.description ?? "undecodable"
            if let p = pending, result == nil, op.kind == .response, op == .errorResponse || p.info?.response == op {
                result = .failure(.malformedResponse(request: p, reason: reason))
            } else if op.kind == .request {
                link.send(cid: CID.att, ATTPDU.errorResponse(request: op, handle: 0, error: .invalidPDU).encoded)
            } else {
                onUnexpected?("undecodable \(op): \(reason)")
            }
            return
        }
        switch op.kind {
        case .response:
            guard let p = pending, result == nil else {
                onUnexpected?("\(op.name) with no request outstanding; ignored")
                return
            }
            if case let .errorResponse(req, _, _) = pdu {
                if req == p { result = .success(pdu) }
                else { onUnexpected?("Error Response for \(req.name), but \(p.name) is outstanding; ignored") }
                return
            }
            if p.info?.response == op { result = .success(pdu) }
            else { result = .failure(.unexpectedResponse(request: p, received: op)) }
        case .notification:
            if case let .handleValueNotification(h, v) = pdu { onNotification?(HandleValue(handle: h, value: v)) }
        case .indication:
            if case let .handleValueIndication(h, v) = pdu {
                link.send(cid: CID.att, ATTPDU.handleValueConfirmation.encoded)
                onIndication?(HandleValue(handle: h, value: v))
            }
        case .request:
            if case let .exchangeMTURequest(m) = pdu {
                link.send(cid: CID.att, ATTPDU.exchangeMTUResponse(mtu: preferredMTU).encoded)
                applyMTU(m)
            } else {
                let h = Self.handle(of: pdu) ?? 0
                link.send(cid: CID.att, ATTPDU.errorResponse(request: op, handle: h, error: .requestNotSupported).encoded)
            }
        case .command, .confirmation:
            break // we are not a server: nothing to do
        case .unknown:
            // Unknown opcode: requests (command flag clear) get Request Not Supported (3.4.1.1).
            if !op.isCommandFlagSet {
                link.send(cid: CID.att, ATTPDU.errorResponse(request: op, handle: 0, error: .requestNotSupported).encoded)
            }
        }
    }
}
