import BLEWire
import CCrypto

/// Why a Security Manager crypto function refused its input or failed.
public enum SMPCryptoError: Error, Equatable, Sendable, CustomStringConvertible {
    /// An input had the wrong size (`field` names the parameter).
    case invalidLength(field: String, expected: Int, actual: Int)
    /// The peer's public key is not a point on P-256 (Core Vol 3 Part H 2.3.5.6.1).
    case invalidPublicKey
    /// A private key scalar outside 1 ..< n.
    case invalidPrivateKey
    /// An OpenSSL call failed; `operation` names it.
    case openssl(operation: String)
    /// libcrypto.so.3 could not be loaded (it is opened on first use); the
    /// loader's message.
    case libraryMissing(String)

    public var description: String {
        switch self {
        case let .invalidLength(field, expected, actual): return "\(field) must be \(expected) bytes, not \(actual)"
        case .invalidPublicKey: return "the public key is not a point on P-256"
        case .invalidPrivateKey: return "the private key is not a P-256 scalar"
        case let .openssl(op): return "OpenSSL failed in \(op)"
        case let .libraryMissing(why):
            return "cannot load OpenSSL's libcrypto (\(why)): install it (Debian 13: apt install libssl3t64; Debian 12: libssl3)"
        }
    }
}

/// The Security Manager's cryptographic toolbox (Core Vol 3 Part H 2.2).
///
/// Byte order: every value here is in SMP's order, least significant octet
/// first, exactly as the PDUs carry it. The specification writes its
/// functions and Appendix D sample data most significant octet first; each
/// function reverses on the way into OpenSSL and back. Addresses are
/// `DeviceAddress` values; their type folds to public (0) or random (1).
public enum SMPCrypto {
    // MARK: Primitives

    /// Security function e (2.2.1): AES-128 encryption of one block.
    /// - Throws: `SMPCryptoError.invalidLength` unless key and plaintext are 16
    ///   bytes; `SMPCryptoError.openssl` if AES-128 fails.
    public static func e(key: [UInt8], plaintext: [UInt8]) throws(SMPCryptoError) -> [UInt8] {
        try check(key, 16, "key")
        try check(plaintext, 16, "plaintext")
        let k = Array(key.reversed()), p = Array(plaintext.reversed())
        var out = [UInt8](repeating: 0, count: 16)
        let ok = attled_aes128_encrypt(k, p, &out)
        guard ok != 0 else { throw SMPCrypto.failure("AES-128") }
        return out.reversed()
    }

    /// AES-CMAC (RFC 4493) with a 128-bit key, as the specification writes it
    /// (2.2.5): key and message most significant octet first, result likewise.
    /// The f and g functions below wrap it in SMP byte order.
    /// - Throws: `SMPCryptoError.invalidLength` unless the key is 16 bytes;
    ///   `SMPCryptoError.openssl` if AES-CMAC fails.
    public static func aesCMAC(key: [UInt8], message: [UInt8]) throws(SMPCryptoError) -> [UInt8] {
        try check(key, 16, "key")
        var out = [UInt8](repeating: 0, count: 16)
        let ok = message.withUnsafeBufferPointer { m in attled_aes_cmac(key, m.baseAddress, m.count, &out) }
        guard ok != 0 else { throw SMPCrypto.failure("AES-CMAC") }
        return out
    }

    /// `count` bytes from OpenSSL's CSPRNG (RAND_bytes).
    /// - Returns: an empty array when `count` is 0 or negative.
    /// - Throws: `SMPCryptoError.openssl` if RAND_bytes fails.
    public static func random(_ count: Int) throws(SMPCryptoError) -> [UInt8] {
        guard count > 0 else { return [] }
        var out = [UInt8](repeating: 0, count: count)
        guard attled_random(&out, Int32(clamping: count)) != 0 else { throw SMPCrypto.failure("RAND_bytes") }
        return out
    }

    // MARK: Legacy pairing and privacy

    /// Random address hash ah (2.2.2): `ah(k, r) = e(k, r') mod 2^24`, r' the
    /// 24-bit `prand` padded with zeros. Returns the 3-byte hash.
    /// - Throws: `SMPCryptoError.invalidLength` unless `prand` is 3 bytes and
    ///   `irk` 16; `SMPCryptoError.openssl` if AES fails.
    public static func ah(irk: [UInt8], prand: [UInt8]) throws(SMPCryptoError) -> [UInt8] {
        try check(prand, 3, "prand")
        let r = prand + [UInt8](repeating: 0, count: 13)
        return Array(try e(key: irk, plaintext: r).prefix(3))
    }

