/*
 * The cost model's formulas (cost.h lists them). Each algorithm is one function of the shape
 * and the constants; coll_cost_predict() runs those that apply to the collective and picks the
 * fastest exact one.
 */
#include "engine/cost.h"

#include <math.h>
#include <stddef.h>

/* Bytes in front of every compressed message: the descriptor and cx header (144,
 * codec/internal.h) and the wire header (16, kernels/cpu/compress_wire.h). */
#define CX_PREFIX_BYTES 160.0
#define F32 4.0

/* One shape: the constants, the size and the nodes. */
typedef struct {
    const coll_cost_params_t *p;
    coll_kind_t kind;
    double s;   /* bytes per rank */
    double n;   /* nodes */
    double l;   /* ranks per node */
    uint32_t nodes;
} shape_t;

/* One node's share of an algorithm's CPU work, averaged over the nodes (cost.h: the bound). */
typedef struct {
    double msgs;    /* messages it sends to other nodes */
    double bytes;   /* the bytes in them */
    double reduced; /* bytes it reduces, gamma each */
    double extra;   /* seconds of the rest: hand-offs, local combine and copies, codecs */
} load_t;

static const char *const names[COLL_COST_NALGOS] = {
    [COLL_COST_RING] = "ring",         [COLL_COST_RD] = "rd",
    [COLL_COST_KNOMIAL] = "knomial",   [COLL_COST_BRUCK] = "bruck",
    [COLL_COST_CHAIN] = "chain",       [COLL_COST_DISSEMINATION] = "dissemination",
    [COLL_COST_NODE_RD] = "node_rd",   [COLL_COST_NODE_RING] = "node_ring",
    [COLL_COST_DIRECT] = "direct",     [COLL_COST_FP16] = "fp16",
    [COLL_COST_ONEBIT] = "onebit",     [COLL_COST_TOPK] = "topk",
    [COLL_COST_POWERSGD] = "powersgd",
};

const char *coll_cost_algo_name(coll_cost_algo_t algo)
{
    return (unsigned)algo < COLL_COST_NALGOS ? names[algo] : "?";
}

int coll_cost_algo_lossy(coll_cost_algo_t algo)
{
    return algo == COLL_COST_FP16 || algo == COLL_COST_ONEBIT || algo == COLL_COST_TOPK ||
           algo == COLL_COST_POWERSGD;
}

void coll_cost_params_default(coll_cost_params_t *p)
{
    /* bench/calibrate.sh on the development machine, links of 10 Gbit/s between namespaces
     * (docs/cost-model.md has the sitting and its load). */
    *p = (coll_cost_params_t){
        .alpha = 83.8e-6,
        .beta = 1.416e-9,
        .gamma = 0.2076e-9,
        .alpha_op = 67.8e-6,
        .alpha_shm = 2.82e-6,
        .beta_mem = 0.1001e-9,
        .alpha_direct = 9.23e-6,
        .codec_cast = 1.008e-9,
        .codec_onebit = 0.841e-9,
        .codec_topk = 0.990e-9,
        .codec_flop = 0.0361e-9,
        .topk_ratio = 0.01,
        .powersgd_rank = 2,
        .powersgd_rows = 0,
        .knomial_radix = 4,
        .segment_bytes = 256u << 10,
        .rd_max_bytes = (256u << 10) - sizeof(coll_desc_t),
    };
}

/* ceil(log_k(n)) for n >= 1, k >= 2, in integers (no rounding surprises at exact powers). */
static double ceil_log(uint32_t n, uint32_t k)
{
    double rounds = 0;
    for (uint64_t reach = 1; reach < n; reach *= k) {
        rounds++;
    }
    return rounds;
}

/* The largest power of two <= n (n >= 1). */
static double pow2_floor(uint32_t n)
{
    uint32_t p = 1;
    while (p <= n / 2) {
        p *= 2;
    }
    return p;
}

/* The segments a message of @p bytes travels in (at least one). */
static double segments(const shape_t *x, double bytes)
{
    return fmax(1, ceil(bytes / (double)x->p->segment_bytes));
}

/* Add @p msgs messages of @p bytes each and @p reduced bytes reduced to one node's load. */
static void add_load(load_t *ld, double msgs, double bytes, double reduced)
{
    ld->msgs += msgs;
    ld->bytes += msgs * bytes;
    ld->reduced += reduced;
}

/* Recursive doubling of s bytes with @p a per message (cost.h: rd(a)). Load: P log2 P
 * messages among the first P nodes, 2 (N - P) for the fold, over N nodes. */
