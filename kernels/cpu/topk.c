/*
 * TopK with error feedback (topk.h): exact selection of the k largest magnitudes by a radix
 * select on the bits of |v|, either over all elements or over candidates that a first pass
 * gathered (below a threshold from the histogram, or from a sample). The vector loops (residual
 * update, search for the next element at or above a threshold) are in topk_loops.h.
 *
 * Keys: coll__mag_key(bits of v), 31 bits, in three radix levels of 11, 10 and 10 bits. A level's
 * histogram counts the keys that have the prefix found so far; walking it from the top bin down
 * gives the bin of the k-th largest key and how many keys above it were taken. After three
 * levels the prefix is the k-th largest key T itself and "need" says how many keys equal to T
 * are taken: the first ones in index order (lower index wins).
 *
 * Why AUTO chooses as it does (compress-bw -t, AVX2, one core of an AMD EPYC (Zen 3) guest,
 * microseconds, best of many runs from the same residual; radix / sampled > 1: sampled wins):
 *
 *   count    ratio 0.1          0.03               0.01               0.001
 *   16384    22.7 / 20.6 1.10   15.9 / 12.7 1.25   13.6 (k < 256: both radix)
 *   65536    90 / 148    0.61   84 / 63     1.34   73 / 52     1.42   65 (k < 256)
 *   262144   582 / 757   0.77   358 / 246   1.46   303 / 184   1.64   266 / 271   0.98
 *   1048576  2539 / 2979 0.85   1684 / 1499 1.12   1225 / 974  1.26   1170 / 709  1.65
 *
 * and at 16 MiB (4M elements, compress-bw): 1% 5.5 / 3.4 ms, 0.1% 4.7 / 2.2 ms. Sampling pays
 * from k of a few hundred up to about count / 16; above, its ~2k candidates cost more than the
 * histogram it saves.
 */
#include <math.h>
#include <string.h>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/topk.h"

#define NLEVELS 3
static const struct {
    unsigned shift, width;
} levels[NLEVELS] = {{20, 11}, {10, 10}, {0, 10}};
#define MAX_BINS 2048

/* Elements per block of a fused first pass: the residual update of a block, then its histogram
 * or threshold scan while it is still in L1 (16 KiB of float32). */
#define BLOCK 4096

/* Expected number of sampled elements among the true top k; the sample has about
 * SAMPLE_HITS * count / k elements. */
#define SAMPLE_HITS 16

/* The k-th largest key as far as it is known: its bits above the current level, and how many of
 * the keys with that prefix are still to be taken. */
typedef struct {
    uint32_t prefix;
    size_t need;
} cut_t;

/* One compression in progress. */
typedef struct {
    const coll__compress_loops_t *isa;
    const coll_topk_args_t *a;
    const float *v;    /* what is selected on: the residual after the first pass, or grad */
    uint32_t *cidx;    /* candidates: indices, ascending */
    uint32_t *cbits;   /* ... and the bits of their values */
    size_t scratch_bytes; /* of a->scratch; 0 when it is NULL */
    size_t cap;        /* candidates the scratch holds */
    coll_topk_info_t info;
} run_t;

/* Sampled elements for (count, k), k > 0. */
static size_t sample_size(size_t count, size_t k)
{
    double s = ceil((double)SAMPLE_HITS * (double)count / (double)k);
    return s >= (double)count ? count : (size_t)s;
}

static size_t want_candidates(size_t count, size_t k)
{
    return k > (count - 64) / 4 ? count : 4 * k + 64;
}

size_t coll_topk_scratch_bytes(size_t count, size_t k)
{
    if (count == 0 || k == 0 || k >= count || count > COLL_TOPK_MAX_COUNT) {
        return 0;
    }
    size_t cand = 8 * (count < 64 ? count : want_candidates(count, k));
    size_t sample = k >= COLL_TOPK_SAMPLED_MIN_K ? 4 * sample_size(count, k) : 0;
    return cand > sample ? cand : sample;
}

/* ---- Radix select over a source of float32 bit patterns (float or uint32 array) ---- */

static inline uint32_t key_at(const void *src, size_t i)
{
    uint32_t bits;
    memcpy(&bits, (const char *)src + 4 * i, sizeof(bits));
    return coll__mag_key(bits);
}

/* hist[level bits of key]++ for the keys of src[0..n) whose bits above the level are prefix. */
static void hist_level(const void *src, size_t n, unsigned lvl, uint32_t prefix, uint32_t *hist)
{
    const unsigned shift = levels[lvl].shift, top = shift + levels[lvl].width;
    const uint32_t mask = (1u << levels[lvl].width) - 1;

    for (size_t i = 0; i < n; i++) {
        uint32_t k = key_at(src, i);
        if ((k >> top) == prefix) {
            hist[(k >> shift) & mask]++;
        }
    }
}

