// See include/attled_crypto.h. libcrypto's functions are reached through one
// table of pointers, filled by dlsym from libcrypto.so.3 on first use (or, in
// the fully static build, with the linked functions' addresses). The table
// keeps OpenSSL's names as its fields, so the code reads as plain OpenSSL and
// the executable defines none of OpenSSL's symbols itself (libssl, loaded by
// the gateway's libmosquitto, binds to the real ones).
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#ifndef ATTLED_CRYPTO_LINKED
#include <dlfcn.h>
#endif
#include "attled_crypto.h"

#define LIBCRYPTO_FUNCTIONS(X)                                                          \
    X(EVP_CIPHER_CTX_new) X(EVP_CIPHER_CTX_free) X(EVP_CIPHER_CTX_set_padding)          \
    X(EVP_EncryptInit_ex) X(EVP_EncryptUpdate) X(EVP_EncryptFinal_ex) X(EVP_aes_128_ecb) \
    X(EVP_MAC_fetch) X(EVP_MAC_free) X(EVP_MAC_CTX_new) X(EVP_MAC_CTX_free)              \
    X(EVP_MAC_init) X(EVP_MAC_update) X(EVP_MAC_final)                                  \
    X(OSSL_PARAM_construct_utf8_string) X(OSSL_PARAM_construct_end) X(OSSL_PARAM_free)  \
    X(OSSL_PARAM_BLD_new) X(OSSL_PARAM_BLD_free) X(OSSL_PARAM_BLD_push_utf8_string)     \
    X(OSSL_PARAM_BLD_push_octet_string) X(OSSL_PARAM_BLD_push_BN) X(OSSL_PARAM_BLD_to_param) \
    X(RAND_bytes)                                                                       \
    X(BN_bin2bn) X(BN_bn2binpad) X(BN_is_zero) X(BN_cmp) X(BN_free) X(BN_clear_free)    \
    X(EC_GROUP_new_by_curve_name) X(EC_GROUP_free) X(EC_GROUP_get0_order)               \
    X(EC_POINT_new) X(EC_POINT_free) X(EC_POINT_oct2point) X(EC_POINT_point2oct)        \
    X(EC_POINT_is_at_infinity) X(EC_POINT_is_on_curve) X(EC_POINT_mul)                  \
    X(EVP_PKEY_Q_keygen) X(EVP_PKEY_free) X(EVP_PKEY_get_bn_param)                      \
    X(EVP_PKEY_CTX_new_from_name) X(EVP_PKEY_CTX_new_from_pkey) X(EVP_PKEY_CTX_free)    \
    X(EVP_PKEY_fromdata_init) X(EVP_PKEY_fromdata)                                      \
    X(EVP_PKEY_derive_init) X(EVP_PKEY_derive_set_peer_ex) X(EVP_PKEY_derive)           \
    X(EVP_PKEY_new_raw_private_key) X(EVP_PKEY_new_raw_public_key)                      \
    X(EVP_PKEY_get_raw_public_key)                                                      \
    X(EVP_DecryptInit_ex) X(EVP_DecryptUpdate) X(EVP_DecryptFinal_ex)                   \
    X(EVP_CIPHER_CTX_ctrl) X(EVP_chacha20_poly1305) X(EVP_Digest) X(EVP_sha256)

static struct {
#define FIELD(name) __typeof__(&name) name;
    LIBCRYPTO_FUNCTIONS(FIELD)
#undef FIELD
} lib;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;
static char load_error[256];

static void load(void) {
#ifdef ATTLED_CRYPTO_LINKED
#define LINK(name) lib.name = &name;
    LIBCRYPTO_FUNCTIONS(LINK)
#undef LINK
    loaded = 1;
#else
    void *handle = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error, "%s", why ? why : "dlopen(libcrypto.so.3) failed");
        return;
    }
