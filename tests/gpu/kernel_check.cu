/*
 * coll_cuda_kernel_check: the CUDA executor on a real device against the host's kernels.
 *
 *   coll_cuda_kernel_check [-m MODULE] [-q] [-b | -B] [-H]
 *     -m MODULE  the CUDA module to load (default: the one this build made)
 *     -q         quick: counts 0, 1 and 1023 only, no bandwidth
 *     -b         bandwidth only;  -B  no bandwidth
 *     -H         the checker's own test: the host's executor and memory in the device's place
 *                (every comparison runs, no device needed; unit.cuda_kernel_check_host)
 *
 * Loads the module as the daemon does (dlopen, coll_cuda_module_exec()), then runs every entry
 * of its table on device memory and the host's on host memory, for every dtype and operation
 * and the counts 0, 1, 1023 and 2^20 + 3 (check_*.c), and compares; checks the device's 16-bit
 * conversions against their integer forms for every float32 and float16 pattern; and measures
 * the reduction's bandwidth on 256 MiB buffers against the device's own copy bandwidth (the
 * goal: at least 80 %), printed, never a verdict. Prints one line per failure and a summary.
 * Exit status: 0 all equal; 1 a difference; 2 a setup error (module, memory); 77 no CUDA device
 * or driver (nothing run), as ctest's SKIP_RETURN_CODE takes it.
 */
#include <dlfcn.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "kernels/cuda/hd.h"
#include "kernels/cuda/module.h"
#include "tests/gpu/kernel_check.h"

#define MIB (1024.0 * 1024.0)

namespace {

/* Each float32 pattern through the conversion instructions and through the integer forms; each
 * float16 pattern widened both ways. Counts the differences. */
__global__ void conversions_kernel(unsigned long long *bad)
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    unsigned long long n = 0;

    for (uint64_t u = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; u < (1ull << 32);
         u += stride) {
        float f = coll_hd_f32_from_bits((uint32_t)u);
        n += coll_hd_f32_to_f16(f) != coll_hd_f32_to_f16_sw(f);
        if (u < 0x10000u) {
            uint32_t a = coll_hd_f32_bits(coll_hd_f16_to_f32((uint16_t)u));
            n += a != coll_hd_f32_bits(coll_hd_f16_to_f32_sw((uint16_t)u));
        }
    }
    if (n != 0) {
        atomicAdd(bad, n);
    }
}

void check_conversions(kc_t *kc)
{
    unsigned long long *d = (unsigned long long *)kc_dev(sizeof(*d)), bad = 0;

    cudaMemset(d, 0, sizeof(*d));
    conversions_kernel<<<1024, 256>>>(d);
    kc_down(&bad, d, sizeof(bad));
    kc_expect(kc, bad == 0, "16-bit conversions: %llu patterns differ from the integer forms",
              bad);
    kc_dev_free(d);
}

/* Milliseconds per call of @p body, queued @p reps times on @p s after one warm-up call. */
template <typename F> float time_ms(cudaStream_t s, int reps, F body)
{
    cudaEvent_t a, b;
    float ms = 0;

    body();
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a, s);
    for (int i = 0; i < reps; i++) {
        body();
    }
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms / reps;
}

/* The reduction of @p nsrc sources of @p dt into another buffer, 256 MiB each, in GB/s of
 * memory traffic (sources read, destination written), against @p copy_gbs. */
void reduce_bandwidth(kc_t *kc, cudaStream_t s, coll_exec_ctx_t *ctx, coll_dtype_t dt,
                      unsigned nsrc, void *const *buf, double copy_gbs)
{
    const size_t bytes = (size_t)256 << 20;
    const void *srcs[4] = {buf[1], buf[2], buf[3], buf[4]};
    coll_reduce_args_t a = {};

    a.dtype = dt;
    a.op = COLL_SUM;
    a.world_size = 1;
    a.dst = buf[0];
    a.src = srcs;
    a.nsrc = nsrc;
    a.count = bytes / kc_esize(dt);
    float ms = time_ms(s, 20, [&] { kc->dev->reduce_async(ctx, &a); });
    double gbs = (double)bytes * (nsrc + 1) / (ms * 1e6);
    printf("bandwidth: reduce %s sum, %u sources of 256 MiB: %.1f GB/s, %.1f %% of copy "
           "(goal 80 %%: %s)\n",
           dt == COLL_FLOAT32 ? "float32" : dt == COLL_BFLOAT16 ? "bfloat16" : "float16", nsrc,
           gbs, 100 * gbs / copy_gbs, gbs >= 0.8 * copy_gbs ? "met" : "below");
}