    /// Confirm value generation c1 for LE legacy pairing (2.2.3):
    /// `c1 = e(k, e(k, r XOR p1) XOR p2)` with `p1 = pres || preq || rat' || iat'`
    /// and `p2 = padding || ia || ra`. `preq` and `pres` are the whole Pairing
    /// Request and Response PDUs (7 bytes each, code first) as sent.
    /// - Throws: `SMPCryptoError.invalidLength` unless `k` and `r` are 16 bytes
    ///   and `preq` and `pres` 7; `SMPCryptoError.openssl` if AES fails.
    public static func c1(k: [UInt8], r: [UInt8], preq: [UInt8], pres: [UInt8],
                          initiator: DeviceAddress, responder: DeviceAddress) throws(SMPCryptoError) -> [UInt8] {
        try check(r, 16, "r")
        try check(preq, 7, "preq")
        try check(pres, 7, "pres")
        // Least significant first: iat', rat', preq, pres.
        let p1 = [initiator.type.isRandom ? 1 : 0, responder.type.isRandom ? 1 : 0] + preq + pres
        let p2 = responder.address.bytes + initiator.address.bytes + [0, 0, 0, 0]
        let inner = try e(key: k, plaintext: xor(r, p1))
        return try e(key: k, plaintext: xor(inner, p2))
    }

    /// Key generation s1 for LE legacy pairing (2.2.4): `e(k, r1' || r2')`,
    /// r1' and r2' the least significant 64 bits of r1 and r2. The STK is
    /// `s1(TK, Srand, Mrand)`.
    /// - Throws: `SMPCryptoError.invalidLength` unless `k`, `r1` and `r2` are 16
    ///   bytes; `SMPCryptoError.openssl` if AES fails.
    public static func s1(k: [UInt8], r1: [UInt8], r2: [UInt8]) throws(SMPCryptoError) -> [UInt8] {
        try check(r1, 16, "r1")
        try check(r2, 16, "r2")
        return try e(key: k, plaintext: Array(r2.prefix(8)) + Array(r1.prefix(8)))
    }

    // MARK: LE Secure Connections

    /// Confirm value generation f4 (2.2.6): `AES-CMAC_X(U || V || Z)`. U and V
    /// are public key X coordinates (32 bytes), X a nonce, Z one octet (0 for
    /// Just Works and Numeric Comparison).
    /// - Throws: `SMPCryptoError.invalidLength` unless U and V are 32 bytes and
    ///   X 16; `SMPCryptoError.openssl` if AES-CMAC fails.
    public static func f4(u: [UInt8], v: [UInt8], x: [UInt8], z: UInt8) throws(SMPCryptoError) -> [UInt8] {
        try check(u, 32, "U")
        try check(v, 32, "V")
        try check(x, 16, "X")
        return try cmacLE(key: x, [z] + v + u)
    }

    /// f5's SALT and keyID "btle" (2.2.7), least significant octet first.
    static let f5Salt: [UInt8] = Array([0x6C, 0x88, 0x83, 0x91, 0xAA, 0xF5, 0xA5, 0x38,
                                        0x60, 0x37, 0x0B, 0xDB, 0x5A, 0x60, 0x83, 0xBE].reversed())
    static let f5KeyID: [UInt8] = [0x65, 0x6C, 0x74, 0x62]

    /// Key generation f5 (2.2.7): from the DHKey W, the two nonces and the two
    /// device addresses, the MacKey (counter 0) and the LTK (counter 1).
    /// - Throws: `SMPCryptoError.invalidLength` unless W is 32 bytes and N1 and
    ///   N2 16; `SMPCryptoError.openssl` if AES-CMAC fails.
    public static func f5(w: [UInt8], n1: [UInt8], n2: [UInt8],
                          a1: DeviceAddress, a2: DeviceAddress) throws(SMPCryptoError) -> (macKey: [UInt8], ltk: [UInt8]) {
        try check(w, 32, "W")
        try check(n1, 16, "N1")
        try check(n2, 16, "N2")
        let t = try cmacLE(key: f5Salt, w)
        // Least significant first: Length (256), A2, A1, N2, N1, keyID, Counter.
        // Built in steps: Swift 6.0's type checker gives up on one long sum.
        var body: [UInt8] = [0x00, 0x01]
        body += address56(a2)
        body += address56(a1)
        body += n2
        body += n1
        body += f5KeyID
        let macKey = try cmacLE(key: t, body + [0])
        let ltk = try cmacLE(key: t, body + [1])
        return (macKey, ltk)
    }