#define LOOKUP(name)                                                                    \
    if ((lib.name = (__typeof__(lib.name))dlsym(handle, #name)) == NULL) {              \
        snprintf(load_error, sizeof load_error, "libcrypto.so.3 has no %s (OpenSSL 3 is needed)", #name); \
        return;                                                                         \
    }
    LIBCRYPTO_FUNCTIONS(LOOKUP)
#undef LOOKUP
    loaded = 1;
#endif
}

int attled_crypto_open(void) {
    pthread_once(&once, load);
    return loaded ? 0 : -1;
}

const char *attled_crypto_error(void) {
    attled_crypto_open();
    return loaded ? NULL : load_error;
}

#define REQUIRE_LIBCRYPTO(failure) if (attled_crypto_open() != 0) return failure

int attled_aes128_encrypt(const unsigned char *key, const unsigned char *in, unsigned char *out) {
    REQUIRE_LIBCRYPTO(0);
    EVP_CIPHER_CTX *ctx = lib.EVP_CIPHER_CTX_new();
    if (ctx == NULL) return 0;
    int n = 0, m = 0;
    int ok = lib.EVP_EncryptInit_ex(ctx, lib.EVP_aes_128_ecb(), NULL, key, NULL) == 1
        && lib.EVP_CIPHER_CTX_set_padding(ctx, 0) == 1
        && lib.EVP_EncryptUpdate(ctx, out, &n, in, 16) == 1
        && lib.EVP_EncryptFinal_ex(ctx, out + n, &m) == 1
        && n + m == 16;
    lib.EVP_CIPHER_CTX_free(ctx);
    return ok;
}

int attled_aes_cmac(const unsigned char *key, const unsigned char *msg, size_t len, unsigned char *out) {
    REQUIRE_LIBCRYPTO(0);
    EVP_MAC *mac = lib.EVP_MAC_fetch(NULL, "CMAC", NULL);
    if (mac == NULL) return 0;
    EVP_MAC_CTX *ctx = lib.EVP_MAC_CTX_new(mac);
    char cipher[] = "AES-128-CBC";
    OSSL_PARAM params[] = {
        lib.OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_CIPHER, cipher, 0),
        lib.OSSL_PARAM_construct_end(),
    };
    size_t outl = 0;
    int ok = ctx != NULL
        && lib.EVP_MAC_init(ctx, key, 16, params) == 1
        && (len == 0 || lib.EVP_MAC_update(ctx, msg, len) == 1)
        && lib.EVP_MAC_final(ctx, out, &outl, 16) == 1
        && outl == 16;
    lib.EVP_MAC_CTX_free(ctx);
    lib.EVP_MAC_free(mac);
    return ok;
}

int attled_random(unsigned char *out, int count) {
    REQUIRE_LIBCRYPTO(0);
    return lib.RAND_bytes(out, count) == 1;
}

// An EVP_PKEY for P-256 from its public point and, when priv is not NULL, its
// private scalar (32 bytes).
static EVP_PKEY *p256_from(const unsigned char *pub65, const unsigned char *priv) {
    EVP_PKEY *key = NULL;
    BIGNUM *d = NULL;
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *ctx = NULL;
    OSSL_PARAM_BLD *bld = lib.OSSL_PARAM_BLD_new();
    if (bld == NULL) return NULL;
    int ok = lib.OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) == 1
        && lib.OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pub65, 65) == 1;
    if (ok && priv != NULL) {
        d = lib.BN_bin2bn(priv, 32, NULL);
        ok = d != NULL && lib.OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PRIV_KEY, d) == 1;
    }
    if (ok) params = lib.OSSL_PARAM_BLD_to_param(bld);
    if (params != NULL) ctx = lib.EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (ctx != NULL && lib.EVP_PKEY_fromdata_init(ctx) == 1) {
        if (lib.EVP_PKEY_fromdata(ctx, &key, priv != NULL ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY, params) != 1) key = NULL;
    }
    lib.EVP_PKEY_CTX_free(ctx);
    lib.OSSL_PARAM_free(params);
    lib.BN_clear_free(d);
    lib.OSSL_PARAM_BLD_free(bld);
    return key;
}

int attled_p256_is_valid_point(const unsigned char *pub65) {
    REQUIRE_LIBCRYPTO(0);
    EC_GROUP *g = lib.EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    if (g == NULL) return 0;
    EC_POINT *pt = lib.EC_POINT_new(g);
    int ok = pt != NULL
        && pub65[0] == 0x04
        && lib.EC_POINT_oct2point(g, pt, pub65, 65, NULL) == 1
        && lib.EC_POINT_is_at_infinity(g, pt) == 0
        && lib.EC_POINT_is_on_curve(g, pt, NULL) == 1;
    lib.EC_POINT_free(pt);
    lib.EC_GROUP_free(g);
    return ok;
}

