/*
 * The data of a collective that runs in shared memory: its chunks, and what each moves.
 *
 * Every local rank's buffers are in the pool that every rank maps, so a rank reads the others'
 * inputs and writes their outputs in place: one pass over the inputs, one write of each output,
 * no staging. A chunk covers at most COLL_SHM_CHUNK_BYTES of one buffer: any rank may run any
 * chunk, and only the chunk's own elements are read or written, so in-place buffers are safe
 * (an element of an input is read before the chunk that reads it writes the same element of
 * the output). Reductions and copies go through the executor of the pool's memory kind
 * (kernels/exec.h), as the daemon's do: every input combined in one call, 16-bit floats in
 * float32, AVG scaled as collective.h says.
 *
 * A multi-node allreduce (route NODE) has twice the chunks: the first half reduces the inputs
 * into the node buffer, a partial result for the daemon's inter-node phase (AVG not yet
 * divided, coll_shm_node_reducible() dtypes only, so the partial keeps the dtype); the second
 * half, once the daemon wrote the result there, copies it to every output.
 */

#include "client/shm/shm.h"

/* Bytes of one chunk: cache-sized, so that a reduced piece is copied out while in cache. */
#define COLL_SHM_CHUNK_BYTES (64u * 1024u)

static uint64_t per_chunk(const coll_submission_t *d)
{
    return COLL_SHM_CHUNK_BYTES / coll_dtype_size((coll_dtype_t)d->dtype);
}

/* Chunks of one buffer of count elements. */
static uint64_t pieces(const coll_submission_t *d)
{
    return (d->count + per_chunk(d) - 1) / per_chunk(d);
}

uint32_t coll__shm_nchunks(const coll_submission_t *d, uint32_t nlocal)
{
    uint64_t n = 0;

    switch ((coll_kind_t)d->coll) {
    case COLL_KIND_ALLREDUCE:
    case COLL_KIND_BROADCAST:
    case COLL_KIND_REDUCE: n = pieces(d); break;
    case COLL_KIND_REDUCE_SCATTER:
    case COLL_KIND_ALLGATHER: n = pieces(d) * nlocal; break;
    default: break;
    }
    /* Count 0 and the barrier have one empty chunk: whoever runs it completes the operation. */
    return n == 0 ? 1 : n > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t)n;
}

/* The local rank of global rank @p rank (0 when none is: the caller checked roots). */
static uint32_t local_of(const coll_shm_t *s, uint32_t rank)
{
    for (uint32_t l = 0; l < s->nlocal; l++) {
        if (coll__shm_area(s, l)->rank == rank) {
            return l;
        }
    }
    return 0;
}

/* dst = the reduction of every local rank's input at element @p off, @p len elements, the
 * final result unless @p partial; the kernel reduces in place only through its first source. */
static void reduce_into(const coll_shm_t *s, const coll_shm_op_t *op, uint64_t off,
                        uint64_t len, uint8_t *dst, uint32_t world_size, int partial)
{
    const void *src[COLL_REDUCE_MAX_SRCS];
    const coll_submission_t *d = &op->rec.sub;
    size_t es = coll_dtype_size((coll_dtype_t)d->dtype);

    for (uint32_t l = 0; l < s->nlocal; l++) {
        src[l] = s->base + op->in_off[l] + off * es;
        if (src[l] == dst) { /* every source is raw: the masks stay as they are */
            src[l] = src[0];
            src[0] = dst;
        }
    }
    s->exec->reduce(&(coll_reduce_args_t){
        .dtype = (coll_dtype_t)d->dtype, .op = (coll_redop_t)d->redop,
        .world_size = world_size, .finalize = !partial, .dst = dst, .src = src,
        .nsrc = s->nlocal,
        .raw_mask = s->nlocal >= 64 ? UINT64_MAX : (1ull << s->nlocal) - 1, .count = len});
}

static void copy_unless_same(const coll_shm_t *s, uint8_t *dst, const uint8_t *src, size_t len)
{
    if (dst != src && len > 0) {
        s->exec->copy(dst, src, len);
    }
}

