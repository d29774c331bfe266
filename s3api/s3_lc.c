/* SPDX-License-Identifier: Apache-2.0
 * s3_lc: S3 lifecycle configurations, pure: the parser of the
 * LifecycleConfiguration document (validated as S3 validates it), the
 * writer of its canonical form (what GET answers and what is stored, so the
 * stored blob is always a document this parser accepts), and the rules'
 * matching and timing used by the lifecycle worker (s3_lifecycle.c).
 *
 * A rule: ID (<= 255 bytes, unique), Status, a filter (the legacy <Prefix>
 * of the rule, or <Filter> with one of Prefix, Tag, ObjectSizeGreaterThan,
 * ObjectSizeLessThan, or <And> of several), and at least one action:
 * Expiration (Days, Date or ExpiredObjectDeleteMarker),
 * NoncurrentVersionExpiration (NoncurrentDays, NewerNoncurrentVersions),
 * AbortIncompleteMultipartUpload (DaysAfterInitiation), Transition and
 * NoncurrentVersionTransition (Days or Date, StorageClass; s3__lc_check_tier
 * checks them against the bucket's remote tier: the one storage class its
 * tier policy stands for; NoncurrentVersionTransition is refused there).
 * Thread: reentrant. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "s3_internal.h"
#include "srv_err.h"

#define DAY_S 86400

/* A whole count > 0 (at most @p max). @return it, or -1. */
static int64_t count_of(const struct s3_xnode *n, int64_t max)
{
    char *e = NULL;
    if (!n || !*n->text)
        return -1;
    long long v = strtoll(n->text, &e, 10);
    return *e || v <= 0 || v > max ? -1 : (int64_t)v;
}

/* A size in bytes >= 0. @return it, or -1. */
static int64_t size_of(const struct s3_xnode *n)
{
    char *e = NULL;
    if (!n || !*n->text || n->text[0] == '-')
        return -1;
    long long v = strtoll(n->text, &e, 10);
    return *e || v < 0 ? -1 : (int64_t)v;
}

/* A lifecycle date: ISO 8601, midnight UTC. @return 0, -EINVAL. */
static int date_of(const struct s3_xnode *n, time_t *out)
{
    if (!n || s3__iso_date_parse(n->text, out) || *out % DAY_S)
        return -EINVAL;
    return 0;
}

static int tag_add(struct s3_arena *a, struct s3_lc_rule *r, const struct s3_xnode *t,
                   const char **why)
{
    struct s3_xnode *k = s3__xml_child(t, "Key"), *v = s3__xml_child(t, "Value");
    if (!k || !v || !k->textlen || k->textlen > 128 || v->textlen > 256) {
        *why = "a Tag needs a Key (1..128 bytes) and a Value (up to 256 bytes)";
        return -EINVAL;
    }
    for (size_t i = 0; i < r->ntags; i++)
        if (r->tags[i].klen == k->textlen && memcmp(r->tags[i].key, k->text, k->textlen) == 0) {
            *why = "a filter names a tag key twice";
            return -EINVAL;
        }
    if (r->ntags == S3_LC_TAGS_MAX) {
        *why = "a filter has at most 10 tags";
        return -EINVAL;
    }
    struct s3_lc_tag *nt = s3__arena_alloc(a, (r->ntags + 1) * sizeof(*nt));
    if (r->ntags)
        memcpy(nt, r->tags, r->ntags * sizeof(*nt));
    nt[r->ntags++] = (struct s3_lc_tag){k->text, v->text, k->textlen, v->textlen};
    r->tags = nt;
    return 0;
}

/* One filter condition (a child of <Filter> or <And>). @p in_and: inside <And>. */
static int filter_part(struct s3_arena *a, struct s3_lc_rule *r, const struct s3_xnode *c,
                       const char **why)
{
    if (strcmp(c->name, "Prefix") == 0) {
        if (r->prefix) {
            *why = "a filter has one Prefix";
            return -EINVAL;
        }
        r->prefix = c->text;
        r->prefixlen = c->textlen;
        return 0;
    }
    if (strcmp(c->name, "Tag") == 0)
        return tag_add(a, r, c, why);
    bool gt = strcmp(c->name, "ObjectSizeGreaterThan") == 0;
    if (gt || strcmp(c->name, "ObjectSizeLessThan") == 0) {
        int64_t v = size_of(c);
        int64_t *dst = gt ? &r->size_gt : &r->size_lt;
        if (v < 0 || *dst >= 0) {
            *why = "ObjectSizeGreaterThan and ObjectSizeLessThan are one byte count each";
            return -EINVAL;
        }
        *dst = v;
        return 0;
    }
    *why = "unknown filter element";
    return SRV_EBADREQ;
}