attled_p256_key *attled_p256_new(const unsigned char *priv) {
    REQUIRE_LIBCRYPTO(NULL);
    if (priv == NULL) return (attled_p256_key *)lib.EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    EVP_PKEY *key = NULL;
    EC_GROUP *g = lib.EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    BIGNUM *d = lib.BN_bin2bn(priv, 32, NULL);
    EC_POINT *pub = g != NULL ? lib.EC_POINT_new(g) : NULL;
    unsigned char pub65[65];
    if (g != NULL && d != NULL && pub != NULL && !lib.BN_is_zero(d)
        && lib.BN_cmp(d, lib.EC_GROUP_get0_order(g)) < 0
        && lib.EC_POINT_mul(g, pub, d, NULL, NULL, NULL) == 1
        && lib.EC_POINT_point2oct(g, pub, POINT_CONVERSION_UNCOMPRESSED, pub65, 65, NULL) == 65) {
        key = p256_from(pub65, priv);
    }
    lib.EC_POINT_free(pub);
    lib.BN_clear_free(d);
    lib.EC_GROUP_free(g);
    return (attled_p256_key *)key;
}

int attled_p256_public(const attled_p256_key *key, unsigned char *x, unsigned char *y) {
    REQUIRE_LIBCRYPTO(0);
    const EVP_PKEY *k = (const EVP_PKEY *)key;
    BIGNUM *bx = NULL, *by = NULL;
    int ok = lib.EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_EC_PUB_X, &bx) == 1
        && lib.EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_EC_PUB_Y, &by) == 1
        && lib.BN_bn2binpad(bx, x, 32) == 32
        && lib.BN_bn2binpad(by, y, 32) == 32;
    lib.BN_free(bx);
    lib.BN_free(by);
    return ok;
}

int attled_p256_derive(attled_p256_key *ours, const unsigned char *peer65, unsigned char *out) {
    REQUIRE_LIBCRYPTO(0);
    if (!attled_p256_is_valid_point(peer65)) return -1;
    EVP_PKEY *peer = p256_from(peer65, NULL);
    if (peer == NULL) return -1;
    EVP_PKEY_CTX *ctx = lib.EVP_PKEY_CTX_new_from_pkey(NULL, (EVP_PKEY *)ours, NULL);
    size_t len = 32;
    int ok = ctx != NULL
        && lib.EVP_PKEY_derive_init(ctx) == 1
        && lib.EVP_PKEY_derive_set_peer_ex(ctx, peer, 1) == 1
        && lib.EVP_PKEY_derive(ctx, out, &len) == 1
        && len == 32;
    lib.EVP_PKEY_CTX_free(ctx);
    lib.EVP_PKEY_free(peer);
    return ok;
}

void attled_p256_free(attled_p256_key *key) {
    if (key == NULL || attled_crypto_open() != 0) return;
    lib.EVP_PKEY_free((EVP_PKEY *)key);
}

// MARK: The Noise protocol's primitives (the ESPHome API's encryption)

int attled_x25519_public(const unsigned char *priv, unsigned char *pub) {
    REQUIRE_LIBCRYPTO(0);
    EVP_PKEY *key = lib.EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, priv, 32);
    size_t len = 32;
    int ok = key != NULL && lib.EVP_PKEY_get_raw_public_key(key, pub, &len) == 1 && len == 32;
    lib.EVP_PKEY_free(key);
    return ok;
}

int attled_x25519(const unsigned char *priv, const unsigned char *peer, unsigned char *out) {
    REQUIRE_LIBCRYPTO(0);
    EVP_PKEY *ours = lib.EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, priv, 32);
    EVP_PKEY *theirs = lib.EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, peer, 32);
    EVP_PKEY_CTX *ctx = ours != NULL && theirs != NULL ? lib.EVP_PKEY_CTX_new_from_pkey(NULL, ours, NULL) : NULL;
    size_t len = 32;
    int ok = ctx != NULL
        && lib.EVP_PKEY_derive_init(ctx) == 1
        && lib.EVP_PKEY_derive_set_peer_ex(ctx, theirs, 1) == 1
        && lib.EVP_PKEY_derive(ctx, out, &len) == 1
        && len == 32;
    lib.EVP_PKEY_CTX_free(ctx);
    lib.EVP_PKEY_free(theirs);
    lib.EVP_PKEY_free(ours);
    return ok;
}

