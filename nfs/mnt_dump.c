/* SPDX-License-Identifier: Apache-2.0
 * MOUNTPROC3_DUMP (RFC 1813 5.2.2): the recorded mounts (client address,
 * path), newest first, of the exports the caller may use itself: a mount
 * made through an export that does not admit the caller (another tenant's,
 * or one since suspended or deleted) is not listed, so DUMP never shows one
 * tenant's paths and client names to another tenant's clients. The list lives
 * in memory and starts empty after a restart, as the RFC allows ("the list
 * is advisory"). */
#include <stdlib.h>
#include <string.h>

#include "nfs_int.h"

int mnt_dump(struct nfs_req *r, void *args, void *res)
{
    mountlist *o = res;
    mountlist *tail = o;
    struct nfs_server *s = r->srv;

    pthread_mutex_lock(&s->lock);
    for (struct nfs_mount_ent *m = s->mounts; m; m = m->next) {
        struct tenant_export e;
        if (tenants_export_get(s->tenants, m->export_id, (struct sockaddr *)&r->peer, &e) < 0)
            continue;
        struct mountbody *b = calloc(1, sizeof(*b));
        if (!b)
            break;
        b->ml_hostname = strdup(m->host);
        b->ml_directory = strdup(m->path);
        if (!b->ml_hostname || !b->ml_directory) {
            free(b->ml_hostname);
            free(b->ml_directory);
            free(b);
            break;
        }
        *tail = b;
        tail = &b->ml_next;
    }
    pthread_mutex_unlock(&s->lock);
    return NFS_REQ_OK;
}
