/*
 * What a job's compression looks like for /status and /metrics (codec.h): totals by method,
 * resets, fallbacks, the link estimate, and every bucket's residual slot.
 */
#include <stdio.h>
#include <string.h>

#include "engine/codec/codec.h"
#include "engine/codec/internal.h"
#include "proto/cspec.h"

_Static_assert(COLL_CODEC_FALLBACK_REASONS == COLL_FALLBACK_REASONS,
               "codec.h names every fallback reason");

const char *coll_codec_fallback_name(unsigned i)
{
    return coll__fallback_name((coll_fallback_t)i);
}

int coll_codec_job_info(const coll_job_t *job, coll_codec_job_info_t *out)
{
    const coll_codec_job_t *cj = job->engine.codec;
    coll_slot_t *s, *stmp;
    coll_tensor_layout_t *l, *ltmp;

    if (cj == NULL) {
        return 0;
    }
    memset(out, 0, sizeof(*out));
    for (unsigned m = 0; m < COLL_COMPRESS_COUNT; m++) {
        out->ops[m] = cj->acct[m].ops;
        out->wire_bytes[m] = cj->acct[m].wire_bytes;
        out->dense_bytes[m] = cj->acct[m].dense_bytes;
    }
    out->resets = cj->resets;
    out->method_resets = cj->method_resets;
    memcpy(out->fallbacks, cj->fallbacks, sizeof(out->fallbacks));
    out->nonfinite = cj->nonfinite;
    out->link_bytes_per_s = coll__est_bandwidth(&cj->est);
    coll_list_for_each_safe(s, stmp, &cj->slots, coll_slot_t, link)
    {
        out->buckets++;
        out->residual_bytes += s->pool_bytes;
    }
    coll_list_for_each_safe(l, ltmp, &cj->layouts, coll_tensor_layout_t, link)
    {
        out->layouts++;
    }
    return 1;
}

/* @p spec as text, "none" for 0. */
static void spec_text(uint64_t spec, uint32_t warmup, char *buf, size_t len)
{
    coll_compression_t c;

    if (!coll_cspec_unpack(spec, &c)) {
        snprintf(buf, len, "?");
        return;
    }
    c.warmup = warmup;
    coll_compression_format(&c, buf, len);
}

int coll_codec_bucket_info(const coll_job_t *job, size_t i, coll_codec_bucket_info_t *out)
{
    const coll_codec_job_t *cj = job->engine.codec;
    coll_slot_t *s, *tmp;
    size_t k = 0;

    if (cj == NULL) {
        return 0;
    }
    coll_list_for_each_safe(s, tmp, &cj->slots, coll_slot_t, link)
    {
        if (k++ != i) {
            continue;
        }
        *out = (coll_codec_bucket_info_t){.bucket = s->bucket, .count = s->count,
                                          .ops = s->ops, .resets = s->resets,
                                          .why = s->auto_why, .pool_bytes = s->pool_bytes};
        spec_text(s->asked, s->warmup, out->asked, sizeof(out->asked));
        spec_text(s->last_run, 0, out->last, sizeof(out->last));
        spec_text(s->auto_next, 0, out->next, sizeof(out->next));
        return 1;
    }
    return 0;
}
