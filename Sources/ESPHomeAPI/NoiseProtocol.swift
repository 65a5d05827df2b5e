/// A Noise CipherState (The Noise Protocol Framework, revision 34, 5.1): a
/// key and a nonce counter. After the handshake one encrypts what we send,
/// the other decrypts what we receive. The key stays inside; nothing prints it.
public struct NoiseCipherState: Sendable {
    /// 32 bytes, or nil before a key was mixed in (then nothing is encrypted).
    var key: [UInt8]?
    /// The next nonce.
    public private(set) var nonce: UInt64 = 0

    init(key: [UInt8]?) { self.key = key }

    public var hasKey: Bool { key != nil }

    /// EncryptWithAd: the ciphertext and tag, or `plaintext` as it is without a key.
    /// - Throws: `NoiseError.nonceExhausted` at nonce 2^64 - 1 (reserved);
    ///   `NoiseError` from OpenSSL.
    public mutating func encrypt(ad: [UInt8] = [], _ plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let key else { return plaintext }
        guard nonce != .max else { throw .nonceExhausted }
        let out = try NoiseCrypto.encrypt(key: key, nonce: nonce, ad: ad, plaintext: plaintext)
        nonce += 1
        return out
    }

    /// DecryptWithAd: the plaintext. A failed check leaves the nonce as it was (5.1).
    /// - Throws: `NoiseError.macFailure` when the tag does not match;
    ///   `NoiseError.nonceExhausted` at nonce 2^64 - 1.
    public mutating func decrypt(ad: [UInt8] = [], _ ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let key else { return ciphertext }
        guard nonce != .max else { throw .nonceExhausted }
        let out = try NoiseCrypto.decrypt(key: key, nonce: nonce, ad: ad, ciphertext: ciphertext)
        nonce += 1
        return out
    }
}

/// A Noise SymmetricState (5.2): the chaining key, the handshake hash and
/// the cipher state of the handshake.
struct NoiseSymmetricState {
    private(set) var cipher = NoiseCipherState(key: nil)
    private(set) var chainingKey: [UInt8]
    private(set) var handshakeHash: [UInt8]

    /// InitializeSymmetric(protocol_name): h is the name padded to 32 bytes,
    /// or its hash when longer (as "Noise_NNpsk0_25519_ChaChaPoly_SHA256" is).
    init(protocolName: String) throws(NoiseError) {
        let name = Array(protocolName.utf8)
        handshakeHash = name.count <= NoiseCrypto.hashLength
            ? name + [UInt8](repeating: 0, count: NoiseCrypto.hashLength - name.count)
            : try NoiseCrypto.hash(name)
        chainingKey = handshakeHash
    }

    /// MixKey: a DH output or public key into the chaining key; a new cipher key.
    mutating func mixKey(_ ikm: [UInt8]) throws(NoiseError) {
        let out = try NoiseCrypto.hkdf(chainingKey: chainingKey, ikm, outputs: 2)
        chainingKey = out[0]
        cipher = NoiseCipherState(key: out[1])
    }

    /// MixHash: h = HASH(h || data).
    mutating func mixHash(_ data: [UInt8]) throws(NoiseError) {
        handshakeHash = try NoiseCrypto.hash(handshakeHash + data)
    }

    /// MixKeyAndHash: the pre-shared key into both the chaining key and the hash.
    mutating func mixKeyAndHash(_ ikm: [UInt8]) throws(NoiseError) {
        let out = try NoiseCrypto.hkdf(chainingKey: chainingKey, ikm, outputs: 3)
        chainingKey = out[0]
        try mixHash(out[1])
        cipher = NoiseCipherState(key: out[2])
    }

    /// EncryptAndHash: encrypt with h as associated data, then hash the ciphertext in.
    mutating func encryptAndHash(_ plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        let ciphertext = try cipher.encrypt(ad: handshakeHash, plaintext)
        try mixHash(ciphertext)
        return ciphertext
    }

