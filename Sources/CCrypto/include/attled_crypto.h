// The Security Manager's crypto (AES-128, AES-CMAC, P-256, random bytes) and
// the Noise protocol's for the ESPHome API (X25519, ChaCha20-Poly1305,
// SHA-256, HMAC-SHA-256), every algorithm OpenSSL 3's libcrypto (Debian's
// libssl-dev at build time).
//
// The functions below only glue libcrypto's EVP calls into shapes Swift can
// call (no variadic functions, no OSSL_PARAM arrays on the Swift side). They
// return 1 on success and 0 when OpenSSL failed or libcrypto could not be
// loaded (attled_crypto_error() then says why); attled_p256_derive returns -1
// for a peer key that is not a point on P-256. Byte strings are big-endian,
// as OpenSSL and the specification's notation have them; BLESMP turns them
// into SMP's little-endian order.
//
// libcrypto.so.3 is opened with dlopen on first use, so a run that never
// pairs, encrypts or resolves an address (a one-shot `--rgb` to a device
// without a bond) does not map it. The fully static build (ATTLED_FULLY_STATIC=1)
// links libcrypto.a instead (ATTLED_CRYPTO_LINKED).
#ifndef ATTLED_CRYPTO_H
#define ATTLED_CRYPTO_H

#include <stddef.h>

/// A P-256 key pair or public key (an EVP_PKEY inside).
typedef struct attled_p256_key attled_p256_key;

/// Loads libcrypto (once; thread-safe). 0, or -1 with the reason in
/// attled_crypto_error().
int attled_crypto_open(void);

/// Why attled_crypto_open failed (dlopen's or dlsym's message), else NULL.
const char *attled_crypto_error(void);

/// AES-128 of one 16-byte block (ECB, no padding): the e function's cipher.
int attled_aes128_encrypt(const unsigned char *key, const unsigned char *in, unsigned char *out);

/// AES-CMAC with a 128-bit key (RFC 4493) through EVP_MAC "CMAC".
int attled_aes_cmac(const unsigned char *key, const unsigned char *msg, size_t len, unsigned char *out);

/// Cryptographically strong random bytes.
int attled_random(unsigned char *out, int count);

/// 1 when the 65-byte uncompressed encoding (04 || X || Y) is a point on P-256
/// (not the point at infinity, coordinates below the field prime); 0 otherwise.
int attled_p256_is_valid_point(const unsigned char *pub65);

/// A fresh P-256 key pair (OpenSSL's generator), or when priv is not NULL the
/// pair of that 32-byte private scalar (1 <= d < n), its public point computed
/// by OpenSSL. NULL on failure.
attled_p256_key *attled_p256_new(const unsigned char *priv);

/// The public point of a key: X and Y, 32 bytes each.
int attled_p256_public(const attled_p256_key *key, unsigned char *x, unsigned char *y);

/// ECDH on P-256: the X coordinate of our private scalar times the peer's
/// point (65 bytes, 04 || X || Y). -1 when the peer's point is not on the
/// curve; 0 when OpenSSL failed; 1 with the 32-byte secret in out.
int attled_p256_derive(attled_p256_key *ours, const unsigned char *peer65, unsigned char *out);

void attled_p256_free(attled_p256_key *key);

// The Noise protocol's primitives (Noise_NNpsk0_25519_ChaChaPoly_SHA256, the
// ESPHome native API's encryption). Byte strings are as RFC 7748 and RFC 8439
// write them: X25519 keys little-endian as on the wire, nonces and tags as sent.

/// The X25519 public key (32 bytes) of a 32-byte private key (any 32 bytes;
/// OpenSSL clamps them, RFC 7748 section 5).
int attled_x25519_public(const unsigned char *priv, unsigned char *pub);

/// X25519 (RFC 7748 section 6.1): the 32-byte shared secret of our private key
/// and the peer's public key. 0 also when the result would be all zeros (a
/// low-order peer key, which OpenSSL refuses).
int attled_x25519(const unsigned char *priv, const unsigned char *peer, unsigned char *out);

/// ChaCha20-Poly1305 (RFC 8439) with a 32-byte key and a 12-byte nonce: out
/// receives the len bytes of ciphertext and then the 16-byte tag (len + 16).
int attled_chacha20_poly1305_seal(const unsigned char *key, const unsigned char *nonce,
                                  const unsigned char *ad, size_t adlen,
                                  const unsigned char *in, size_t len, unsigned char *out);

/// Opens what attled_chacha20_poly1305_seal sealed: in is ciphertext then tag
/// (len >= 16), out receives len - 16 bytes of plaintext. 1 when the tag
/// matched; -1 when it did not (out is then zeroed); 0 when OpenSSL failed.
int attled_chacha20_poly1305_open(const unsigned char *key, const unsigned char *nonce,
                                  const unsigned char *ad, size_t adlen,
                                  const unsigned char *in, size_t len, unsigned char *out);

/// SHA-256 (FIPS 180-4) of msg: 32 bytes in out.
int attled_sha256(const unsigned char *msg, size_t len, unsigned char *out);

/// HMAC-SHA-256 (RFC 2104) through EVP_MAC "HMAC": 32 bytes in out.
int attled_hmac_sha256(const unsigned char *key, size_t keylen, const unsigned char *msg, size_t len, unsigned char *out);

#endif