static double rd_rounds(const shape_t *x, double a, double s, load_t *ld)
{
    const coll_cost_params_t *p = x->p;
    double pw = pow2_floor(x->nodes), rounds = log2(pw);
    double t = rounds * (a + s * p->beta + s * p->gamma);
    if (pw != x->n) {
        t += 2 * a + 2 * s * p->beta + s * p->gamma;
    }
    add_load(ld, (pw * rounds + 2 * (x->n - pw)) / x->n, s,
             (pw * rounds + (x->n - pw)) * s / x->n);
    return t;
}

/* The daemon combines its ranks' inputs and copies the result to the others. */
static double local_daemon(const shape_t *x)
{
    int reduces = x->kind == COLL_KIND_ALLREDUCE || x->kind == COLL_KIND_REDUCE ||
                  x->kind == COLL_KIND_REDUCE_SCATTER;
    return (x->l - 1) * x->s * ((reduces ? x->p->gamma : 0) + x->p->beta_mem);
}

static double node_in(const shape_t *x)
{
    return x->p->alpha_shm + (x->l - 1) * (x->s / x->l) * x->p->gamma;
}

static double node_out(const shape_t *x)
{
    return x->p->alpha_shm + x->s * x->p->beta_mem;
}

/* The node's ranks' share of a node-reduced path: every rank reduces a slice, every rank
 * copies the result out. */
static double node_work(const shape_t *x)
{
    return (x->l - 1) * x->s * x->p->gamma + x->l * x->s * x->p->beta_mem;
}

static double ring_allreduce(const shape_t *x, load_t *ld)
{
    const coll_cost_params_t *p = x->p;
    double chunk = x->s / x->n, steps = 2 * (x->n - 1), segs = segments(x, chunk);
    add_load(ld, steps * segs, chunk / segs, (x->n - 1) * chunk);
    return steps * (p->alpha + chunk * p->beta) + (x->n - 1) * chunk * p->gamma;
}

static double ring(const shape_t *x, load_t *ld)
{
    const coll_cost_params_t *p = x->p;
    double chunk = x->s / x->n, segs = segments(x, chunk);
    switch (x->kind) {
    case COLL_KIND_ALLREDUCE:
        return ring_allreduce(x, ld);
    case COLL_KIND_REDUCE_SCATTER:
        add_load(ld, (x->n - 1) * segs, chunk / segs, (x->n - 1) * chunk);
        return (x->n - 1) * (p->alpha + chunk * (p->beta + p->gamma));
    case COLL_KIND_ALLGATHER:
        add_load(ld, (x->n - 1) * segs, chunk / segs, 0);
        return (x->n - 1) * (p->alpha + chunk * p->beta);
    default:
        return -1;
    }
}

/* The allreduce: every node exchanges with k - 1 others per round; the trees: N - 1 sends of
 * S in all. */
static double knomial(const shape_t *x, load_t *ld)
{
    const coll_cost_params_t *p = x->p;
    double k1 = p->knomial_radix - 1, rounds = ceil_log(x->nodes, p->knomial_radix);
    double tree = (x->n - 1) / x->n;
    switch (x->kind) {
    case COLL_KIND_ALLREDUCE:
        add_load(ld, rounds * k1, x->s, rounds * k1 * x->s);
        return rounds * (p->alpha + k1 * x->s * (p->beta + p->gamma));
    case COLL_KIND_BROADCAST:
        add_load(ld, tree, x->s, 0);
        return rounds * (p->alpha + k1 * x->s * p->beta);
    case COLL_KIND_REDUCE:
        add_load(ld, tree, x->s, tree * x->s);
        return rounds * (p->alpha + k1 * x->s * (p->beta + p->gamma));
    default:
        return -1;
    }
}

static double bruck(const shape_t *x, load_t *ld)
{
    double rounds = ceil_log(x->nodes, 2);
    if (x->kind != COLL_KIND_ALLGATHER) {
        return -1;
    }
    add_load(ld, rounds, (x->n - 1) / x->n * x->s / fmax(1, rounds), 0);
    return rounds * x->p->alpha + (x->n - 1) / x->n * x->s * x->p->beta;
}

/* Pipelined along the nodes: N - 1 hops of ceil(S / s) segments in all. */
static double chain(const shape_t *x, load_t *ld)
{
    const coll_cost_params_t *p = x->p;
    double seg = x->s < (double)p->segment_bytes ? x->s : (double)p->segment_bytes;
    double nseg = seg > 0 ? ceil(x->s / seg) : 1, steps = x->n - 2 + nseg;
    double hops = (x->n - 1) / x->n;
    if (x->kind == COLL_KIND_BROADCAST) {
        add_load(ld, hops * nseg, seg, 0);
        return steps * (p->alpha + seg * p->beta);
    }
    if (x->kind == COLL_KIND_REDUCE) {
        add_load(ld, hops * nseg, seg, hops * x->s);
        return steps * (p->alpha + seg * (p->beta + p->gamma));
    }
    return -1;
}

