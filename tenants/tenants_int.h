/* SPDX-License-Identifier: Apache-2.0
 * tenants_int: helpers shared inside tenants/ (secret sealing, random bytes,
 * the /metrics publisher).
 * Not for other modules. Thread: any. */
#ifndef TENANTS_INT_H
#define TENANTS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TENANTS_MKEY_LEN 32

/** Fill @p buf with @p n bytes from the OpenSSL CSPRNG. @return 0, -EIO. */
int tenants__random(void *buf, size_t n);
/** Random string of @p n characters from @p alphabet (NUL-terminated into out[n]). */
int tenants__random_string(char *out, size_t n, const char *alphabet);

/** Encrypt @p plain with AES-256-GCM under @p key, binding @p aad (the access key
 * id), into lowercase hex "nonce(12) | ciphertext | tag(16)".
 * @return 0, -ENAMETOOLONG (@p hexlen too small), -EIO (crypto failure). */
int tenants__seal(const uint8_t key[TENANTS_MKEY_LEN], const char *aad, const char *plain,
                  char *hex, size_t hexlen);
/** Decrypt what tenants__seal produced. @return 0, SRV_ECORRUPT (bad hex, wrong key or
 * tampered record), -ENAMETOOLONG (@p plainlen too small). */
int tenants__unseal(const uint8_t key[TENANTS_MKEY_LEN], const char *aad, const char *hex,
                    char *plain, size_t plainlen);

/** SHA-256 of @p len bytes into @p out. */
void tenants__sha256(const void *data, size_t len, uint8_t out[32]);

struct tenants;
struct core;
/** The core @p t keeps its records in. */
struct core *tenants__core(struct tenants *t);
/** Publish on /metrics (srv_metrics): the bucket namer (names the per-bucket
 * operation series) and the per-bucket usage and quota gauges
 * (tenants_metrics.c). Called by tenants_open / tenants_close. */
void tenants__metrics_start(struct tenants *t);
void tenants__metrics_stop(struct tenants *t);

/* ---- remotes (tenants_remote.c) ---- */
struct meta_env;
/** The master key sealing secrets, and the store (tenants.c). */
const uint8_t *tenants__mkey(struct tenants *t);
struct meta_env *tenants__meta(struct tenants *t);
/** Where tenants_remote.c keeps its state in @p t (NULL until tenants__remotes_open). */
void **tenants__remotes_slot(struct tenants *t);
/** Load the remotes' records (secrets stay sealed until needed). Called by tenants_open
 * after the master key is loaded. @return 0, -ENOMEM, -EIO. */
int tenants__remotes_open(struct tenants *t);
void tenants__remotes_close(struct tenants *t);
/** Delete every remote of tenant @p tenant (the tenant is being deleted). */
void tenants__remotes_drop_tenant(struct tenants *t, uint32_t tenant);
/** Does the store hold a remote (a sealed secret)? */
bool tenants__remotes_stored(struct meta_env *m);

#endif