// EVP wants a non-NULL pointer even for zero bytes; Swift passes NULL for an empty array.
static const unsigned char nothing[1];
#define OR_NOTHING(p) ((p) != NULL ? (p) : nothing)

int attled_chacha20_poly1305_seal(const unsigned char *key, const unsigned char *nonce,
                                  const unsigned char *ad, size_t adlen,
                                  const unsigned char *in, size_t len, unsigned char *out) {
    REQUIRE_LIBCRYPTO(0);
    if (len > INT_MAX || adlen > INT_MAX) return 0;
    EVP_CIPHER_CTX *ctx = lib.EVP_CIPHER_CTX_new();
    if (ctx == NULL) return 0;
    int adn = 0, n = 0, m = 0;
    int ok = lib.EVP_EncryptInit_ex(ctx, lib.EVP_chacha20_poly1305(), NULL, key, nonce) == 1
        && (adlen == 0 || lib.EVP_EncryptUpdate(ctx, NULL, &adn, ad, (int)adlen) == 1)
        && (len == 0 || lib.EVP_EncryptUpdate(ctx, out, &n, in, (int)len) == 1)
        && lib.EVP_EncryptFinal_ex(ctx, out + n, &m) == 1
        && (size_t)(n + m) == len
        && lib.EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, out + len) == 1;
    lib.EVP_CIPHER_CTX_free(ctx);
    return ok;
}

int attled_chacha20_poly1305_open(const unsigned char *key, const unsigned char *nonce,
                                  const unsigned char *ad, size_t adlen,
                                  const unsigned char *in, size_t len, unsigned char *out) {
    REQUIRE_LIBCRYPTO(0);
    if (len < 16 || len > INT_MAX || adlen > INT_MAX) return 0;
    size_t body = len - 16;
    unsigned char spare[1];
    if (out == NULL) out = spare;  // an empty plaintext
    unsigned char tag[16];
    memcpy(tag, in + body, 16);
    EVP_CIPHER_CTX *ctx = lib.EVP_CIPHER_CTX_new();
    if (ctx == NULL) return 0;
    int adn = 0, n = 0, m = 0;
    int ready = lib.EVP_DecryptInit_ex(ctx, lib.EVP_chacha20_poly1305(), NULL, key, nonce) == 1
        && (adlen == 0 || lib.EVP_DecryptUpdate(ctx, NULL, &adn, ad, (int)adlen) == 1)
        && (body == 0 || lib.EVP_DecryptUpdate(ctx, out, &n, in, (int)body) == 1)
        && lib.EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, 16, tag) == 1;
    // The tag is checked in the final call: its failure is the MAC's.
    int result = !ready ? 0 : (lib.EVP_DecryptFinal_ex(ctx, out + n, &m) == 1 && (size_t)(n + m) == body) ? 1 : -1;
    lib.EVP_CIPHER_CTX_free(ctx);
    if (result != 1 && body > 0) memset(out, 0, body);
    return result;
}

int attled_sha256(const unsigned char *msg, size_t len, unsigned char *out) {
    REQUIRE_LIBCRYPTO(0);
    unsigned int outl = 0;
    return lib.EVP_Digest(OR_NOTHING(msg), len, out, &outl, lib.EVP_sha256(), NULL) == 1 && outl == 32;
}

int attled_hmac_sha256(const unsigned char *key, size_t keylen, const unsigned char *msg, size_t len, unsigned char *out) {
    REQUIRE_LIBCRYPTO(0);
    EVP_MAC *mac = lib.EVP_MAC_fetch(NULL, "HMAC", NULL);
    if (mac == NULL) return 0;
    EVP_MAC_CTX *ctx = lib.EVP_MAC_CTX_new(mac);
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {
        lib.OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
        lib.OSSL_PARAM_construct_end(),
    };
    size_t outl = 0;
    int ok = ctx != NULL
        && lib.EVP_MAC_init(ctx, OR_NOTHING(key), keylen, params) == 1
        && (len == 0 || lib.EVP_MAC_update(ctx, msg, len) == 1)
        && lib.EVP_MAC_final(ctx, out, &outl, 32) == 1
        && outl == 32;
    lib.EVP_MAC_CTX_free(ctx);
    lib.EVP_MAC_free(mac);
    return ok;
}