/*
 * The level-0 histogram of all keys of v[0..n) into two interleaved copies (hist[0..2048) for
 * even, hist[2048..4096) for odd elements): neighbouring elements often fall into the same bin,
 * and two counters halve the chains of increments that wait on each other (measured 1.5x faster
 * than one on a Zen 3 guest; four were no better).
 */
static void hist_top(const float *v, size_t n, uint32_t *hist)
{
    const unsigned shift = levels[0].shift;
    size_t i = 0;

    for (; i + 2 <= n; i += 2) {
        hist[key_at(v, i) >> shift]++;
        hist[MAX_BINS + (key_at(v, i + 1) >> shift)]++;
    }
    if (i < n) {
        hist[key_at(v, i) >> shift]++;
    }
}

/* Walks a level's histogram from the top bin down to the bin of the need-th largest key. */
static void cut_level(const uint32_t *hist, unsigned lvl, cut_t *c)
{
    uint32_t b = (1u << levels[lvl].width) - 1;
    size_t above = 0;

    while (b > 0 && above + hist[b] < c->need) {
        above += hist[b--];
    }
    c->prefix = (c->prefix << levels[lvl].width) | b;
    c->need -= above;
}

/* The cut of the @p need largest keys of src[0..n), 1 <= need <= n; levels from @p first on
 * (the cut so far in *c), each one a histogram pass over the source. */
static void select_levels(const void *src, size_t n, unsigned first, cut_t *c)
{
    uint32_t hist[MAX_BINS];

    for (unsigned lvl = first; lvl < NLEVELS; lvl++) {
        memset(hist, 0, sizeof(uint32_t) << levels[lvl].width);
        hist_level(src, n, lvl, c->prefix, hist);
        cut_level(hist, lvl, c);
    }
}

/* ---- Gathering candidates and writing the output ---- */

/* The threshold test runs on blocks of this many elements, one bit mask each. */
#define MASK_BLOCK 64

/* Appends (index, bits) of the elements of v[0..n) with key >= t to the candidates, as long as
 * there is room; returns how many there are now, counting those without room. */
static size_t gather(run_t *r, const float *v, size_t n, size_t base, uint32_t t, size_t have)
{
    for (size_t off = 0; off < n; off += MASK_BLOCK) {
        size_t len = n - off < MASK_BLOCK ? n - off : MASK_BLOCK;
        for (uint64_t m = r->isa->topk_mask(v + off, len, t); m != 0; m &= m - 1) {
            size_t i = off + (size_t)__builtin_ctzll(m);
            if (have < r->cap) {
                r->cidx[have] = (uint32_t)(base + i);
                r->cbits[have] = coll__f32_bits(v[i]);
            }
            have++;
        }
    }
    return have;
}

/* Takes element @p i (value bits @p bits) as output number @p j. */
static void take(run_t *r, size_t j, size_t i, uint32_t bits)
{
    r->a->indices[j] = (uint32_t)i;
    r->a->values[j] = coll__f32_from_bits(bits);
    if (r->a->residual != NULL) {
        r->a->residual[i] = 0.0f;
    }
}

/* Whether an element with @p key is sent: above the cut, or one of the first *ties at it. */
static int wanted(uint32_t key, const cut_t *c, size_t *ties)
{
    if (key > c->prefix) {
        return 1;
    }
    if (key == c->prefix && *ties > 0) {
        --*ties;
        return 1;
    }
    return 0;
}

/* Output from the @p nc gathered candidates, which hold every element at or above the cut. */
static void emit_candidates(run_t *r, size_t nc, cut_t c)
{
    size_t out = 0, ties = c.need;

    for (size_t j = 0; j < nc && out < r->a->k; j++) {
        if (wanted(coll__mag_key(r->cbits[j]), &c, &ties)) {
            take(r, out++, r->cidx[j], r->cbits[j]);
        }
    }
}

/* Output from a pass over all elements. */
static void emit_all(run_t *r, cut_t c)
{
    const size_t n = r->a->count, k = r->a->k;
    size_t out = 0, ties = c.need;

    for (size_t off = 0; off < n && out < k; off += MASK_BLOCK) {
        size_t len = n - off < MASK_BLOCK ? n - off : MASK_BLOCK;
        uint64_t m = r->isa->topk_mask(r->v + off, len, c.prefix);
        for (; m != 0 && out < k; m &= m - 1) {
            size_t i = off + (size_t)__builtin_ctzll(m);
            uint32_t bits = coll__f32_bits(r->v[i]);
            if (wanted(coll__mag_key(bits), &c, &ties)) {
                take(r, out++, i, bits);
            }
        }
    }
    r->info.passes++;
}

