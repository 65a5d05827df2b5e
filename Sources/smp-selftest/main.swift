// smp-selftest: runs BLESMP's crypto (OpenSSL underneath) on the Core
// specification's sample data (Vol 3 Part H Appendix D, the P-256 debug key
// and the Vol 2 Part G 7.1.2 ECDH data) and a fresh ECDH. Exits 0 when every
// value matches. It exists so a build, in particular the fully static one
// (-static-executable, libcrypto.a), can prove that OpenSSL links and works.
import BLESMP
import BLEWire
#if canImport(Glibc)
import Glibc
#endif

/// Most significant octet first, as the specification prints: reversed into SMP order.
func spec(_ s: String) -> [UInt8] { Array((Hex.parse(s) ?? []).reversed()) }

/// Runs one check, prints its line; false when it failed or threw.
func check(_ name: String, _ body: () throws -> Bool) -> Bool {
    let ok = (try? body()) ?? false
    print("\(ok ? "ok  " : "FAIL") \(name)")
    return ok
}

let debugPrivate = spec("3f49f6d4 a3c55f38 74c9b3e3 d2103f50 4aff607b eb40b799 5899b8a6 cd3c1abd")
let debugPublic = spec("20b003d2 f297be2c 5e2c83a7 e9f9a5b9 eff49111 acf4fddb cc030148 0e359de6")
    + spec("dc809c49 652aeb6d 63329abf 5a52155c 766345c2 8fed3024 741c8ed0 1589d28b")
let peerPublic = spec("1ea1f0f0 1faf1d96 09592284 f19e4c00 47b58afd 8615a69f 559077b2 2faaa190")
    + spec("4c55f33e 429dad37 7356703a 9ab85160 472d1130 e28e3676 5f89aff9 15b1214a")
let dhKey = spec("ec0234a3 57c8ad05 341010a6 0a397d9b 99796b13 b4f866f1 868d34f3 73bfa698")
let n1 = spec("d5cb8454 d177733e ffffb2ec 712baeab"), n2 = spec("a6e8e7cc 25a75f6e 216583f7 ff3dc4cf")
var results: [Bool] = []
let a1 = DeviceAddress(BDAddress(wire: spec("56123737bfce")), .public)
let a2 = DeviceAddress(BDAddress(wire: spec("a713702dcfc1")), .public)

results.append(check("P-256 debug key pair and DHKey") {
    let k = try P256KeyPair(privateKey: debugPrivate)
    let shared = try k.dhKey(peerPublicKey: peerPublic)
    return k.publicKey == debugPublic && shared == dhKey
})
results.append(check("P-256 fresh ECDH agrees") {
    let a = try P256KeyPair(), b = try P256KeyPair()
    let ab = try a.dhKey(peerPublicKey: b.publicKey), ba = try b.dhKey(peerPublicKey: a.publicKey)
    return ab == ba
})
results.append(check("f4") { try SMPCrypto.f4(u: Array(debugPublic.prefix(32)), v: spec("55188b3d 32f6bb9a 900afcfb eed4e72a 59cb9ac2 f19d7cfb 6b4fdd49 f47fc5fd"), x: n1, z: 0) == spec("f2c916f1 07a9bd1c f1eda1be a974872d") })
results.append(check("f5") {
    let k = try SMPCrypto.f5(w: dhKey, n1: n1, n2: n2, a1: a1, a2: a2)
    return k.macKey == spec("2965f176 a1084a02 fd3f6a20 ce636e20") && k.ltk == spec("69867911 69d7cd23 980522b5 94750a38")
})
results.append(check("s1") { try SMPCrypto.s1(k: [UInt8](repeating: 0, count: 16), r1: spec("000F0E0D0C0B0A091122334455667788"), r2: spec("010203040506070899AABBCCDDEEFF00")) == spec("9a1fe1f0e8b0f49b5b4216ae796da062") })
results.append(check("ah") { try SMPCrypto.ah(irk: spec("ec0234a3 57c8ad05 341010a6 0a397d9b"), prand: spec("708194")) == spec("0dfbaa") })

let failures = results.filter { !$0 }.count
print(failures == 0 ? "smp-selftest: all checks passed" : "smp-selftest: \(failures) check(s) failed")
exit(failures == 0 ? 0 : 1)