/* Rounds in which every node sends N - 1 messages of @p msg payload bytes. */
static double cx_rounds(const shape_t *x, double rounds, double msg, load_t *ld)
{
    add_load(ld, rounds * (x->n - 1), CX_PREFIX_BYTES + msg, 0);
    return rounds * (x->p->alpha + (x->n - 1) * (CX_PREFIX_BYTES + msg) * x->p->beta);
}

/* fp16 and 1-bit: a compressed reduce-scatter and all-gather (codec/twosided.c). */
static double twosided(const shape_t *x, double bytes_per_elem, double codec, load_t *ld)
{
    double elems = x->s / F32, chunk = ceil(elems / x->n);
    double msg = bytes_per_elem > 0 ? chunk * bytes_per_elem : ceil(chunk / 8);
    double sums = x->s / x->n * (x->n - 1);
    add_load(ld, 0, 0, sums);
    ld->extra += elems * codec;
    return cx_rounds(x, 2, msg, ld) + sums * x->p->gamma + elems * codec;
}

/* The index bytes of a TopK message (compress_wire.h: the fewest that hold count - 1). */
static double topk_index_bytes(double elems)
{
    return elems <= 256 ? 1 : elems <= 65536 ? 2 : elems <= 16777216 ? 3 : 4;
}

static double topk(const shape_t *x, load_t *ld)
{
    const coll_cost_params_t *p = x->p;
    double elems = x->s / F32, k = fmax(1, ceil(p->topk_ratio * elems));
    add_load(ld, 0, 0, x->n * k * F32);
    ld->extra += elems * p->codec_topk;
    return cx_rounds(x, 1, (F32 + topk_index_bytes(elems)) * k, ld) + elems * p->codec_topk +
           x->n * k * F32 * p->gamma;
}

static double powersgd(const shape_t *x, load_t *ld)
{
    const coll_cost_params_t *p = x->p;
    double elems = x->s / F32, r = p->powersgd_rank;
    double rows = p->powersgd_rows ? (double)p->powersgd_rows : fmax(1, ceil(sqrt(elems)));
    double cols = ceil(elems / rows);
    /* Each factor is allreduced densely: its chunks reduced by their owners, then gathered. */
    double fp = rows * r * F32, fq = cols * r * F32, sums = (x->n - 1) / x->n * (fp + fq);
    double dense = cx_rounds(x, 2, fp / x->n, ld) + cx_rounds(x, 2, fq / x->n, ld) +
                   sums * p->gamma;
    double flops = 6 * elems * r * p->codec_flop;
    add_load(ld, 0, 0, sums + x->s);
    ld->extra += flops;
    return dense + flops + x->s * p->gamma;
}

/* The node-reduced paths: the ranks' shared-memory steps around @p between. */
static double node_path(const shape_t *x, double between, load_t *ld)
{
    ld->extra += node_work(x);
    return node_in(x) + between + node_out(x);
}

/* Allreduce only: the time of @p algo, or -1. */
static double allreduce_algo(const shape_t *x, coll_cost_algo_t algo, load_t *ld)
{
    const coll_cost_params_t *p = x->p;
    int rd_fits = x->s <= (double)p->rd_max_bytes;
    switch (algo) {
    case COLL_COST_RD:
        return rd_fits ? rd_rounds(x, p->alpha, x->s, ld) : -1;
    case COLL_COST_NODE_RD:
        return rd_fits ? node_path(x, rd_rounds(x, p->alpha, x->s, ld), ld) : -1;
    case COLL_COST_NODE_RING:
        return node_path(x, ring_allreduce(x, ld), ld);
    case COLL_COST_DIRECT:
        return node_path(x, rd_rounds(x, p->alpha_direct, x->s, ld), ld);
    case COLL_COST_FP16:
        return twosided(x, 2, p->codec_cast, ld);
    case COLL_COST_ONEBIT:
        return twosided(x, 0, p->codec_onebit, ld);
    case COLL_COST_TOPK:
        return topk(x, ld);
    case COLL_COST_POWERSGD:
        return powersgd(x, ld);
    default:
        return -1;
    }
}

/* What the daemon's own operation adds around the algorithm: the ranks' hand-offs, and its
 * local combine for the algorithms that take every rank's input. Their CPU work into @p ld:
 * every rank waits and is woken once, by its daemon or, on the node-reduced and direct paths,
 * in shared memory by its leader, whose own operation the daemon still counts (L cpu_op). */
static double around(const shape_t *x, coll_cost_algo_t algo, load_t *ld)
{
    ld->extra += x->l * x->p->cpu_op;
    switch (algo) {
    case COLL_COST_DIRECT:
        return 0;
    case COLL_COST_NODE_RD:
    case COLL_COST_NODE_RING:
    case COLL_COST_DISSEMINATION:
        return x->p->alpha_op;
    default:
        ld->extra += local_daemon(x);
        return x->p->alpha_op + local_daemon(x);
    }
}

