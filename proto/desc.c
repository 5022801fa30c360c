#include "proto/desc.h"

#include <string.h>

#include <collective.h>

#include "proto/cspec.h"
#include "proto/frame.h"

static const char *const colls[] = {"allreduce", "reduce-scatter", "all-gather", "broadcast",
                                    "reduce",    "barrier",        "send",       "recv",
                                    "ps-register", "ps-step",      "ps-save",    "ps-load",
                                    "gather",      "scatter",      "alltoallv"};

const char *coll_kind_name(coll_kind_t kind)
{
    return (unsigned)kind < sizeof(colls) / sizeof(colls[0]) ? colls[kind] : "operation";
}

void coll_kind_extent(coll_kind_t kind, uint64_t count, uint32_t world_size, uint32_t rank,
                      uint32_t root, uint64_t *send_p, uint64_t *recv_p)
{
    uint64_t send = count, recv = count;

    switch (kind) {
    case COLL_KIND_REDUCE_SCATTER: send = count * world_size; break;
    case COLL_KIND_ALLGATHER: recv = count * world_size; break;
    case COLL_KIND_BROADCAST: send = rank == root ? count : 0; break;
    case COLL_KIND_REDUCE: recv = rank == root ? count : 0; break;
    case COLL_KIND_BARRIER: send = recv = 0; break;
    case COLL_KIND_SEND: recv = 0; break;
    case COLL_KIND_RECV: send = 0; break;
    case COLL_KIND_PS_REGISTER: recv = 0; break;
    case COLL_KIND_PS_SAVE: send = 0; break;
    case COLL_KIND_PS_LOAD: send = recv = 0; break;
    case COLL_KIND_GATHER: recv = rank == root ? count * world_size : 0; break;
    case COLL_KIND_SCATTER: send = rank == root ? count * world_size : 0; break;
    default: break;
    }
    *send_p = send;
    *recv_p = recv;
}

int coll_kind_overlap_ok(coll_kind_t kind, uint32_t rank, uint64_t so, uint64_t sbytes,
                         uint64_t ro, uint64_t rbytes)
{
    if (sbytes == 0 || rbytes == 0 || so + sbytes <= ro || ro + rbytes <= so) {
        return 1;
    }
    switch (kind) {
    case COLL_KIND_REDUCE_SCATTER:
    case COLL_KIND_SCATTER: return ro == so + rank * rbytes;
    case COLL_KIND_ALLTOALLV: return 0; /* blocks at any displacement: never in place */
    case COLL_KIND_ALLGATHER:
    case COLL_KIND_GATHER: return so == ro + rank * sbytes;
    case COLL_KIND_PS_STEP: return 0; /* the gradients are the scratch of the parameters */
    default: return so == ro && sbytes == rbytes;
    }
}

void coll_desc_make(const coll_submission_t *s, const coll_desc_ctx_t *ctx, coll_desc_t *d)
{
    coll_kind_t kind = (coll_kind_t)s->coll;
    int rooted = coll_kind_is_rooted(kind) || kind == COLL_KIND_PS_STEP;
    int compressed = s->compression != 0;

    memset(d, 0, sizeof(*d));
    *d = (coll_desc_t){
        .magic = COLL_DESC_MAGIC,
        .version = COLL_WIRE_VERSION,
        .coll = (uint16_t)s->coll,
        .key = s->key,
        .count = s->count,
        .dtype = s->dtype,
        .op = s->redop,
        .seg_bytes = ctx->seg_bytes,
        .world_size = ctx->world_size,
        .node = ctx->node,
        .first_rank = ctx->first_rank,
        .root = rooted ? s->root : 0,
        .algo = ctx->algo,
        .epoch = ctx->epoch,
        .layout = kind == COLL_KIND_ALLTOALLV ? 0 : s->layout, /* the table's offset there */
        .compression = s->compression,
        .shapes = compressed ? ctx->shapes : 0,
        .bucket = compressed ? s->bucket : 0,
        .warmup = compressed ? s->warmup : 0,
        .group = s->group,
    };
}

