/*
 * The CUDA executor's TopK (exec.h: topk_scratch_bytes, topk_compress, topk_accumulate): the
 * host's exact selection (kernels/cpu/topk.h: the k largest |v|, ties to the lower index,
 * indices ascending, the residual of the sent elements +0), found another way. A radix select
 * on the keys, level by level as the host's RADIX (histograms of 11, 10 and 10 bits, each cut
 * where the host's walk stops, found by a scan), gives the k-th largest key t and how many keys
 * equal to it are sent; an ordered compaction then writes the output: tiles of TILE elements count their
 * keys above and at t, a scan gives each tile's offsets, and each tile's threads scan their
 * elements in index order, so that element i goes to position
 * (keys above t before i) + min(keys at t before i, need) (elem_compress.h). Five passes over the
 * data (the first also adds the residual), none of them sorts.
 */
#include <cub/block/block_scan.cuh>

#include "kernels/cuda/rt.h"

#include "kernels/cuda/cuda_entries.h"
#include "kernels/cuda/elem_compress.h"

namespace {

/* Elements per thread and per tile of the compaction. */
constexpr unsigned ITEMS = 16;
constexpr size_t TILE = (size_t)COLL__CUDA_THREADS * ITEMS;

/* The cut as the walks left it: the k-th largest key so far, and the keys at it to send. */
struct Cut {
    uint32_t prefix;
    uint32_t pad;
    uint64_t need;
};

/* The scratch: the histogram, the cut, two words per tile (packed counts, then offsets). */
constexpr size_t HIST_BYTES = COLL_HD_TOPK_BINS * sizeof(uint32_t);
constexpr size_t TILES_AT = HIST_BYTES + sizeof(Cut);

typedef cub::BlockScan<unsigned long long, COLL__CUDA_THREADS> Scan;

/* Threads of the cut: two bins each. */
constexpr unsigned CUT_THREADS = COLL_HD_TOPK_BINS / 2;
typedef cub::BlockScan<unsigned long long, CUT_THREADS> CutScan;

__device__ size_t tid()
{
    return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ size_t nthreads()
{
    return (size_t)gridDim.x * blockDim.x;
}

__global__ void __launch_bounds__(COLL__CUDA_THREADS) ef_kernel(const float *g, float *e, size_t n)
{
    for (size_t i = tid(); i < n; i += nthreads()) {
        e[i] = coll_hd_ef_add(g[i], e[i]);
    }
}

/* Level @p lvl's histogram of the keys with the cut's prefix; with @p g, v = g + e is first
 * stored in e (level 0 only, where every key has the empty prefix). */
__global__ void __launch_bounds__(COLL__CUDA_THREADS)
hist_kernel(const float *g, float *v, size_t n, unsigned lvl, const Cut *cut, uint32_t *hist)
{
    __shared__ uint32_t h[COLL_HD_TOPK_BINS];
    const uint32_t prefix = lvl == 0 ? 0 : cut->prefix;

    for (unsigned b = threadIdx.x; b < COLL_HD_TOPK_BINS; b += blockDim.x) {
        h[b] = 0;
    }
    __syncthreads();
    for (size_t i = tid(); i < n; i += nthreads()) {
        float x = v[i];
        if (g != NULL) {
            x = coll_hd_ef_add(g[i], x);
            v[i] = x;
        }
        uint32_t bin;
        if (coll_hd_topk_bin(coll_hd_mag_key(x), lvl, prefix, &bin)) {
            atomicAdd(&h[bin], 1u);
        }
    }
    __syncthreads();
    for (unsigned b = threadIdx.x; b < COLL_HD_TOPK_BINS; b += blockDim.x) {
        if (h[b] != 0) {
            atomicAdd(&hist[b], h[b]);
        }
    }
}

/* Level @p lvl's cut from its histogram: each thread takes two bins, from the top down, an
 * inclusive scan gives the keys at and above each bin, and the one bin where they reach need
 * (coll_hd_topk_cut_at()) extends the cut. Level 0 starts it at k. */
__global__ void __launch_bounds__(CUT_THREADS) cut_kernel(const uint32_t *hist, unsigned lvl,
                                                        uint64_t k, Cut *cut)
{
    __shared__ typename CutScan::TempStorage tmp;
    const uint32_t prefix = lvl == 0 ? 0 : cut->prefix;
    const uint64_t need = lvl == 0 ? k : cut->need;
    const uint32_t b0 = COLL_HD_TOPK_BINS - 1 - 2 * threadIdx.x, b1 = b0 - 1;
    unsigned long long incl[2] = {hist[b0], hist[b1]};
    unsigned width;

    (void)coll_hd_topk_level(lvl, &width);
    CutScan(tmp).InclusiveSum(incl, incl);
    const unsigned long long above[2] = {incl[0] - hist[b0], incl[0]};
    __syncthreads(); /* every thread read the cut before one writes it */
    for (int j = 0; j < 2; j++) {
        if (coll_hd_topk_cut_at(incl[j], above[j], need)) {
            cut->prefix = (prefix << width) | (j == 0 ? b0 : b1);
            cut->need = need - above[j];
        }
    }
}

/* Keys above and at t among the elements [first, first + ITEMS) of this thread, packed: above
 * in the high word, at in the low word (each sum stays below 2^32: count < 2^32). */
__device__ unsigned long long thread_counts(const float *v, size_t n, size_t first, uint32_t t)
{
    unsigned long long c = 0;

    for (unsigned j = 0; j < ITEMS && first + j < n; j++) {
        uint32_t key = coll_hd_mag_key(v[first + j]);
        c += key > t ? 1ull << 32 : key == t ? 1ull : 0ull;
    }
    return c;
}

__global__ void __launch_bounds__(COLL__CUDA_THREADS)
count_kernel(const float *v, size_t n, const Cut *cut, unsigned long long *tiles)
{
    __shared__ typename Scan::TempStorage tmp;
    unsigned long long c = thread_counts(v, n, blockIdx.x * TILE + threadIdx.x * ITEMS,
                                         cut->prefix);
    unsigned long long total;

    Scan(tmp).ExclusiveSum(c, c, total);
    if (threadIdx.x == 0) {
        tiles[blockIdx.x] = total;
    }
}

/* One block: offs[b] = the packed counts of the tiles before b. */
__global__ void __launch_bounds__(COLL__CUDA_THREADS)
scan_kernel(const unsigned long long *tiles, size_t ntiles, unsigned long long *offs)
{
    __shared__ typename Scan::TempStorage tmp;
    unsigned long long carry = 0;

    for (size_t base = 0; base < ntiles; base += COLL__CUDA_THREADS) {
        size_t b = base + threadIdx.x;
        unsigned long long c = b < ntiles ? tiles[b] : 0, total;
        Scan(tmp).ExclusiveSum(c, c, total);
        if (b < ntiles) {
            offs[b] = carry + c;
        }
        carry += total;
        __syncthreads();
    }
}

__global__ void __launch_bounds__(COLL__CUDA_THREADS)
select_kernel(const float *v, size_t n, const Cut *cut, const unsigned long long *offs,
              uint32_t *indices, float *values, float *residual)
{
    __shared__ typename Scan::TempStorage tmp;
    const uint32_t t = cut->prefix;
    const uint64_t need = cut->need;
    const size_t first = blockIdx.x * TILE + threadIdx.x * ITEMS;
    unsigned long long before = thread_counts(v, n, first, t);

    Scan(tmp).ExclusiveSum(before, before);
    before += offs[blockIdx.x];
    uint64_t gt = before >> 32, eq = before & 0xffffffffull;
    for (unsigned j = 0; j < ITEMS && first + j < n; j++) {
        size_t i = first + j;
        float x = v[i];
        uint32_t key = coll_hd_mag_key(x);
        if (coll_hd_topk_taken(key, t, eq, need)) {
            uint64_t pos = coll_hd_topk_pos(gt, eq, need);
            indices[pos] = (uint32_t)i;
            values[pos] = x;
            if (residual != NULL) {
                residual[i] = 0.0f;
            }
        }
        gt += key > t;
        eq += key == t;
    }
}

__global__ void __launch_bounds__(COLL__CUDA_THREADS) iota_kernel(uint32_t *idx, size_t n)
{
    for (size_t i = tid(); i < n; i += nthreads()) {
        idx[i] = (uint32_t)i;
    }
}

__global__ void __launch_bounds__(COLL__CUDA_THREADS)
check_kernel(const uint32_t *idx, size_t k, size_t count, unsigned *bad)
{
    for (size_t j = tid(); j < k; j += nthreads()) {
        if (idx[j] >= count || (j > 0 && idx[j] <= idx[j - 1])) {
            atomicOr(bad, 1u);
        }
    }
}

__global__ void __launch_bounds__(COLL__CUDA_THREADS)
acc_kernel(const uint32_t *idx, const float *val, size_t k, float weight, float *acc,
           const unsigned *bad)
{
    if (*bad != 0) {
        return;
    }
    for (size_t j = tid(); j < k; j += nthreads()) {
        acc[idx[j]] = coll_hd_topk_acc(acc[idx[j]], weight, val[j]);
    }
}

size_t tiles_of(size_t count)
{
    return (count + TILE - 1) / TILE;
}

size_t scratch_bytes(size_t count)
{
    size_t b = TILES_AT + 2 * tiles_of(count) * sizeof(unsigned long long);
    return (b + 255) & ~(size_t)255;
}

/* The radix select, levels 0 to 2, into the scratch's cut; v is e after level 0 with e. */
void select_cut(coll__cuda_run_t *r, const coll_topk_args_t *a, char *scratch)
{
    uint32_t *hist = (uint32_t *)scratch;
    Cut *cut = (Cut *)(scratch + HIST_BYTES);
    const float *v = a->residual != NULL ? a->residual : a->grad;
    unsigned b = coll__cuda_blocks(r, a->count);

    for (unsigned lvl = 0; lvl < COLL_HD_TOPK_LEVELS; lvl++) {
        cudaMemsetAsync(hist, 0, HIST_BYTES, r->stream);
        const float *g = lvl == 0 && a->residual != NULL ? a->grad : NULL;
        hist_kernel<<<b, COLL__CUDA_THREADS, 0, r->stream>>>(g, (float *)v, a->count, lvl, cut,
                                                            hist);
        cut_kernel<<<1, CUT_THREADS, 0, r->stream>>>(hist, lvl, a->k, cut);
    }
}

/* 0 < k < count: the selection, then the compaction. */
coll_status_t run_select(coll__cuda_run_t *r, const coll_topk_args_t *a)
{
    const size_t need = scratch_bytes(a->count), ntiles = tiles_of(a->count);
    char *own = NULL, *s = (char *)a->scratch;

    if (s == NULL || a->scratch_bytes < need || !coll__cuda_aligned(s, 16)) {
        coll_status_t st = coll__cuda_temp(r, need, (void **)&own);
        if (st != COLL_OK) {
            return st;
        }
        s = own;
    }
    const Cut *cut = (const Cut *)(s + HIST_BYTES);
    unsigned long long *tiles = (unsigned long long *)(s + TILES_AT), *offs = tiles + ntiles;
    const float *v = a->residual != NULL ? a->residual : a->grad;

    select_cut(r, a, s);
    count_kernel<<<(unsigned)ntiles, COLL__CUDA_THREADS, 0, r->stream>>>(v, a->count, cut, tiles);
    scan_kernel<<<1, COLL__CUDA_THREADS, 0, r->stream>>>(tiles, ntiles, offs);
    select_kernel<<<(unsigned)ntiles, COLL__CUDA_THREADS, 0, r->stream>>>(
        v, a->count, cut, offs, a->indices, a->values, a->residual);
    coll__cuda_temp_free(r, own);
    return COLL_OK;
}

/* k == count: every element sent, the residual +0. */
coll_status_t take_all(coll__cuda_run_t *r, const coll_topk_args_t *a)
{
    const float *v = a->residual != NULL ? a->residual : a->grad;

    coll__cuda_ef_add(r, a->grad, a->residual, a->count);
    cudaMemcpyAsync(a->values, v, a->count * sizeof(float), cudaMemcpyDefault, r->stream);
    iota_kernel<<<coll__cuda_blocks(r, a->count), COLL__CUDA_THREADS, 0, r->stream>>>(a->indices,
                                                                                    a->count);
    if (a->residual != NULL) {
        cudaMemsetAsync(a->residual, 0, a->count * sizeof(float), r->stream);
    }
    return COLL_OK;
}

coll_status_t compress(coll__cuda_run_t *r, const coll_topk_args_t *a, unsigned *passes)
{
    if (a->k == a->count) {
        *passes = 1;
        return take_all(r, a);
    }
    if (a->k == 0) {
        *passes = a->residual != NULL;
        coll__cuda_ef_add(r, a->grad, a->residual, a->count);
        return COLL_OK;
    }
    *passes = 5;
    return run_select(r, a);
}

} // namespace

extern "C" void coll__cuda_ef_add(coll__cuda_run_t *r, const float *g, float *e, size_t n)
{
    if (e != NULL && n > 0) {
        ef_kernel<<<coll__cuda_blocks(r, n), COLL__CUDA_THREADS, 0, r->stream>>>(g, e, n);
    }
}

extern "C" size_t coll__cuda_topk_scratch_bytes(size_t count, size_t k)
{
    if (count == 0 || k == 0 || k >= count || count > COLL_TOPK_MAX_COUNT) {
        return 0;
    }
    return scratch_bytes(count);
}

extern "C" coll_status_t coll__cuda_topk_compress(const coll_topk_args_t *a)
{
    coll__cuda_run_t r;
    unsigned passes = 0;
    coll_status_t st = coll_topk_args_check(a);

    if (st != COLL_OK || a->count == 0) {
        if (st == COLL_OK && a->info != NULL) {
            *a->info = (coll_topk_info_t){COLL_TOPK_SELECT_RADIX, 0, 0};
        }
        return st;
    }
    st = coll__cuda_begin(&r, a->grad);
    if (st == COLL_OK) {
        st = coll__cuda_end(&r, compress(&r, a, &passes));
    }
    if (st == COLL_OK && a->info != NULL) {
        *a->info = (coll_topk_info_t){COLL_TOPK_SELECT_RADIX, passes, 0};
    }
    return st;
}

extern "C" coll_status_t coll__cuda_topk_accumulate(const uint32_t *indices, const float *values,
                                                    size_t k, float weight, float *acc,
                                                    size_t count)
{
    coll__cuda_run_t r;
    unsigned *bad = NULL, flag = 0;

    if (k == 0) {
        return COLL_OK;
    }
    if (indices == NULL || values == NULL || acc == NULL) {
        return COLL_ERR_INVALID;
    }
    coll_status_t st = coll__cuda_begin(&r, acc);
    if (st != COLL_OK) {
        return st;
    }
    st = coll__cuda_temp(&r, sizeof(*bad), (void **)&bad);
    if (st == COLL_OK) {
        unsigned b = coll__cuda_blocks(&r, k);
        cudaMemsetAsync(bad, 0, sizeof(*bad), r.stream);
        check_kernel<<<b, COLL__CUDA_THREADS, 0, r.stream>>>(indices, k, count, bad);
        acc_kernel<<<b, COLL__CUDA_THREADS, 0, r.stream>>>(indices, values, k, weight, acc, bad);
        st = coll__cuda_fetch(&r, &flag, bad, sizeof(flag));
    }
    coll__cuda_temp_free(&r, bad);
    st = coll__cuda_end(&r, st);
    return st == COLL_OK && flag != 0 ? COLL_ERR_INVALID : st;
}
