/* SPDX-License-Identifier: Apache-2.0
 * s3_policy: bucket policies (the IAM policy language as S3 applies it).
 * Thread: reentrant. */
#include <string.h>

#include "s3_internal.h"

enum s3_pol s3__policy_decide(struct s3_ctx *x, const struct s3_bref *b, const char *action,
                              const struct s3_meta *ometa)
{
    (void)x;
    (void)action;
    (void)ometa;
    return b->cfg.policy ? S3_POL_DENY : S3_POL_NONE;
}