/* " compression=topk:0.01,warmup=5 bucket=3 shapes=..."; what ran once it was decided. */
static void append_compression(const coll_desc_t *d, char *buf, size_t len)
{
    coll_compression_t c;
    char asked[64] = "?", run[64] = "?";
    int n;

    if (coll_cspec_unpack(d->compression, &c)) {
        c.warmup = d->warmup;
        coll_compression_format(&c, asked, sizeof(asked));
    }
    n = snprintf(buf, len, " compression=%s bucket=%u", asked, d->bucket);
    if (d->shapes != 0 && n > 0 && (size_t)n < len) {
        n += snprintf(buf + n, len - (size_t)n, " shapes=%016llx", (unsigned long long)d->shapes);
    }
    if (d->run != 0 && n > 0 && (size_t)n < len && coll_cspec_unpack(d->run, &c)) {
        coll_compression_format(&c, run, sizeof(run));
        snprintf(buf + n, len - (size_t)n, " runs=%s", run);
    }
}

/* Whether a kind's descriptor means something by its reduction operation: the others carry
 * COLL_SUM, which the library sets and nothing reads. */
static int kind_reduces(uint32_t kind)
{
    return kind == COLL_KIND_ALLREDUCE || kind == COLL_KIND_REDUCE_SCATTER ||
           kind == COLL_KIND_REDUCE || kind == COLL_KIND_PS_STEP;
}

void coll_desc_format(const coll_desc_t *d, char *buf, size_t len)
{
    int refused = d->algo >= COLL_ALGO_REFUSED;
    char data[80] = "", op[32] = "", root[24] = "";
    int n;

    if (d->coll != COLL_KIND_BARRIER) {
        snprintf(data, sizeof(data), " count=%llu dtype=%s", (unsigned long long)d->count,
                 coll_dtype_name((coll_dtype_t)d->dtype));
    }
    if (kind_reduces(d->coll)) {
        snprintf(op, sizeof(op), " op=%s", coll_redop_name((coll_redop_t)d->op));
    }
    if (coll_kind_is_rooted(d->coll) || d->coll == COLL_KIND_PS_STEP) {
        snprintf(root, sizeof(root), " root=%u", d->root);
    }
    n = snprintf(buf, len, "%s%s%s%s algo=%s%s segment=%u world=%u",
                 coll_kind_name((coll_kind_t)d->coll), data, op, root, refused ? "refused " : "",
                 coll_algo_name((coll_algo_t)(refused ? d->algo - COLL_ALGO_REFUSED : d->algo)),
                 d->seg_bytes, d->world_size);
    if (d->layout != 0 && n > 0 && (size_t)n < len) {
        n += snprintf(buf + n, len - (size_t)n, " layout=%016llx", (unsigned long long)d->layout);
    }
    if (d->group != 0 && n > 0 && (size_t)n < len) {
        n += snprintf(buf + n, len - (size_t)n, " group=%u", d->group);
    }
    if (d->compression != 0 && n > 0 && (size_t)n < len) {
        append_compression(d, buf + n, len - (size_t)n);
    }
}

/* coll_desc_name() with @p what in place of the collective's name. */
static void name_as(const coll_desc_t *d, const char *what, char *buf, size_t len)
{
    /* Keys with bit 39 are the library's call-order numbers; others were given by the user. */
    char group[24] = "";

    if (d->group != 0) {
        snprintf(group, sizeof(group), " of group %u", d->group);
    }
    if (!coll_kind_is_p2p(d->coll) && (d->key >> 39) == 1) {
        snprintf(buf, len, "%s #%llu%s", what, (unsigned long long)(d->key & ((1ull << 39) - 1)),
                 group);
    } else {
        snprintf(buf, len, "%s key %llu%s", what, (unsigned long long)d->key, group);
    }
}

void coll_desc_name(const coll_desc_t *d, char *buf, size_t len)
{
    name_as(d, coll_kind_name((coll_kind_t)d->coll), buf, len);
}

void coll_desc_mismatch(const coll_desc_t *a, const char *who_a, const coll_desc_t *b,
                        uint32_t rank_b, char *buf, size_t len)
{
    char da[200], db[200], nm[64];

    coll_desc_format(a, da, sizeof(da));
    coll_desc_format(b, db, sizeof(db));
    /* Different collectives under one key: the operation is neither's to name. */
    name_as(b, a->coll == b->coll ? coll_kind_name((coll_kind_t)b->coll) : "operation", nm,
            sizeof(nm));
    snprintf(buf, len, "%s: %s submitted %s but rank %u submitted %s", nm, who_a, da, rank_b, db);
}