/* Exact selection among @p nc candidates known to hold the top k (nc >= k), then the output. */
static void finish_candidates(run_t *r, size_t nc)
{
    cut_t c = {0, r->a->k};

    r->info.candidates = nc;
    select_levels(r->cbits, nc, 0, &c);
    emit_candidates(r, nc, c);
}

/* ---- RADIX ---- */

/* A pass that builds the level-0 histogram of r->v, block by block, after e += g in the same
 * block when @p add (pass 1 of RADIX with a residual). */
static void pass_hist(run_t *r, int add, uint32_t *hist0)
{
    const coll_topk_args_t *a = r->a;
    uint32_t hist2[2 * MAX_BINS] = {0};

    for (size_t off = 0; off < a->count; off += BLOCK) {
        size_t len = a->count - off < BLOCK ? a->count - off : BLOCK;
        if (add) {
            r->isa->ef_add(a->grad + off, a->residual + off, len);
        }
        hist_top(r->v + off, len, hist2);
    }
    for (size_t b = 0; b < MAX_BINS; b++) {
        hist0[b] = hist2[b] + hist2[MAX_BINS + b];
    }
    r->info.passes++;
}

/* RADIX after the level-0 histogram of r->v: gather the elements at or above the k-th
 * largest's bin when they fit, else two more histogram passes and an output pass. */
static void radix_rest(run_t *r, const uint32_t *hist0)
{
    cut_t c = {0, r->a->k};

    r->info.method = COLL_TOPK_SELECT_RADIX;
    cut_level(hist0, 0, &c);
    size_t at_or_above = r->a->k - c.need + hist0[c.prefix];
    if (at_or_above <= r->cap) {
        size_t nc = gather(r, r->v, r->a->count, 0, c.prefix << levels[0].shift, 0);
        r->info.passes++;
        finish_candidates(r, nc);
        return;
    }
    select_levels(r->v, r->a->count, 1, &c);
    r->info.passes += NLEVELS - 1;
    emit_all(r, c);
}

static void run_radix(run_t *r)
{
    uint32_t hist0[MAX_BINS];

    pass_hist(r, r->a->residual != NULL, hist0);
    radix_rest(r, hist0);
}

/* ---- SAMPLED ---- */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The key of v = g + e (or g) at @p i, computed as the first pass will compute it. */
static uint32_t sample_key(const coll_topk_args_t *a, size_t i)
{
    float v = a->residual ? a->grad[i] + a->residual[i] : a->grad[i];
    return coll__mag_key(coll__f32_bits(v));
}

/*
 * A threshold that about twice k elements reach: with h = s * k / count sampled elements
 * expected above the k-th largest, the j-th largest sample with j = h + 4 sqrt(h) + 2 lies below
 * it unless at least j samples fall in the top k (for h = 16: Poisson tail 1e-5), and about
 * count * j / s elements reach it.
 */
static uint32_t sample_threshold(const coll_topk_args_t *a, uint32_t *keys, size_t s)
{
    uint64_t state = 0x5eed70b4c0ffee00ull ^ a->count ^ ((uint64_t)a->k << 32);
    double h = (double)s * (double)a->k / (double)a->count;
    double j = ceil(h + 4 * sqrt(h) + 2);
    cut_t c = {0, j >= (double)s ? s : (size_t)j};

    for (size_t i = 0; i < s; i++) {
        keys[i] = sample_key(a, (size_t)(((splitmix64(&state) >> 32) * a->count) >> 32));
    }
    select_levels(keys, s, 0, &c);
    return c.prefix;
}

/* Pass 1 of SAMPLED: e += g and gather v >= t, block by block. @return candidates found. */
static size_t first_pass_gather(run_t *r, uint32_t t)
{
    const coll_topk_args_t *a = r->a;
    size_t nc = 0;

    for (size_t off = 0; off < a->count; off += BLOCK) {
        size_t len = a->count - off < BLOCK ? a->count - off : BLOCK;
        if (a->residual != NULL) {
            r->isa->ef_add(a->grad + off, a->residual + off, len);
        }
        nc = gather(r, r->v + off, len, off, t, nc);
    }
    r->info.passes++;
    return nc;
}

static void run_sampled(run_t *r, size_t s)
{
    uint32_t hist0[MAX_BINS];

    r->info.method = COLL_TOPK_SELECT_SAMPLED;
    size_t nc = first_pass_gather(r, sample_threshold(r->a, r->cidx, s));
    if (nc >= r->a->k && nc <= r->cap) {
        finish_candidates(r, nc);
        return;
    }
    /* The sample missed: select over r->v, which the first pass completed. */
    pass_hist(r, 0, hist0);
    radix_rest(r, hist0);
}