/* The CPU seconds of a node's load (cost.h: W). */
static double cpu_work(const shape_t *x, const load_t *ld)
{
    const coll_cost_params_t *p = x->p;
    return ld->msgs * p->cpu_msg + ld->bytes * p->cpu_byte + ld->reduced * p->gamma + ld->extra;
}

static double path_time(const shape_t *x, coll_cost_algo_t algo, load_t *ld)
{
    switch (algo) {
    case COLL_COST_RING:
        return ring(x, ld);
    case COLL_COST_KNOMIAL:
        return knomial(x, ld);
    case COLL_COST_BRUCK:
        return bruck(x, ld);
    case COLL_COST_CHAIN:
        return chain(x, ld);
    case COLL_COST_DISSEMINATION:
        if (x->kind != COLL_KIND_BARRIER) {
            return -1;
        }
        add_load(ld, ceil_log(x->nodes, 2), 0, 0);
        return ceil_log(x->nodes, 2) * x->p->alpha;
    default:
        return x->kind == COLL_KIND_ALLREDUCE ? allreduce_algo(x, algo, ld) : -1;
    }
}

/* The time of @p algo for the shape, or -1 where it does not apply; its CPU work in @p work.
 * The bound (cost.h): the work over the CPUs, N nodes' work where they share them. */
static double algo_time(const shape_t *x, coll_cost_algo_t algo, double *work)
{
    const coll_cost_params_t *p = x->p;
    load_t ld = {0};
    double t = path_time(x, algo, &ld);
    if (t < 0) {
        *work = -1;
        return -1;
    }
    t += around(x, algo, &ld);
    *work = cpu_work(x, &ld);
    return p->cpus ? fmax(t, *work * (p->cpus_shared ? x->n : 1) / p->cpus) : t;
}

const char *coll_cost_params_problem(const coll_cost_params_t *p)
{
    const double v[] = {p->alpha,        p->beta,       p->gamma,        p->alpha_op,
                        p->alpha_shm,    p->beta_mem,   p->alpha_direct, p->codec_cast,
                        p->codec_onebit, p->codec_topk, p->codec_flop,   p->cpu_msg,
                        p->cpu_byte,     p->cpu_op};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        if (!isfinite(v[i]) || v[i] < 0) {
            return "a time or cost per byte that is not a finite number >= 0";
        }
    }
    if (p->knomial_radix < 2) {
        return "knomial_radix below 2";
    }
    if (p->powersgd_rank < 1) {
        return "powersgd_rank of 0";
    }
    if (!(p->topk_ratio > 0 && p->topk_ratio <= 1)) {
        return "topk_ratio outside (0, 1]";
    }
    if (p->segment_bytes == 0) {
        return "segment_bytes of 0";
    }
    return p->cpus_shared > 1 ? "cpus_shared neither 0 nor 1" : NULL;
}

int coll_cost_params_valid(const coll_cost_params_t *p)
{
    return coll_cost_params_problem(p) == NULL;
}

static int kind_modelled(coll_kind_t kind)
{
    return kind <= COLL_KIND_BARRIER;
}

coll_status_t coll_cost_predict(const coll_cost_params_t *p, coll_kind_t kind, uint64_t bytes,
                                uint32_t nnodes, uint32_t ranks_per_node, uint32_t allowed,
                                coll_cost_result_t *out)
{
    shape_t x = {p, kind, (double)bytes, nnodes, ranks_per_node, nnodes};
    coll_cost_result_t r = {.best = COLL_COST_NALGOS};

    if (nnodes == 0 || ranks_per_node == 0 || !coll_cost_params_valid(p) ||
        !kind_modelled(kind)) {
        return COLL_ERR_INVALID;
    }
    for (int a = 0; a < COLL_COST_NALGOS; a++) {
        r.work[a] = -1;
        r.time[a] = allowed & (1u << a) ? algo_time(&x, (coll_cost_algo_t)a, &r.work[a]) : -1;
        if (!isfinite(r.time[a])) {
            return COLL_ERR_INVALID; /* constants so large that a time overflows */
        }
        if (r.time[a] >= 0 && !coll_cost_algo_lossy((coll_cost_algo_t)a) &&
            (r.best == COLL_COST_NALGOS || r.time[a] < r.time[r.best])) {
            r.best = (coll_cost_algo_t)a;
        }
    }
    if (r.best == COLL_COST_NALGOS) {
        return COLL_ERR_UNSUPPORTED;
    }
    *out = r;
    return COLL_OK;
}
