/*
 * A stand-in for the CUDA driver, built as libcuda.so.1 into a directory of its own, which the
 * tests put first on LD_LIBRARY_PATH: the fake below device/dev_cuda.c, so that the real device
 * layer's code (loading, entries by their versioned names, contexts, the conversion of CUresult)
 * runs where there is no GPU. Compiled against the toolkit's cuda.h, so its exported names are
 * the ones dev_cuda.c asks for (cuDeviceTotalMem_v2 ...).
 *
 * Its devices (FAKE_CUDA_DEVICES, default 1) hold host memory, as the layer's own fake does,
 * with the driver's rules where the layer could get them wrong: calls that need a context fail
 * with CUDA_ERROR_INVALID_CONTEXT unless one was pushed on the calling thread; a mapping is not
 * accessible until cuMemSetAccess; sizes are whole granules (2 MiB); an allocation larger than
 * FAKE_CUDA_MEM_LIMIT bytes (default 1 GiB), of device or of page-locked host memory, is out of
 * memory. FAKE_CUDA_INIT_ERROR=N makes cuInit answer N. fake_cuda_depth() tells a test how
 * many contexts its thread has pushed.
 *
 * Registered host memory (cuMemHostRegister, its device address FAKE_CUDA_DEVMAP_BIAS above its
 * host address) and the 64-bit stream memory operations on it (a write done at once, a wait
 * only checked for its address): a range is registered once, the stream operations reach only
 * registered words, FAKE_CUDA_MEMOP_ERROR=N makes both answer N (801: a driver without them).
 * These calls are recorded with their arguments (fake_libcuda.h: fake_cuda_calls()).
 */
#include <cuda.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_libcuda.h"

#define GRAN ((size_t)2 << 20)

struct CUstream_st {
    CUcontext ctx;
};

struct CUevent_st {
    int recorded;
};

static int inited;
static _Thread_local int depth;

int fake_cuda_depth(void)
{
    return depth;
}

static int ndev(void)
{
    const char *v = getenv("FAKE_CUDA_DEVICES");
    return v != NULL ? atoi(v) : 1;
}

static size_t mem_limit(void)
{
    const char *v = getenv("FAKE_CUDA_MEM_LIMIT");
    return v != NULL ? (size_t)strtoull(v, NULL, 10) : (size_t)1 << 30;
}

CUresult cuInit(unsigned int flags)
{
    const char *e = getenv("FAKE_CUDA_INIT_ERROR");

    if (e != NULL) {
        return (CUresult)atoi(e);
    }
    inited = 1;
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *v)
{
    *v = 13000;
    return CUDA_SUCCESS;
}

static const struct {
    CUresult r;
    const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
};

CUresult cuGetErrorName(CUresult r, const char **s)
{
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
        if (errors[i].r == r) {
            *s = errors[i].name;
            return CUDA_SUCCESS;
        }
    }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult r, const char **s)
{
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
        if (errors[i].r == r) {
            *s = errors[i].text;
            return CUDA_SUCCESS;
        }
    }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGetCount(int *n)
{
    if (!inited) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    *n = ndev();
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    if (ordinal < 0 || ordinal >= ndev()) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *d = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
    snprintf(name, (size_t)len, "Fake GPU %d", d);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9
         : a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR ? 0 : 1;
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice d)
{
    *bytes = (size_t)16 << 30;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice d)
{
    memset(uuid->bytes, 0, sizeof(uuid->bytes));
    memcpy(uuid->bytes, "fake-gpu", 8);
    uuid->bytes[15] = (char)d;
    return CUDA_SUCCESS;
}