    /// Check value generation f6 (2.2.8): `AES-CMAC_W(N1 || N2 || R || IOcap || A1 || A2)`.
    /// `ioCap` is 3 bytes least significant first: IO Capability, OOB data
    /// flag, AuthReq (see `PairingParameters.ioCap`). R is 16 bytes (zero for
    /// Just Works).
    /// - Throws: `SMPCryptoError.invalidLength` unless W (the MacKey), N1, N2 and
    ///   R are 16 bytes and IOcap 3; `SMPCryptoError.openssl` if AES-CMAC fails.
    public static func f6(w: [UInt8], n1: [UInt8], n2: [UInt8], r: [UInt8], ioCap: [UInt8],
                          a1: DeviceAddress, a2: DeviceAddress) throws(SMPCryptoError) -> [UInt8] {
        try check(w, 16, "W")
        try check(n1, 16, "N1")
        try check(n2, 16, "N2")
        try check(r, 16, "R")
        try check(ioCap, 3, "IOcap")
        return try cmacLE(key: w, address56(a2) + address56(a1) + ioCap + r + n2 + n1)
    }

    /// Numeric comparison value generation g2 (2.2.9):
    /// `AES-CMAC_X(U || V || Y) mod 2^32`; the six-digit value is this mod 10^6.
    /// - Throws: `SMPCryptoError.invalidLength` unless U and V are 32 bytes and X
    ///   and Y 16; `SMPCryptoError.openssl` if AES-CMAC fails.
    public static func g2(u: [UInt8], v: [UInt8], x: [UInt8], y: [UInt8]) throws(SMPCryptoError) -> UInt32 {
        try check(u, 32, "U")
        try check(v, 32, "V")
        try check(x, 16, "X")
        try check(y, 16, "Y")
        let mac = try cmacLE(key: x, y + v + u)
        return UInt32(mac[0]) | UInt32(mac[1]) << 8 | UInt32(mac[2]) << 16 | UInt32(mac[3]) << 24
    }

    /// Keeps the `size` least significant octets of a 128-bit key and zeroes
    /// the rest: the negotiated encryption key size applied to an STK or LTK
    /// (Core Vol 3 Part H 2.3.4).
    public static func masked(_ key: [UInt8], size: Int) -> [UInt8] {
        let n = max(0, min(size, key.count))
        return Array(key.prefix(n)) + [UInt8](repeating: 0, count: key.count - n)
    }

    // MARK: Helpers

    /// AES-CMAC with key and message in SMP order (least significant first).
    static func cmacLE(key: [UInt8], _ message: [UInt8]) throws(SMPCryptoError) -> [UInt8] {
        try aesCMAC(key: key.reversed(), message: message.reversed()).reversed()
    }

    /// The 56-bit address of f5 and f6, least significant first: the address,
    /// then its type octet (0 public, 1 random) as the most significant octet.
    static func address56(_ a: DeviceAddress) -> [UInt8] {
        a.address.bytes + [a.type.isRandom ? 1 : 0]
    }

    static func xor(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        zip(a, b).map { $0 ^ $1 }
    }

    /// The error for a failed libcrypto call: the library missing, else `operation` failing.
    static func failure(_ operation: String) -> SMPCryptoError {
        if attled_crypto_open() != 0, let why = attled_crypto_error() { return .libraryMissing(String(cString: why)) }
        return .openssl(operation: operation)
    }

    static func check(_ v: [UInt8], _ n: Int, _ field: String) throws(SMPCryptoError) {
        guard v.count == n else { throw .invalidLength(field: field, expected: n, actual: v.count) }
    }

    /// Compares without an early exit, for confirm and check values.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var d: UInt8 = 0
        for (x, y) in zip(a, b) { d |= x ^ y }
        return d == 0
    }
}