static int filter_parse(struct s3_arena *a, struct s3_lc_rule *r, const struct s3_xnode *f,
                        const char **why)
{
    int n = 0, rc = 0;
    for (const struct s3_xnode *c = f->child; c && rc == 0; c = c->next, n++) {
        if (strcmp(c->name, "And") == 0) {
            r->and_form = true;
            int m = 0;
            for (const struct s3_xnode *d = c->child; d && rc == 0; d = d->next, m++)
                rc = filter_part(a, r, d, why);
            if (rc == 0 && m < 2) {
                *why = "And combines at least two conditions";
                rc = -EINVAL;
            }
        } else {
            rc = filter_part(a, r, c, why);
        }
    }
    if (rc == 0 && n > 1) {
        *why = "a Filter has one condition; combine several with And";
        rc = -EINVAL;
    }
    if (rc == 0 && r->size_gt >= 0 && r->size_lt >= 0 && r->size_lt <= r->size_gt) {
        *why = "ObjectSizeLessThan must be greater than ObjectSizeGreaterThan";
        rc = -EINVAL;
    }
    return rc;
}

/* Transition or NoncurrentVersionTransition @p n into @p list. */
static int trans_parse(struct s3_arena *a, struct s3_lc_trans **list, size_t *nlist,
                       const struct s3_xnode *n, bool noncurrent, const char **why)
{
    struct s3_lc_trans t = {0};
    struct s3_xnode *days = s3__xml_child(n, noncurrent ? "NoncurrentDays" : "Days");
    struct s3_xnode *date = noncurrent ? NULL : s3__xml_child(n, "Date");
    struct s3_xnode *sc = s3__xml_child(n, "StorageClass");
    if (!sc || !sc->textlen || !days == !date) {
        *why = "a Transition needs a StorageClass and Days (or a Date)";
        return -EINVAL;
    }
    if (days && (t.days = count_of(days, 36500)) < 0 && strcmp(days->text, "0") != 0) {
        *why = "Days of a Transition must be a whole number";
        return -EINVAL;
    }
    if (days && t.days < 0)
        t.days = 0;
    if (date && date_of(date, &t.date)) {
        *why = "a Date must be midnight UTC in ISO 8601";
        return -EINVAL;
    }
    t.sclass = sc->text;
    struct s3_lc_trans *nl = s3__arena_alloc(a, (*nlist + 1) * sizeof(*nl));
    if (*nlist)
        memcpy(nl, *list, *nlist * sizeof(*nl));
    nl[(*nlist)++] = t;
    *list = nl;
    return 0;
}

