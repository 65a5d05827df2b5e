// libcrypto (OpenSSL 3, Debian's libssl-dev) for the Security Manager: AES-128,
// AES-CMAC and P-256. Every algorithm is OpenSSL's; the functions below only
// glue its EVP calls into shapes Swift can call (no variadic functions, no
// OSSL_PARAM arrays on the Swift side). They return 1 on success, 0 when
// OpenSSL failed, and attled_p256_derive returns -1 for a peer key that is
// not a point on P-256. Byte strings are big-endian, as OpenSSL and the
// specification's notation have them; BLESMP turns them into SMP's
// little-endian order.
#ifndef ATTLED_COPENSSL_SHIM_H
#define ATTLED_COPENSSL_SHIM_H

#include <stddef.h>
#include <string.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <openssl/rand.h>

/// AES-128 of one 16-byte block (ECB, no padding): the e function's cipher.
static inline int attled_aes128_encrypt(const unsigned char *key, const unsigned char *in, unsigned char *out) {
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (ctx == NULL) return 0;
    int n = 0, m = 0;
    int ok = EVP_EncryptInit_ex(ctx, EVP_aes_128_ecb(), NULL, key, NULL) == 1
        && EVP_CIPHER_CTX_set_padding(ctx, 0) == 1
        && EVP_EncryptUpdate(ctx, out, &n, in, 16) == 1
        && EVP_EncryptFinal_ex(ctx, out + n, &m) == 1
        && n + m == 16;
    EVP_CIPHER_CTX_free(ctx);
    return ok;
}

/// AES-CMAC with a 128-bit key (RFC 4493) through EVP_MAC "CMAC".
static inline int attled_aes_cmac(const unsigned char *key, const unsigned char *msg, size_t len, unsigned char *out) {
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "CMAC", NULL);
    if (mac == NULL) return 0;
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(mac);
    char cipher[] = "AES-128-CBC";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_CIPHER, cipher, 0),
        OSSL_PARAM_construct_end(),
    };
    size_t outl = 0;
    int ok = ctx != NULL
        && EVP_MAC_init(ctx, key, 16, params) == 1
        && (len == 0 || EVP_MAC_update(ctx, msg, len) == 1)
        && EVP_MAC_final(ctx, out, &outl, 16) == 1
        && outl == 16;
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
    return ok;
}

/// Cryptographically strong random bytes.
static inline int attled_random(unsigned char *out, int count) {
    return RAND_bytes(out, count) == 1;
}

/// An EVP_PKEY for P-256 from its public point (65 bytes, 04 || X || Y) and,
/// when priv is not NULL, its private scalar (32 bytes).
static inline EVP_PKEY *attled_p256_from(const unsigned char *pub65, const unsigned char *priv) {
    EVP_PKEY *key = NULL;
    BIGNUM *d = NULL;
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *ctx = NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    if (bld == NULL) return NULL;
    int ok = OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) == 1
        && OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pub65, 65) == 1;
    if (ok && priv != NULL) {
        d = BN_bin2bn(priv, 32, NULL);
        ok = d != NULL && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PRIV_KEY, d) == 1;
    }
    if (ok) params = OSSL_PARAM_BLD_to_param(bld);
    if (params != NULL) ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (ctx != NULL && EVP_PKEY_fromdata_init(ctx) == 1) {
        if (EVP_PKEY_fromdata(ctx, &key, priv != NULL ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY, params) != 1) key = NULL;
    }
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    BN_clear_free(d);
    OSSL_PARAM_BLD_free(bld);
    return key;
}

/// 1 when the 65-byte uncompressed encoding is a point on P-256 (not the
/// point at infinity, coordinates below the field prime); 0 otherwise.
static inline int attled_p256_is_valid_point(const unsigned char *pub65) {
    EC_GROUP *g = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    if (g == NULL) return 0;
    EC_POINT *pt = EC_POINT_new(g);
    int ok = pt != NULL
        && pub65[0] == 0x04
        && EC_POINT_oct2point(g, pt, pub65, 65, NULL) == 1
        && EC_POINT_is_at_infinity(g, pt) == 0
        && EC_POINT_is_on_curve(g, pt, NULL) == 1;
    EC_POINT_free(pt);
    EC_GROUP_free(g);
    return ok;
}

/// A fresh P-256 key pair (OpenSSL's generator), or when priv is not NULL the
/// pair of that 32-byte private scalar (1 <= d < n), its public point computed
/// by OpenSSL. NULL on failure.
static inline EVP_PKEY *attled_p256_new(const unsigned char *priv) {
    if (priv == NULL) return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    EVP_PKEY *key = NULL;
    EC_GROUP *g = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    BIGNUM *d = BN_bin2bn(priv, 32, NULL);
    EC_POINT *pub = g != NULL ? EC_POINT_new(g) : NULL;
    unsigned char pub65[65];
    if (g != NULL && d != NULL && pub != NULL && !BN_is_zero(d)
        && BN_cmp(d, EC_GROUP_get0_order(g)) < 0
        && EC_POINT_mul(g, pub, d, NULL, NULL, NULL) == 1
        && EC_POINT_point2oct(g, pub, POINT_CONVERSION_UNCOMPRESSED, pub65, 65, NULL) == 65) {
        key = attled_p256_from(pub65, priv);
    }
    EC_POINT_free(pub);
    BN_clear_free(d);
    EC_GROUP_free(g);
    return key;
}

/// The public point of a key: X and Y, 32 bytes each.
static inline int attled_p256_public(const EVP_PKEY *key, unsigned char *x, unsigned char *y) {
    BIGNUM *bx = NULL, *by = NULL;
    int ok = EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, &bx) == 1
        && EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, &by) == 1
        && BN_bn2binpad(bx, x, 32) == 32
        && BN_bn2binpad(by, y, 32) == 32;
    BN_free(bx);
    BN_free(by);
    return ok;
}

/// ECDH on P-256: the X coordinate of our private scalar times the peer's
/// point (65 bytes, 04 || X || Y). -1 when the peer's point is not on the
/// curve; 0 when OpenSSL failed; 1 with the 32-byte secret in out.
static inline int attled_p256_derive(EVP_PKEY *ours, const unsigned char *peer65, unsigned char *out) {
    if (!attled_p256_is_valid_point(peer65)) return -1;
    EVP_PKEY *peer = attled_p256_from(peer65, NULL);
    if (peer == NULL) return -1;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, ours, NULL);
    size_t len = 32;
    int ok = ctx != NULL
        && EVP_PKEY_derive_init(ctx) == 1
        && EVP_PKEY_derive_set_peer_ex(ctx, peer, 1) == 1
        && EVP_PKEY_derive(ctx, out, &len) == 1
        && len == 32;
    EVP_PKEY_CTX_free(ctx);
    EVP_PKEY_free(peer);
    return ok;
}

static inline void attled_p256_free(EVP_PKEY *key) { EVP_PKEY_free(key); }

#endif
