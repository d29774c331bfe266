/* SPDX-License-Identifier: Apache-2.0
 * main_creds: the daemon's own credentials: the admin token (only its SHA-256
 * is stored, in META_REC_CONFIG) and the recovery of lost bootstrap credentials
 * (`s3nfsd --reset-admin`): a new admin token and a new access key of the
 * bootstrap tenant's admin user, each shown once.
 * Part of the s3nfsd program (the composition root), not of a library.
 * Thread: the main thread. */
#ifndef MAIN_CREDS_H
#define MAIN_CREDS_H

#include <stddef.h>
#include <stdint.h>

struct core;
struct tenants;

/* Generated admin tokens: 40 characters of [A-Za-z0-9]. */
#define CREDS_TOKEN_LEN 40

/** Set up the admin token at start: S3NFS_ADMIN_TOKEN when set (its hash
 * replaces the stored one), else the stored hash, else a new token (stored).
 * @param[out] hash   SHA-256 of the token in force.
 * @param[out] generated the new token when one was made now (shown once by the
 *                    caller), else "". At least CREDS_TOKEN_LEN + 1 bytes.
 * @return 0, -EINVAL (@p genlen too small), -EIO (no random bytes), or an
 *         error of meta_record_get/put. */
int creds_admin_token_setup(struct core *c, uint8_t hash[32], char *generated, size_t genlen);

/** Make a new admin token and store its hash in place of the old one (the
 * old token stops working). @param[out] token CREDS_TOKEN_LEN + 1 bytes.
 * @return 0, -EIO, or an error of meta_record_put. */
int creds_admin_token_replace(struct core *c, char *token, size_t len);

/** Give the bootstrap tenant's admin user (tenant 1, user 1; re-created as
 * "admin" if it was deleted, re-enabled and made tenant admin if it was
 * changed) a new access key. Existing keys are left as they are.
 * @param[out] akey, secret the new pair (TENANT_AKEY_MAX+1 and
 *             TENANT_SECRET_MAX+1 bytes); the secret is not stored in clear.
 * @param[out] user the user's id.
 * @return 0, or an error of tenants_user_* / tenants_key_create. */
int creds_bootstrap_key(struct tenants *t, char *akey, char *secret, uint64_t *user);

#endif
