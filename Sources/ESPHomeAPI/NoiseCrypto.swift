import CCrypto

/// Why a Noise operation failed.
public enum NoiseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A ChaCha20-Poly1305 tag did not match: the peer's key (for the
    /// handshake, the pre-shared key) differs, or the bytes were changed.
    case macFailure
    /// An input had the wrong size (`field` names it).
    case invalidLength(field: String, expected: Int, actual: Int)
    /// X25519 refused the peer's public key (a low-order point: an all-zero secret).
    case invalidPublicKey
    /// A cipher state used all 2^64 - 1 nonces (Noise 5.1): never in practice.
    case nonceExhausted
    /// An OpenSSL call failed; `operation` names it.
    case openssl(operation: String)
    /// libcrypto.so.3 could not be loaded; the loader's message.
    case libraryMissing(String)

    public var description: String {
        switch self {
        case .macFailure: return "MAC check failed"
        case let .invalidLength(field, expected, actual): return "\(field) must be \(expected) bytes, not \(actual)"
        case .invalidPublicKey: return "the peer's X25519 key is invalid"
        case .nonceExhausted: return "the cipher's nonces are used up"
        case let .openssl(op): return "OpenSSL failed in \(op)"
        case let .libraryMissing(why): return "cannot load OpenSSL's libcrypto (\(why))"
        }
    }
}

/// Noise_NNpsk0_25519_ChaChaPoly_SHA256's primitives (Noise rev 34, 12.1,
/// 12.3, 12.5), every one OpenSSL's through CCrypto. Keys are bytes as
/// RFC 7748 and RFC 8439 have them.
enum NoiseCrypto {
    static let dhLength = 32
    static let hashLength = 32
    static let keyLength = 32
    static let tagLength = 16

    /// Why a CCrypto call returned 0: libcrypto missing, or OpenSSL itself.
    static func failure(_ operation: String) -> NoiseError {
        if let why = attled_crypto_error() { return .libraryMissing(String(cString: why)) }
        return .openssl(operation: operation)
    }

    static func check(_ bytes: [UInt8], _ count: Int, _ field: String) throws(NoiseError) {
        guard bytes.count == count else { throw .invalidLength(field: field, expected: count, actual: bytes.count) }
    }

    /// `count` random bytes (RAND_bytes): a fresh X25519 private key.
    static func random(_ count: Int) throws(NoiseError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        guard attled_random(&out, Int32(clamping: count)) != 0 else { throw failure("RAND_bytes") }
        return out
    }

    /// The public key of a 32-byte X25519 private key.
    static func x25519Public(_ privateKey: [UInt8]) throws(NoiseError) -> [UInt8] {
        try check(privateKey, dhLength, "X25519 private key")
        var out = [UInt8](repeating: 0, count: dhLength)
        guard attled_x25519_public(privateKey, &out) != 0 else { throw failure("X25519 public key") }
        return out
    }

    /// DH(key pair, public key) (Noise 4.1): X25519.
    static func x25519(_ privateKey: [UInt8], _ peer: [UInt8]) throws(NoiseError) -> [UInt8] {
        try check(privateKey, dhLength, "X25519 private key")
        try check(peer, dhLength, "X25519 public key")
        var out = [UInt8](repeating: 0, count: dhLength)
        guard attled_x25519(privateKey, peer, &out) != 0 else {
            if let why = attled_crypto_error() { throw .libraryMissing(String(cString: why)) }
            throw .invalidPublicKey
        }
        return out
    }

    /// ChaChaPoly's nonce (Noise 12.3): 32 bits of zeros, then n as 64 bits little-endian.
    static func nonce(_ n: UInt64) -> [UInt8] {
        [0, 0, 0, 0] + (0..<8).map { UInt8(truncatingIfNeeded: n >> (8 * UInt64($0))) }
    }

    /// ENCRYPT(k, n, ad, plaintext): ciphertext and its 16-byte tag.
    static func encrypt(key: [UInt8], nonce n: UInt64, ad: [UInt8], plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        try seal(key: key, nonce: nonce(n), ad: ad, plaintext: plaintext)
    }

    /// ChaCha20-Poly1305 (RFC 8439 2.8) with any 12-byte nonce.
    static func seal(key: [UInt8], nonce: [UInt8], ad: [UInt8], plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        try check(key, keyLength, "ChaChaPoly key")
        try check(nonce, 12, "ChaChaPoly nonce")
        var out = [UInt8](repeating: 0, count: plaintext.count + tagLength)
        let ok = ad.withUnsafeBufferPointer { a in
            plaintext.withUnsafeBufferPointer { p in
                attled_chacha20_poly1305_seal(key, nonce, a.baseAddress, a.count, p.baseAddress, p.count, &out)
            }
        }
        guard ok == 1 else { throw failure("ChaCha20-Poly1305 seal") }
        return out
    }

    /// DECRYPT(k, n, ad, ciphertext): the plaintext.
    /// - Throws: `NoiseError.macFailure` when the tag does not match (or the
    ///   ciphertext is shorter than a tag).
    static func decrypt(key: [UInt8], nonce n: UInt64, ad: [UInt8], ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        try check(key, keyLength, "ChaChaPoly key")
        guard ciphertext.count >= tagLength else { throw .macFailure }
        var out = [UInt8](repeating: 0, count: ciphertext.count - tagLength)
        let result = ad.withUnsafeBufferPointer { a in
            ciphertext.withUnsafeBufferPointer { c in
                out.withUnsafeMutableBufferPointer { o in
                    attled_chacha20_poly1305_open(key, nonce(n), a.baseAddress, a.count, c.baseAddress, c.count, o.baseAddress)
                }
            }
        }
        if result == -1 { throw .macFailure }
        guard result == 1 else { throw failure("ChaCha20-Poly1305 open") }
        return out
    }

    /// HASH(data): SHA-256.
    static func hash(_ data: [UInt8]) throws(NoiseError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: hashLength)
        let ok = data.withUnsafeBufferPointer { d in attled_sha256(d.baseAddress, d.count, &out) }
        guard ok != 0 else { throw failure("SHA-256") }
        return out
    }

    /// HMAC-HASH(key, data) (Noise 4.3): HMAC-SHA-256.
    static func hmac(key: [UInt8], _ data: [UInt8]) throws(NoiseError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: hashLength)
        let ok = key.withUnsafeBufferPointer { k in
            data.withUnsafeBufferPointer { d in attled_hmac_sha256(k.baseAddress, k.count, d.baseAddress, d.count, &out) }
        }
        guard ok != 0 else { throw failure("HMAC-SHA-256") }
        return out
    }

    /// HKDF(chaining_key, input_key_material, num_outputs) (Noise 4.3): two
    /// or three 32-byte outputs.
    static func hkdf(chainingKey: [UInt8], _ ikm: [UInt8], outputs: Int) throws(NoiseError) -> [[UInt8]] {
        let tempKey = try hmac(key: chainingKey, ikm)
        var out: [[UInt8]] = []
        var previous: [UInt8] = []
        for i in 1...max(2, min(outputs, 3)) {
            previous = try hmac(key: tempKey, previous + [UInt8(i)])
            out.append(previous)
        }
        return out
    }
}