    /// DecryptAndHash: decrypt with h as associated data, then hash the ciphertext in.
    mutating func decryptAndHash(_ ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        let plaintext = try cipher.decrypt(ad: handshakeHash, ciphertext)
        try mixHash(ciphertext)
        return plaintext
    }

    /// Split: the two transport cipher states, the initiator's sending one first.
    func split() throws(NoiseError) -> (initiatorToResponder: NoiseCipherState, responderToInitiator: NoiseCipherState) {
        let out = try NoiseCrypto.hkdf(chainingKey: chainingKey, [], outputs: 2)
        return (NoiseCipherState(key: out[0]), NoiseCipherState(key: out[1]))
    }
}

/// The responder's side of Noise_NNpsk0_25519_ChaChaPoly_SHA256 (a
/// HandshakeState, 5.3, for the one pattern ESPHome uses, 9.3):
///
///     NNpsk0:
///       -> psk, e
///       <- e, ee
///
/// No static keys; both sides prove the pre-shared key by the tag on each
/// message's (empty) payload. With a PSK every `e` token also runs MixKey(e).
struct NoiseNNpsk0Responder {
    static let protocolName = "Noise_NNpsk0_25519_ChaChaPoly_SHA256"

    private var symmetric: NoiseSymmetricState
    private let psk: [UInt8]
    private let ephemeralPrivateKey: [UInt8]
    private var remoteEphemeral: [UInt8] = []

    /// Initialize(): the protocol name, then MixHash(prologue). NN has no pre-messages.
    init(prologue: [UInt8], psk: [UInt8], ephemeralPrivateKey: [UInt8]) throws(NoiseError) {
        try NoiseCrypto.check(psk, 32, "pre-shared key")
        try NoiseCrypto.check(ephemeralPrivateKey, NoiseCrypto.dhLength, "ephemeral private key")
        symmetric = try NoiseSymmetricState(protocolName: Self.protocolName)
        self.psk = psk
        self.ephemeralPrivateKey = ephemeralPrivateKey
        try symmetric.mixHash(prologue)
    }

    /// The handshake hash so far (h): both sides hold the same one at the end.
    var handshakeHash: [UInt8] { symmetric.handshakeHash }

    /// ReadMessage of `-> psk, e`: returns the initiator's payload.
    /// - Throws: `NoiseError.invalidLength` when the message is shorter than
    ///   a public key and a tag; `NoiseError.macFailure` when its tag does not
    ///   match (the initiator's PSK is not ours).
    mutating func readFirstMessage(_ message: [UInt8]) throws(NoiseError) -> [UInt8] {
        let minimum = NoiseCrypto.dhLength + NoiseCrypto.tagLength
        guard message.count >= minimum else { throw .invalidLength(field: "handshake message", expected: minimum, actual: message.count) }
        try symmetric.mixKeyAndHash(psk)                         // psk
        remoteEphemeral = Array(message[0..<NoiseCrypto.dhLength])  // e
        try symmetric.mixHash(remoteEphemeral)
        try symmetric.mixKey(remoteEphemeral)
        return try symmetric.decryptAndHash(Array(message[NoiseCrypto.dhLength...]))
    }

    /// WriteMessage of `<- e, ee` with `payload`, then Split: the message and
    /// the transport cipher states, ours (the responder's) to send first.
    mutating func writeSecondMessage(payload: [UInt8] = []) throws(NoiseError)
        -> (message: [UInt8], send: NoiseCipherState, receive: NoiseCipherState) {
        let ephemeralPublic = try NoiseCrypto.x25519Public(ephemeralPrivateKey)  // e
        try symmetric.mixHash(ephemeralPublic)
        try symmetric.mixKey(ephemeralPublic)
        try symmetric.mixKey(try NoiseCrypto.x25519(ephemeralPrivateKey, remoteEphemeral))  // ee
        let ciphertext = try symmetric.encryptAndHash(payload)
        let (toResponder, toInitiator) = try symmetric.split()
        return (ephemeralPublic + ciphertext, toInitiator, toResponder)
    }
}