/// A P-256 key pair for LE Secure Connections (Core Vol 3 Part H 2.3.5.6.1),
/// held by OpenSSL. The private key never leaves it. Generate a fresh pair
/// for every pairing.
public final class P256KeyPair {
    private let key: OpaquePointer

    /// Our public key as the Pairing Public Key PDU carries it: X then Y,
    /// 32 bytes each, least significant octet first.
    public let publicKey: [UInt8]

    /// A fresh key pair from OpenSSL's generator.
    /// - Throws: `SMPCryptoError.openssl` if key generation or public key export fails.
    public convenience init() throws(SMPCryptoError) {
        guard let k = attled_p256_new(nil) else { throw SMPCrypto.failure("P-256 key generation") }
        try self.init(taking: k)
    }

    /// The key pair of a known private scalar (32 bytes, least significant
    /// first), for the specification's sample data and debug key.
    /// - Throws: `SMPCryptoError.invalidLength` unless the key is 32 bytes;
    ///   `SMPCryptoError.invalidPrivateKey` if OpenSSL refuses the scalar;
    ///   `SMPCryptoError.openssl` if public key export fails.
    public convenience init(privateKey: [UInt8]) throws(SMPCryptoError) {
        try SMPCrypto.check(privateKey, 32, "private key")
        let be = Array(privateKey.reversed())
        guard let k = attled_p256_new(be) else {
            if attled_crypto_open() != 0 { throw SMPCrypto.failure("P-256 key") }
            throw .invalidPrivateKey
        }
        try self.init(taking: k)
    }

    private init(taking k: OpaquePointer) throws(SMPCryptoError) {
        var x = [UInt8](repeating: 0, count: 32), y = [UInt8](repeating: 0, count: 32)
        guard attled_p256_public(k, &x, &y) != 0 else {
            attled_p256_free(k)
            throw SMPCrypto.failure("P-256 public key export")
        }
        key = k
        publicKey = Array(x.reversed()) + Array(y.reversed())
    }

    deinit { attled_p256_free(key) }

    /// The X coordinate of our public key (32 bytes, least significant first).
    public var x: [UInt8] { Array(publicKey.prefix(32)) }

    /// ECDH: the DHKey shared with the owner of `peerPublicKey` (64 bytes, X
    /// then Y, least significant first), 32 bytes least significant first.
    /// Throws `invalidPublicKey` when the peer's point is not on P-256.
    /// - Throws: `SMPCryptoError.invalidLength` unless the key is 64 bytes;
    ///   `SMPCryptoError.invalidPublicKey`; `SMPCryptoError.openssl` if ECDH fails otherwise.
    public func dhKey(peerPublicKey: [UInt8]) throws(SMPCryptoError) -> [UInt8] {
        try SMPCrypto.check(peerPublicKey, 64, "public key")
        let point: [UInt8] = [0x04] + Array(peerPublicKey.prefix(32).reversed()) + Array(peerPublicKey.suffix(32).reversed())
        var out = [UInt8](repeating: 0, count: 32)
        switch attled_p256_derive(key, point, &out) {
        case 1: return out.reversed()
        case -1: throw .invalidPublicKey
        default: throw SMPCrypto.failure("ECDH")
        }
    }

    /// Whether a 64-byte public key (X then Y, least significant first) is a
    /// point on P-256.
    public static func isValidPublicKey(_ key: [UInt8]) -> Bool {
        guard key.count == 64 else { return false }
        let point: [UInt8] = [0x04] + Array(key.prefix(32).reversed()) + Array(key.suffix(32).reversed())
        return attled_p256_is_valid_point(point) == 1
    }
}

/// A key (LTK, STK, IRK, CSRK) that must not leak: it prints as a
/// placeholder and mirrors without its bytes, so `print`, string
/// interpolation and dumps of results that hold one stay safe. `bytes` is
/// least significant octet first.
public struct SMPSecret: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public let bytes: [UInt8]
    /// Wraps key bytes, least significant octet first.
    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public var description: String { "<\(bytes.count)-byte key hidden>" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }

    /// Hex, most significant octet first (as the specification prints keys).
    /// Only for `--trace=keys`.
    public var revealedHex: String { Hex.string(bytes.reversed(), separator: "") }
}