static int rule_parse(struct s3_arena *a, struct s3_lc_rule *r, const struct s3_xnode *rn,
                      const char **why)
{
    memset(r, 0, sizeof(*r));
    r->size_gt = r->size_lt = -1;
    r->exp_dmarker = -1;
    r->id = "";
    struct s3_xnode *st = NULL, *filter = NULL, *prefix = NULL;
    int actions = 0, rc = 0;
    for (const struct s3_xnode *c = rn->child; c && rc == 0; c = c->next) {
        if (strcmp(c->name, "ID") == 0) {
            r->id = c->text;
            if (c->textlen > 255) {
                *why = "a rule ID is at most 255 characters";
                rc = -EINVAL;
            }
        } else if (strcmp(c->name, "Status") == 0) {
            st = (struct s3_xnode *)c;
        } else if (strcmp(c->name, "Filter") == 0) {
            filter = (struct s3_xnode *)c;
        } else if (strcmp(c->name, "Prefix") == 0) {
            prefix = (struct s3_xnode *)c;
        } else if (strcmp(c->name, "Expiration") == 0) {
            struct s3_xnode *days = s3__xml_child(c, "Days"), *date = s3__xml_child(c, "Date");
            struct s3_xnode *dm = s3__xml_child(c, "ExpiredObjectDeleteMarker");
            actions++;
            if (!!days + !!date + !!dm != 1) {
                *why = "Expiration has one of Days, Date or ExpiredObjectDeleteMarker";
                rc = -EINVAL;
            } else if (days && (r->exp_days = count_of(days, 36500)) < 0) {
                *why = "Days of an Expiration must be a positive whole number";
                rc = -EINVAL;
            } else if (date && date_of(date, &r->exp_date)) {
                *why = "a Date must be midnight UTC in ISO 8601";
                rc = -EINVAL;
            } else if (dm && strcmp(dm->text, "true") && strcmp(dm->text, "false")) {
                *why = "ExpiredObjectDeleteMarker is true or false";
                rc = -EINVAL;
            } else if (dm) {
                r->exp_dmarker = strcmp(dm->text, "true") == 0;
            }
        } else if (strcmp(c->name, "NoncurrentVersionExpiration") == 0) {
            struct s3_xnode *nd = s3__xml_child(c, "NoncurrentDays");
            struct s3_xnode *nn = s3__xml_child(c, "NewerNoncurrentVersions");
            actions++;
            if ((r->nc_days = count_of(nd, 36500)) < 0 ||
                (nn && (r->nc_newer = count_of(nn, 100)) < 0)) {
                *why = "NoncurrentVersionExpiration needs NoncurrentDays > 0 (and "
                       "NewerNoncurrentVersions 1..100)";
                rc = -EINVAL;
            }
        } else if (strcmp(c->name, "AbortIncompleteMultipartUpload") == 0) {
            actions++;
            if ((r->abort_days = count_of(s3__xml_child(c, "DaysAfterInitiation"), 36500)) < 0) {
                *why = "AbortIncompleteMultipartUpload needs DaysAfterInitiation > 0";
                rc = -EINVAL;
            }
        } else if (strcmp(c->name, "Transition") == 0 ||
                   strcmp(c->name, "NoncurrentVersionTransition") == 0) {
            bool nc = c->name[0] == 'N';
            actions++;
            rc = nc ? trans_parse(a, &r->nctrans, &r->nnctrans, c, true, why)
                    : trans_parse(a, &r->trans, &r->ntrans, c, false, why);
        } else {
            *why = "unknown element in a Rule";
            rc = SRV_EBADREQ;
        }
    }
    if (rc)
        return rc;
    if (!st || (strcmp(st->text, "Enabled") && strcmp(st->text, "Disabled"))) {
        *why = "a Rule needs a Status of Enabled or Disabled";
        return SRV_EBADREQ;
    }
    r->enabled = st->text[0] == 'E';
    if (!!filter == !!prefix) {
        *why = "a Rule has either a Filter or a Prefix";
        return SRV_EBADREQ;
    }
    if (prefix) {
        r->legacy_prefix = true;
        r->prefix = prefix->text;
        r->prefixlen = prefix->textlen;
    } else if ((rc = filter_parse(a, r, filter, why)) != 0) {
        return rc;
    }
    if (!actions) {
        *why = "a Rule needs at least one action";
        return -EINVAL;
    }
    if (r->ntags && (r->exp_dmarker >= 0 || r->abort_days)) {
        *why = "ExpiredObjectDeleteMarker and AbortIncompleteMultipartUpload cannot be used "
               "with a tag filter";
        return -EINVAL;
    }
    return 0;
}

/* Whether every text under @p n is characters XML 1.0 can carry (no control byte but
 * tab, newline and carriage return): what is stored must be written back and parsed
 * again (a NUL in a key or ID would cut it). */
