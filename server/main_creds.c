/* SPDX-License-Identifier: Apache-2.0
 * main_creds: see main_creds.h. Tokens are drawn from RAND_bytes by rejection
 * sampling, so every character of the alphabet is equally likely.
 * Thread: the main thread. */
#include "main_creds.h"

#include <errno.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "meta_record.h"
#include "srv_log.h"
#include "tenants.h"

#define ADMIN_TOKEN_KEY "admin.token_sha256"
#define TOKEN_ALPHABET "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
#define BOOT_TENANT 1
#define BOOT_USER 1

static int token_new(char *out, size_t len)
{
    const size_t alen = sizeof(TOKEN_ALPHABET) - 1;
    if (len < CREDS_TOKEN_LEN + 1)
        return -EINVAL;
    size_t i = 0;
    while (i < CREDS_TOKEN_LEN) {
        unsigned char b[64];
        if (RAND_bytes(b, sizeof(b)) != 1)
            return -EIO;
        for (size_t j = 0; j < sizeof(b) && i < CREDS_TOKEN_LEN; j++)
            if (b[j] < 256 - 256 % alen)
                out[i++] = TOKEN_ALPHABET[b[j] % alen];
    }
    out[CREDS_TOKEN_LEN] = '\0';
    return 0;
}

static int hash_put(struct core *c, const char *token, uint8_t hash[32])
{
    SHA256((const unsigned char *)token, strlen(token), hash);
    return meta_record_put(core_meta(c), META_REC_CONFIG, ADMIN_TOKEN_KEY, strlen(ADMIN_TOKEN_KEY),
                           hash, 32, 0);
}

int creds_admin_token_setup(struct core *c, uint8_t hash[32], char *generated, size_t genlen)
{
    int rc;
    const char *env = getenv("S3NFS_ADMIN_TOKEN");
    generated[0] = '\0';
    if (env && *env) {
        if (strlen(env) < 16)
            srv_log(WARN, SRV, "S3NFS_ADMIN_TOKEN is shorter than 16 characters: easy to guess");
        return hash_put(c, env, hash);
    }
    void *val = NULL;
    size_t vlen = 0;
    rc = meta_record_get(core_meta(c), META_REC_CONFIG, ADMIN_TOKEN_KEY, strlen(ADMIN_TOKEN_KEY),
                         &val, &vlen);
    if (rc == 0 && vlen == 32) {
        memcpy(hash, val, 32);
        free(val);
        return 0;
    }
    free(val);
    if (rc < 0 && rc != -ENOENT)
        return rc;
    /* First start without a token: make one; the caller shows it once. */
    if ((rc = token_new(generated, genlen)) < 0)
        return rc;
    return hash_put(c, generated, hash);
}

int creds_admin_token_replace(struct core *c, char *token, size_t len)
{
    uint8_t hash[32];
    int rc = token_new(token, len);
    return rc < 0 ? rc : hash_put(c, token, hash);
}

int creds_bootstrap_key(struct tenants *t, char *akey, char *secret, uint64_t *user)
{
    struct tenant_user u;
    int rc = tenants_user_get(t, BOOT_TENANT, BOOT_USER, &u);
    if (rc == -ENOENT) {
        /* Deleted: make a new admin user (a free name; ids are never reused). */
        struct tenant_user nu;
        memset(&nu, 0, sizeof(nu));
        nu.tenant = BOOT_TENANT;
        nu.tenant_admin = true;
        for (int i = 0; i < 100; i++) {
            if (i == 0)
                snprintf(nu.name, sizeof(nu.name), "admin");
            else
                snprintf(nu.name, sizeof(nu.name), "admin-%d", i + 1);
            rc = tenants_user_create(t, &nu, &u);
            if (rc != -EEXIST)
                break;
        }
        if (rc < 0)
            return rc;
        srv_log(INFO, SRV, "reset-admin: the bootstrap admin was deleted; made user '%s' (%llu)",
                u.name, (unsigned long long)u.id);
    } else if (rc < 0) {
        return rc;
    } else if (u.disabled || !u.tenant_admin) {
        u.disabled = false;
        u.tenant_admin = true;
        if ((rc = tenants_user_update(t, &u)) < 0)
            return rc;
        srv_log(INFO, SRV, "reset-admin: user '%s' enabled again as the tenant's admin", u.name);
    }
    *user = u.id;
    return tenants_key_create(t, BOOT_TENANT, u.id, akey, secret);
}