void bandwidth(kc_t *kc)
{
    const size_t bytes = (size_t)256 << 20;
    void *buf[5];
    cudaStream_t s;
    cudaDeviceProp prop;
    coll_exec_ctx_t ctx = {0, NULL};

    cudaGetDevice(&ctx.device);
    cudaGetDeviceProperties(&prop, ctx.device);
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    ctx.stream = s;
    for (int i = 0; i < 5; i++) {
        buf[i] = kc_dev(bytes);
        cudaMemset(buf[i], 0x3c, bytes);
    }
    float ms = time_ms(s, 20, [&] {
        cudaMemcpyAsync(buf[0], buf[1], bytes, cudaMemcpyDeviceToDevice, s);
    });
    double copy_gbs = 2.0 * bytes / (ms * 1e6);
    printf("bandwidth: %s, copy of 256 MiB: %.1f GB/s (read and write)\n", prop.name, copy_gbs);
    reduce_bandwidth(kc, s, &ctx, COLL_FLOAT32, 2, buf, copy_gbs);
    reduce_bandwidth(kc, s, &ctx, COLL_FLOAT32, 4, buf, copy_gbs);
    reduce_bandwidth(kc, s, &ctx, COLL_BFLOAT16, 2, buf, copy_gbs);
    reduce_bandwidth(kc, s, &ctx, COLL_FLOAT16, 2, buf, copy_gbs);
    kc_expect(kc, kc->dev->sync(&ctx) == COLL_OK, "bandwidth runs");
    for (int i = 0; i < 5; i++) {
        kc_dev_free(buf[i]);
    }
    cudaStreamDestroy(s);
}

/* The module's table, or the program ends (77 without a driver or device, 2 otherwise). */
const coll_exec_t *load(const char *path)
{
    char why[256] = "";
    void *m = dlopen(path, RTLD_NOW | RTLD_LOCAL);

    if (m == NULL) {
        fprintf(stderr, "kernel_check: cannot load the module: %s\n", dlerror());
        exit(2);
    }
    coll_cuda_module_exec_fn entry = (coll_cuda_module_exec_fn)dlsym(m, COLL_CUDA_MODULE_SYMBOL);
    const coll_exec_t *ex = entry != NULL ? entry(COLL_EXEC_ABI, NULL, why, sizeof(why)) : NULL;
    if (ex == NULL) {
        printf("kernel_check: the module refuses: %s\n", entry != NULL ? why : dlerror());
        exit(entry != NULL && strncmp(why, "no CUDA", 7) == 0 ? 77 : 2);
    }
    return ex;
}

int usage(const char *prog)
{
    fprintf(stderr, "usage: %s [-m MODULE] [-q] [-b | -B] [-H]\n", prog);
    return 2;
}

} // namespace

int main(int argc, char **argv)
{
    const char *module = COLL_KC_MODULE;
    int opt, bw = 1, checks = 1, devices = 0;
    kc_t kc = {};

    while ((opt = getopt(argc, argv, "m:qbBH")) != -1) {
        switch (opt) {
        case 'm': module = optarg; break;
        case 'q': kc.quick = 1, bw = 0; break;
        case 'b': checks = 0; break;
        case 'B': bw = 0; break;
        case 'H': kc_on_host = 1, bw = 0; break;
        default: return usage(argv[0]);
        }
    }
    cudaError_t e = kc_on_host ? cudaSuccess : cudaGetDeviceCount(&devices);
    if (!kc_on_host && (e != cudaSuccess || devices == 0)) {
        printf("kernel_check: no CUDA device (%s): skipped\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return 77;
    }
    kc.host = coll_exec_get(COLL_MEM_HOST);
    kc.dev = kc_on_host ? kc.host : load(module);
    if (checks && !kc_on_host) {
        check_conversions(&kc);
    }
    if (checks) {
        kc_check_copy(&kc);
        kc_check_reduce(&kc);
        kc_check_cast(&kc);
        kc_check_onebit(&kc);
        kc_check_topk(&kc);
        kc_check_lowrank(&kc);
        kc_check_optim(&kc);
    }
    if (bw) {
        bandwidth(&kc);
    }
    printf("kernel_check: %u checks, %u failed\n", kc.checks, kc.failures);
    return kc.failures == 0 ? 0 : 1;
}