/* Allreduce, broadcast, reduce: chunk @p k is elements [k * per, ...) of the buffer. */
static void run_whole(const coll_shm_t *s, const coll_shm_op_t *op, uint32_t k,
                      uint32_t world_size)
{
    const coll_submission_t *d = &op->rec.sub;
    size_t es = coll_dtype_size((coll_dtype_t)d->dtype);
    uint64_t off = k * per_chunk(d);
    uint64_t len = d->count - off < per_chunk(d) ? d->count - off : per_chunk(d);
    uint32_t root = local_of(s, d->root);
    uint8_t *out0 = s->base + op->out_off[0] + off * es;

    switch ((coll_kind_t)d->coll) {
    case COLL_KIND_ALLREDUCE:
        reduce_into(s, op, off, len, out0, world_size, 0);
        for (uint32_t l = 1; l < s->nlocal; l++) {
            copy_unless_same(s, s->base + op->out_off[l] + off * es, out0, len * es);
        }
        break;
    case COLL_KIND_REDUCE:
        reduce_into(s, op, off, len, s->base + op->out_off[root] + off * es, world_size, 0);
        break;
    default: /* broadcast */
        for (uint32_t l = 0; l < s->nlocal; l++) {
            copy_unless_same(s, s->base + op->out_off[l] + off * es,
                             s->base + op->in_off[root] + off * es, len * es);
        }
        break;
    }
}

/* Reduce-scatter and all-gather: chunk @p k is piece k % pieces of rank block k / pieces. */
static void run_blocked(const coll_shm_t *s, const coll_shm_op_t *op, uint32_t k,
                        uint32_t world_size)
{
    const coll_submission_t *d = &op->rec.sub;
    size_t es = coll_dtype_size((coll_dtype_t)d->dtype);
    uint64_t n = pieces(d), piece = k % n, off = piece * per_chunk(d);
    uint32_t b = (uint32_t)(k / n);
    uint64_t len = d->count - off < per_chunk(d) ? d->count - off : per_chunk(d);

    if (d->coll == COLL_KIND_REDUCE_SCATTER) {
        /* Block b of every input is the output of the rank whose global rank is b. */
        uint32_t owner = local_of(s, b);
        reduce_into(s, op, (uint64_t)b * d->count + off, len,
                    s->base + op->out_off[owner] + off * es, world_size, 0);
        return;
    }
    /* All-gather: local rank b's input goes to block rank(b) of every output. */
    uint64_t at = ((uint64_t)coll__shm_area(s, b)->rank * d->count + off) * es;
    for (uint32_t l = 0; l < s->nlocal; l++) {
        copy_unless_same(s, s->base + op->out_off[l] + at, s->base + op->in_off[b] + off * es,
                         len * es);
    }
}

/* Route NODE: chunk @p k of the reduce into the node buffer, or of the copy out of it. */
static void run_node(const coll_shm_t *s, const coll_shm_op_t *op, uint32_t k,
                     uint32_t world_size)
{
    const coll_submission_t *d = &op->rec.sub;
    size_t es = coll_dtype_size((coll_dtype_t)d->dtype);
    uint32_t half = op->nchunks / 2, piece = k < half ? k : k - half;
    uint64_t off = piece * per_chunk(d);
    uint64_t len = d->count - off < per_chunk(d) ? d->count - off : per_chunk(d);
    uint8_t *node = s->base + op->node_off + off * es;

    if (k < half) {
        reduce_into(s, op, off, len, node, world_size, 1);
        return;
    }
    for (uint32_t l = 0; l < s->nlocal; l++) {
        copy_unless_same(s, s->base + op->out_off[l] + off * es, node, len * es);
    }
}

void coll__shm_run_chunk(const coll_shm_t *s, const coll_shm_op_t *op, uint32_t k,
                         uint32_t world_size)
{
    if (op->rec.sub.count == 0) {
        return;
    }
    if (op->route == COLL_SHM_ROUTE_NODE) {
        run_node(s, op, k, world_size);
        return;
    }
    switch ((coll_kind_t)op->rec.sub.coll) {
    case COLL_KIND_ALLREDUCE:
    case COLL_KIND_BROADCAST:
    case COLL_KIND_REDUCE: run_whole(s, op, k, world_size); break;
    case COLL_KIND_REDUCE_SCATTER:
    case COLL_KIND_ALLGATHER: run_blocked(s, op, k, world_size); break;
    default: break; /* barrier: every local rank has entered */
    }
}

void coll__shm_count(const coll_shm_t *s, const coll_submission_t *d, uint32_t world_size,
                     uint64_t ns)
{
    coll_shm_stats_t *st = &coll__shm_area(s, s->self)->stats;
    uint64_t bytes = d->count * coll_dtype_size((coll_dtype_t)d->dtype);
    double sec = (double)ns / 1e9;
    unsigned b = 0;

    if (d->coll == COLL_KIND_REDUCE_SCATTER || d->coll == COLL_KIND_ALLGATHER) {
        bytes *= world_size;
    }
    while (b < COLL_SHM_BUCKETS && sec > s->hdr->bounds[b]) {
        b++;
    }
    atomic_fetch_add_explicit(&st->ok[d->coll][d->dtype], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&st->bytes[d->coll][d->dtype], d->coll == COLL_KIND_BARRIER ? 0 :
                              bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&st->hist[d->coll][b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&st->sum_ns[d->coll], ns, memory_order_relaxed);
}