/* ---- Driver ---- */

/* k == count: every element is sent, the residual becomes +0. */
static void take_all(run_t *r)
{
    const coll_topk_args_t *a = r->a;

    if (a->residual != NULL) {
        r->isa->ef_add(a->grad, a->residual, a->count);
    }
    memcpy(a->values, r->v, a->count * sizeof(float));
    for (size_t i = 0; i < a->count; i++) {
        a->indices[i] = (uint32_t)i;
    }
    if (a->residual != NULL) {
        memset(a->residual, 0, a->count * sizeof(float));
    }
    r->info.passes = 1;
}

/* Runs SAMPLED or RADIX for 0 < k < count. */
static void run_select(run_t *r)
{
    const coll_topk_args_t *a = r->a;
    size_t s = sample_size(a->count, a->k);
    int sampled = a->select == COLL_TOPK_SELECT_SAMPLED ||
                  (a->select == COLL_TOPK_SELECT_AUTO && a->k >= COLL_TOPK_SAMPLED_MIN_K &&
                   a->k <= a->count / COLL_TOPK_SAMPLED_MAX_DIV &&
                   r->scratch_bytes >= coll_topk_scratch_bytes(a->count, a->k));

    /* The sample needs s keys of scratch (reused for the candidates once t is known). */
    if (sampled && s <= r->scratch_bytes / sizeof(uint32_t)) {
        run_sampled(r, s);
    } else {
        run_radix(r);
    }
}

coll_status_t coll_topk_compress(const coll_topk_args_t *args)
{
    if (coll_topk_args_check(args) != COLL_OK) {
        return COLL_ERR_INVALID;
    }
    run_t r = {
        .isa = &coll__isa()->compress,
        .a = args,
        .v = args->residual != NULL ? args->residual : args->grad,
        .cidx = args->scratch,
        .scratch_bytes = args->scratch != NULL ? args->scratch_bytes : 0,
        .info = {.method = COLL_TOPK_SELECT_RADIX},
    };
    r.cap = r.scratch_bytes / (2 * sizeof(uint32_t));
    r.cbits = r.cidx != NULL ? r.cidx + r.cap : NULL;

    if (args->count == 0) {
        r.info.passes = 0; /* nothing to read, and no pointer to pass to memcpy */
    } else if (args->k == args->count) {
        take_all(&r);
    } else if (args->k == 0) {
        if (args->residual != NULL) {
            r.isa->ef_add(args->grad, args->residual, args->count);
            r.info.passes = 1;
        }
    } else {
        run_select(&r);
    }
    if (args->info != NULL) {
        *args->info = r.info;
    }
    return COLL_OK;
}

/* ---- Receiving ---- */

coll_status_t coll_topk_accumulate(const uint32_t *indices, const float *values, size_t k,
                                   float weight, float *acc, size_t count)
{
    if (k == 0) {
        return COLL_OK;
    }
    if (indices == NULL || values == NULL || acc == NULL) {
        return COLL_ERR_INVALID;
    }
    /* All checks before the first write, so that a malformed set changes nothing. */
    for (size_t j = 0; j < k; j++) {
        if (indices[j] >= count || (j > 0 && indices[j] <= indices[j - 1])) {
            return COLL_ERR_INVALID;
        }
    }
    for (size_t j = 0; j < k; j++) {
        acc[indices[j]] += weight * values[j];
    }
    return COLL_OK;
}

size_t coll_topk_merge(const uint32_t *a_idx, const float *a_val, size_t a_k,
                       const uint32_t *b_idx, const float *b_val, size_t b_k, uint32_t *out_idx,
                       float *out_val)
{
    size_t i = 0, j = 0, n = 0;

    while (i < a_k && j < b_k) {
        if (a_idx[i] < b_idx[j]) {
            out_idx[n] = a_idx[i];
            out_val[n++] = a_val[i++];
        } else if (b_idx[j] < a_idx[i]) {
            out_idx[n] = b_idx[j];
            out_val[n++] = b_val[j++];
        } else {
            out_idx[n] = a_idx[i];
            out_val[n++] = a_val[i++] + b_val[j++];
        }
    }
    for (; i < a_k; i++, n++) {
        out_idx[n] = a_idx[i];
        out_val[n] = a_val[i];
    }
    for (; j < b_k; j++, n++) {
        out_idx[n] = b_idx[j];
        out_val[n] = b_val[j];
    }
    return n;
}