static bool text_ok(const struct s3_xnode *n)
{
    for (; n; n = n->next) {
        for (size_t i = 0; i < n->textlen; i++) {
            unsigned char ch = (unsigned char)n->text[i];
            if (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r')
                return false;
        }
        if (!text_ok(n->child))
            return false;
    }
    return true;
}

int s3__lc_parse(struct s3_arena *a, const char *doc, size_t len, struct s3_lc *out,
                 const char **why)
{
    struct s3_xnode *root = NULL;
    memset(out, 0, sizeof(*out));
    *why = S3_MSG_BAD_XML;
    if (!len || s3__xml_parse(a, doc, len, &root) ||
        strcmp(root->name, "LifecycleConfiguration") != 0 || !text_ok(root))
        return SRV_EBADREQ;
    size_t n = 0;
    for (const struct s3_xnode *c = root->child; c; c = c->next) {
        if (strcmp(c->name, "Rule") != 0)
            return SRV_EBADREQ;
        n++;
    }
    if (n == 0 || n > S3_LC_RULES_MAX) {
        *why = "a lifecycle configuration has 1 to 1000 rules";
        return n ? -EINVAL : SRV_EBADREQ;
    }
    out->rules = s3__arena_alloc(a, n * sizeof(*out->rules));
    for (const struct s3_xnode *c = root->child; c; c = c->next) {
        struct s3_lc_rule *r = &out->rules[out->n];
        int rc = rule_parse(a, r, c, why);
        if (rc)
            return rc;
        for (size_t i = 0; i < out->n; i++)
            if (r->id[0] && strcmp(out->rules[i].id, r->id) == 0) {
                *why = "rule IDs must be unique";
                return -EINVAL;
            }
        out->n++;
    }
    return 0;
}

bool s3__lc_has_transition(const struct s3_lc *lc)
{
    for (size_t i = 0; i < lc->n; i++)
        if (lc->rules[i].ntrans || lc->rules[i].nnctrans)
            return true;
    return false;
}

/* The storage classes S3 lifecycle transitions to (not STANDARD, nor the ones an object
 * is only written in). */
static const char *const trans_classes[] = {
    "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING", "GLACIER_IR", "GLACIER", "DEEP_ARCHIVE",
};

int s3__lc_check_tier(const struct s3_lc *lc, const char *tier_class, bool versioned,
                      enum s3_err *e, const char **why)
{
    for (size_t i = 0; i < lc->n; i++)
        if (lc->rules[i].nnctrans) {
            *why = "NoncurrentVersionTransition is not built: noncurrent versions are never "
                   "copied to the remote tier (docs/tiering.md)";
            return SRV_ENOTSUPP;
        }
    for (size_t i = 0; i < lc->n; i++) {
        const struct s3_lc_rule *r = &lc->rules[i];
        for (size_t j = 0; j < r->ntrans; j++) {
            bool known = false;
            for (size_t k = 0; k < sizeof(trans_classes) / sizeof(trans_classes[0]); k++)
                known |= strcmp(r->trans[j].sclass, trans_classes[k]) == 0;
            if (!known) {
                *e = S3E_INVALID_STORAGE_CLASS;
                *why = "a Transition's StorageClass is one of STANDARD_IA, ONEZONE_IA, "
                       "INTELLIGENT_TIERING, GLACIER_IR, GLACIER, DEEP_ARCHIVE";
                return -EINVAL;
            }
            if (versioned) {
                *why = "lifecycle Transition in a versioned bucket is not built: the remote "
                       "tier does not evict files whose versions share extents "
                       "(docs/tiering.md)";
                return SRV_ENOTSUPP;
            }
            if (!tier_class) {
                *e = S3E_INVALID_REQUEST;
                *why = "a lifecycle Transition needs the bucket to have a tier policy (a "
                       "remote that stands for the storage class; docs/tiering.md)";
                return -EINVAL;
            }
            if (strcmp(r->trans[j].sclass, tier_class) != 0) {
                *e = S3E_INVALID_STORAGE_CLASS;
                *why = "this bucket's remote tier stands for another storage class (its tier "
                       "policy's storage_class): a Transition can only name that one";
                return -EINVAL;
            }
        }
    }
    return 0;
}

/* ---- the canonical document ---- */

static void date_xml(struct evbuffer *b, const char *tag, time_t t)
{
    char iso[25];
    struct timespec ts = {t, 0};
    s3__iso_date_fmt(&ts, iso);
    s3__xml_elem(b, tag, iso);
}

static void filter_xml(struct evbuffer *b, const struct s3_lc_rule *r)
{
    if (r->legacy_prefix) {
        s3__xml_elemn(b, "Prefix", r->prefix, r->prefixlen);
        return;
    }
    evbuffer_add_printf(b, "<Filter>");
    if (r->and_form)
        evbuffer_add_printf(b, "<And>");
    if (r->prefix)
        s3__xml_elemn(b, "Prefix", r->prefix, r->prefixlen);
    for (size_t i = 0; i < r->ntags; i++) {
        evbuffer_add_printf(b, "<Tag>");
        s3__xml_elemn(b, "Key", r->tags[i].key, r->tags[i].klen);
        s3__xml_elemn(b, "Value", r->tags[i].val, r->tags[i].vlen);
        evbuffer_add_printf(b, "</Tag>");
    }
    if (r->size_gt >= 0)
        s3__xml_elem_u64(b, "ObjectSizeGreaterThan", (uint64_t)r->size_gt);
    if (r->size_lt >= 0)
        s3__xml_elem_u64(b, "ObjectSizeLessThan", (uint64_t)r->size_lt);
    if (r->and_form)
        evbuffer_add_printf(b, "</And>");
    evbuffer_add_printf(b, "</Filter>");
}

static void trans_xml(struct evbuffer *b, const struct s3_lc_trans *t, size_t n, bool nc)
{
    for (size_t i = 0; i < n; i++) {
        evbuffer_add_printf(b, nc ? "<NoncurrentVersionTransition>" : "<Transition>");
        if (t[i].date)
            date_xml(b, "Date", t[i].date);
        else
            s3__xml_elem_u64(b, nc ? "NoncurrentDays" : "Days", (uint64_t)t[i].days);
        s3__xml_elem(b, "StorageClass", t[i].sclass);
        evbuffer_add_printf(b, nc ? "</NoncurrentVersionTransition>" : "</Transition>");
    }
}

void s3__lc_xml(const struct s3_lc *lc, struct evbuffer *b)
{
    evbuffer_add_printf(b, "<LifecycleConfiguration xmlns=\"%s\">", S3_XMLNS);
    for (size_t i = 0; i < lc->n; i++) {
        const struct s3_lc_rule *r = &lc->rules[i];
        evbuffer_add_printf(b, "<Rule>");
        if (r->id[0])
            s3__xml_elem(b, "ID", r->id);
        filter_xml(b, r);
        s3__xml_elem(b, "Status", r->enabled ? "Enabled" : "Disabled");
        if (r->exp_days || r->exp_date || r->exp_dmarker >= 0) {
            evbuffer_add_printf(b, "<Expiration>");
            if (r->exp_days)
                s3__xml_elem_u64(b, "Days", (uint64_t)r->exp_days);
            else if (r->exp_date)
                date_xml(b, "Date", r->exp_date);
            else
                s3__xml_elem(b, "ExpiredObjectDeleteMarker", r->exp_dmarker ? "true" : "false");
            evbuffer_add_printf(b, "</Expiration>");
        }
        trans_xml(b, r->trans, r->ntrans, false);
        if (r->nc_days) {
            evbuffer_add_printf(b, "<NoncurrentVersionExpiration>");
            s3__xml_elem_u64(b, "NoncurrentDays", (uint64_t)r->nc_days);
            if (r->nc_newer)
                s3__xml_elem_u64(b, "NewerNoncurrentVersions", (uint64_t)r->nc_newer);
            evbuffer_add_printf(b, "</NoncurrentVersionExpiration>");
        }
        trans_xml(b, r->nctrans, r->nnctrans, true);
        if (r->abort_days) {
            evbuffer_add_printf(b, "<AbortIncompleteMultipartUpload>");
            s3__xml_elem_u64(b, "DaysAfterInitiation", (uint64_t)r->abort_days);
            evbuffer_add_printf(b, "</AbortIncompleteMultipartUpload>");
        }
        evbuffer_add_printf(b, "</Rule>");
    }
    evbuffer_add_printf(b, "</LifecycleConfiguration>");
}

/* ---- matching and timing ---- */

bool s3__lc_match(const struct s3_lc_rule *r, const char *key, size_t klen, uint64_t size,
                  const struct s3_meta *meta)
{
    if (!r->enabled)
        return false;
    if (r->prefix && (klen < r->prefixlen || memcmp(key, r->prefix, r->prefixlen) != 0))
        return false;
    if (r->size_gt >= 0 && size <= (uint64_t)r->size_gt)
        return false;
    if (r->size_lt >= 0 && size >= (uint64_t)r->size_lt)
        return false;
    for (size_t i = 0; i < r->ntags; i++) {
        const struct s3_meta_ent *t = meta ? s3__meta_find(meta, S3_M_TAG, r->tags[i].key) : NULL;
        if (!t || t->vlen != r->tags[i].vlen || memcmp(t->val, r->tags[i].val, t->vlen) != 0)
            return false;
    }
    return true;
}

bool s3__lc_due(int64_t since, int64_t days, int64_t now, int64_t day_s)
{
    if (day_s != DAY_S)
        return now >= since + days * day_s; /* the test clock: no rounding */
    /* S3: creation + days, rounded up to the next midnight UTC */
    int64_t t = since + days * DAY_S;
    if (t % DAY_S)
        t += DAY_S - t % DAY_S;
    return now >= t;
}