/* Every pair of distinct devices are peers unless FAKE_CUDA_PEER=0. */
CUresult cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice peer)
{
    const char *v = getenv("FAKE_CUDA_PEER");

    if (d < 0 || d >= ndev() || peer < 0 || peer >= ndev()) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *can = d != peer && (v == NULL || atoi(v) != 0);
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    *c = (CUcontext)(uintptr_t)(0x1000 + d);
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext c)
{
    depth++;
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *c)
{
    depth--;
    return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *p,
                                       CUmemAllocationGranularity_flags f)
{
    if (depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *g = GRAN;
    return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *p,
                     unsigned long long flags)
{
    int fd;

    if (depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (size == 0 || size % GRAN != 0 || p->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        p->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        p->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (size > mem_limit()) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if ((fd = memfd_create("fake-cuda", MFD_CLOEXEC)) < 0 || ftruncate(fd, (off_t)size) < 0) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *h = (CUmemGenericAllocationHandle)fd + 1;
    return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
    close((int)(h - 1));
    return CUDA_SUCCESS;
}

CUresult cuMemExportToShareableHandle(void *sh, CUmemGenericAllocationHandle h,
                                      CUmemAllocationHandleType t, unsigned long long flags)
{
    int fd = dup((int)(h - 1));

    if (t != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || fd < 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *(int *)sh = fd;
    return CUDA_SUCCESS;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *os,
                                        CUmemAllocationHandleType t)
{
    int fd;

    if (depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (t != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || (fd = dup((int)(uintptr_t)os)) < 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *h = (CUmemGenericAllocationHandle)fd + 1;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
                             unsigned long long flags)
{
    uint8_t *p;

    if (depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    p = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ptr = ((uintptr_t)p + align - 1) / align * align;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    munmap((void *)(uintptr_t)ptr, size);
    return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                  unsigned long long flags)
{
    /* Not accessible until cuMemSetAccess, as with the driver. */
    void *p = mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED,
                   (int)(h - 1), (off_t)offset);

    return p == MAP_FAILED ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    mmap((void *)(uintptr_t)ptr, size, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return CUDA_SUCCESS;
}

static void record(const char *fn, void *stream, uint64_t addr, uint64_t arg, unsigned flags);

/* Recorded (its flags the device it grants). */
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    if (depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    record(__func__, NULL, ptr, size, count == 1 ? (unsigned)desc->location.id : ~0u);
    if (count != 1 || desc->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        desc->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE ||
        mprotect((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE) < 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
    if (depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *s = calloc(1, sizeof(**s));
    return *s != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuStreamDestroy(CUstream s)
{
    free(s);
    return CUDA_SUCCESS;
}

CUresult cuStreamGetCtx(CUstream s, CUcontext *c)
{
    *c = (CUcontext)(uintptr_t)0x1000;
    return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream s)
{
    return CUDA_SUCCESS;
}

CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
    return depth == 0 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    if (depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

/* Page-locked memory: ordinary memory here, with the driver's rules on contexts and sizes. */
CUresult cuMemHostAlloc(void **pp, size_t size, unsigned int flags)
{
    if (depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (size > mem_limit()) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return (*pp = malloc(size)) != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemFreeHost(void *p)
{
    if (depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    free(p);
    return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent *e, unsigned int flags)
{
    if (depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *e = calloc(1, sizeof(**e));
    return *e != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuEventDestroy(CUevent e)
{
    free(e);
    return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent e, CUstream s)
{
    if (depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    e->recorded = 1;
    return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent e)
{
    return CUDA_SUCCESS;
}

/* Registered host ranges, and the calls on them as a test wants to see them. */
static struct {
    uintptr_t p;
    size_t bytes;
    unsigned flags;
} regs[8];
static fake_cuda_call_t calls[FAKE_CUDA_CALLS_MAX];
static int ncalls;

const fake_cuda_call_t *fake_cuda_calls(int *n)
{
    *n = ncalls;
    return calls;
}

void fake_cuda_calls_reset(void)
{
    ncalls = 0;
}

static void record(const char *fn, void *stream, uint64_t addr, uint64_t arg, unsigned flags)
{
    if (ncalls < FAKE_CUDA_CALLS_MAX) {
        calls[ncalls++] = (fake_cuda_call_t){fn, stream, addr, arg, flags};
    }
}

/* The registration holding [p, p + bytes), or -1. */
static int reg_of(uintptr_t p, size_t bytes)
{
    for (int i = 0; i < (int)(sizeof(regs) / sizeof(regs[0])); i++) {
        if (regs[i].bytes != 0 && p >= regs[i].p && p + bytes <= regs[i].p + regs[i].bytes) {
            return i;
        }
    }
    return -1;
}

CUresult cuMemHostRegister(void *p, size_t bytes, unsigned int flags)
{
    int free_slot = -1;

    record(__func__, NULL, (uintptr_t)p, bytes, flags);
    if (depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (p == NULL || bytes == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (bytes > mem_limit()) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (int i = 0; i < (int)(sizeof(regs) / sizeof(regs[0])); i++) {
        if (regs[i].bytes == 0) {
            free_slot = free_slot < 0 ? i : free_slot;
        } else if ((uintptr_t)p < regs[i].p + regs[i].bytes && regs[i].p < (uintptr_t)p + bytes) {
            return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    }
    if (free_slot < 0) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    regs[free_slot].p = (uintptr_t)p;
    regs[free_slot].bytes = bytes;
    regs[free_slot].flags = flags;
    return CUDA_SUCCESS;
}

CUresult cuMemHostGetDevicePointer(CUdeviceptr *d, void *p, unsigned int flags)
{
    int i = reg_of((uintptr_t)p, 1);

    record(__func__, NULL, (uintptr_t)p, 0, flags);
    if (depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (flags != 0 || i < 0 || !(regs[i].flags & CU_MEMHOSTREGISTER_DEVICEMAP)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *d = (uintptr_t)p + FAKE_CUDA_DEVMAP_BIAS;
    return CUDA_SUCCESS;
}

CUresult cuMemHostUnregister(void *p)
{
    int i = reg_of((uintptr_t)p, 1);

    record(__func__, NULL, (uintptr_t)p, 0, 0);
    if (depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (i < 0 || regs[i].p != (uintptr_t)p) {
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    }
    regs[i].bytes = 0;
    return CUDA_SUCCESS;
}

/* A stream memory operation's word: @p addr in registered memory, in host terms into *w_p. */
static CUresult memop_word(CUdeviceptr addr, uint64_t **w_p)
{
    const char *e = getenv("FAKE_CUDA_MEMOP_ERROR");
    uintptr_t p = (uintptr_t)(addr - FAKE_CUDA_DEVMAP_BIAS);

    if (e != NULL) {
        return (CUresult)atoi(e);
    }
    if (depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (addr < FAKE_CUDA_DEVMAP_BIAS || p % 8 != 0 || reg_of(p, 8) < 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *w_p = (uint64_t *)p;
    return CUDA_SUCCESS;
}

CUresult cuStreamWaitValue64(CUstream s, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
    uint64_t *w;

    record(__func__, s, addr, value, flags);
    return memop_word(addr, &w);
}

CUresult cuStreamWriteValue64(CUstream s, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
    uint64_t *w;
    CUresult r;

    record(__func__, s, addr, value, flags);
    if ((r = memop_word(addr, &w)) == CUDA_SUCCESS) {
        __atomic_store_n(w, value, __ATOMIC_RELEASE);
    }
    return r;
}
