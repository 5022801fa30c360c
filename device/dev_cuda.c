/*
 * The device layer over CUDA's driver API (dev.h), loaded at run time: libcuda.so.1 is opened
 * with dlopen and its entries resolved by name, so nothing links against the driver and a
 * machine without one runs everything else. Compiled only with COLL_WITH_CUDA (cuda.h gives the
 * types and, through its macros, each entry's versioned name: cuDeviceTotalMem is
 * cuDeviceTotalMem_v2). The driver's CUresult becomes a coll_status_t here, once.
 *
 * Pools use the virtual memory management API (cuMemCreate with POSIX file-descriptor handles,
 * cuMemExportToShareableHandle, cuMemImportFromShareableHandle, cuMemAddressReserve, cuMemMap,
 * cuMemSetAccess), as NVIDIA's memMapIPCDrv sample shares memory between processes; never
 * managed memory. Words the host and a stream share (stream_wait_word, stream_write_word) are
 * host memory registered with cuMemHostRegister and waited for or written with the driver's
 * 64-bit stream memory operations. Each device's primary context is retained on first use and
 * kept for the life of the process (the context the CUDA runtime, and so a framework, uses
 * too); a call that needs a context pushes it and pops it again, so the caller's current
 * context is left as it was.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "device/dev.h"

/* Every driver entry used, by its name in cuda.h (a macro there where the entry is versioned). */
#define CU_ENTRIES(X)                                                                              \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString)                         \
    X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute)                 \
    X(cuDeviceTotalMem) X(cuDeviceGetUuid) X(cuDevicePrimaryCtxRetain) X(cuCtxPushCurrent)        \
    X(cuCtxPopCurrent)                                                                             \
    X(cuMemGetAllocationGranularity) X(cuMemCreate) X(cuMemRelease)                               \
    X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle) X(cuMemAddressReserve)      \
    X(cuMemAddressFree) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuStreamCreate)             \
    X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamWaitEvent) X(cuStreamGetCtx)              \
    X(cuMemcpyAsync) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuEventCreate) X(cuEventDestroy)       \
    X(cuEventRecord) X(cuEventQuery) X(cuMemHostRegister) X(cuMemHostGetDevicePointer)            \
    X(cuMemHostUnregister) X(cuStreamWaitValue64) X(cuStreamWriteValue64)                     \
    X(cuDeviceCanAccessPeer)

#define CU_STR_(x) #x
#define CU_STR(x) CU_STR_(x)

static struct {
#define CU_FIELD(f) __typeof__(&f) f;
    CU_ENTRIES(CU_FIELD)
#undef CU_FIELD
} cu;

static int ndevices;
static CUcontext contexts[COLL_DEV_MAX];
static pthread_mutex_t contexts_lock = PTHREAD_MUTEX_INITIALIZER;

/* The boundary: a CUresult becomes a status, and the call and the driver's words the calling
 * thread's coll_dev_error(). */
static coll_status_t cu_fail(CUresult r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static coll_status_t cu_fail(CUresult r, const char *fmt, ...)
{
    const char *name = NULL, *text = NULL;
    char call[160];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(call, sizeof(call), fmt, ap);
    va_end(ap);
    cu.cuGetErrorName(r, &name);
    cu.cuGetErrorString(r, &text);
    coll__dev_fail(COLL_ERR_IO, "%s: %s: %s", call, name ? name : "CUDA_ERROR_UNKNOWN",
                   text ? text : "unknown error");
    switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY:
        return COLL_ERR_NOMEM;
    case CUDA_ERROR_NOT_SUPPORTED:
        return COLL_ERR_UNSUPPORTED;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_INVALID_HANDLE:
        return COLL_ERR_INVALID;
    default:
        return COLL_ERR_IO;
    }
}

#define CU_TRY(expr, ...)                                                                          \
    do {                                                                                           \
        CUresult r_ = (expr);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            return cu_fail(r_, __VA_ARGS__);                                                       \
        }                                                                                          \
    } while (0)

/* Push @p dev's primary context on this thread (retained the first time); leave() pops it. */
static coll_status_t enter(int dev)
{
    CUdevice d;
    CUresult r = CUDA_SUCCESS;

    if (dev < 0 || dev >= ndevices) {
        return coll__dev_fail(COLL_ERR_INVALID, "no CUDA device %d (%d present)", dev, ndevices);
    }
    pthread_mutex_lock(&contexts_lock);
    if (contexts[dev] == NULL && (r = cu.cuDeviceGet(&d, dev)) == CUDA_SUCCESS) {
        r = cu.cuDevicePrimaryCtxRetain(&contexts[dev], d);
    }
    pthread_mutex_unlock(&contexts_lock);
    CU_TRY(r, "retaining the primary context of device %d", dev);
    CU_TRY(cu.cuCtxPushCurrent(contexts[dev]), "cuCtxPushCurrent(device %d)", dev);
    return COLL_OK;
}

/* The driver's stream of @p s: NULL is the default stream (the legacy NULL stream, as a
 * framework's default stream of handle 0 is), said explicitly. */
static CUstream cu_stream(coll_dev_stream_t s)
{
    return s != NULL ? (CUstream)s : CU_STREAM_LEGACY;
}

/* A stream's own context pushed on this thread (a stream may come from elsewhere; the default
 * stream's is the calling thread's current context). */
static coll_status_t enter_stream(coll_dev_stream_t s)
{
    CUcontext c;

    CU_TRY(cu.cuStreamGetCtx(cu_stream(s), &c), "cuStreamGetCtx");
    CU_TRY(cu.cuCtxPushCurrent(c), "cuCtxPushCurrent(a stream's context)");
    return COLL_OK;
}

/* Pop what enter() pushed; @return @p r, the call made in between. */
static CUresult leave(CUresult r)
{
    cu.cuCtxPopCurrent(NULL);
    return r;
}

static int cuda_count(void)
{
    return ndevices;
}

static coll_status_t cuda_info(int dev, coll_dev_info_t *info)
{
    CUdevice d;
    CUuuid uuid;
    size_t mem;
    int vmm = 0, fds = 0;

    memset(info, 0, sizeof(*info));
    CU_TRY(cu.cuDeviceGet(&d, dev), "cuDeviceGet(%d)", dev);
    CU_TRY(cu.cuDeviceGetName(info->name, (int)sizeof(info->name), d), "cuDeviceGetName(%d)", dev);
    CU_TRY(cu.cuDeviceTotalMem(&mem, d), "cuDeviceTotalMem(%d)", dev);
    CU_TRY(cu.cuDeviceGetUuid(&uuid, d), "cuDeviceGetUuid(%d)", dev);
    CU_TRY(cu.cuDeviceGetAttribute(&info->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                   d), "compute capability of device %d", dev);
    CU_TRY(cu.cuDeviceGetAttribute(&info->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                   d), "compute capability of device %d", dev);
    CU_TRY(cu.cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                   d), "virtual memory management of device %d", dev);
    CU_TRY(cu.cuDeviceGetAttribute(
               &fds, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, d),
           "file-descriptor handles of device %d", dev);
    info->mem_bytes = mem;
    memcpy(info->uuid, uuid.bytes, COLL_DEV_UUID_BYTES);
    info->shareable = vmm && fds;
    return COLL_OK;
}

/* Pinned device memory on @p dev, exportable as a file descriptor. */
static CUmemAllocationProp prop_of(int dev)
{
    CUmemAllocationProp p;

    memset(&p, 0, sizeof(p));
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev;
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return p;
}

static coll_status_t cuda_granularity(int dev, size_t *gran_p)
{
    CUmemAllocationProp p = prop_of(dev);
    coll_status_t st = enter(dev);

    if (st != COLL_OK) {
        return st;
    }
    CU_TRY(leave(cu.cuMemGetAllocationGranularity(gran_p, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM)),
           "cuMemGetAllocationGranularity(device %d)", dev);
    return COLL_OK;
}

static coll_status_t cuda_mem_create(int dev, size_t bytes, coll_dev_mem_t *mem_p)
{
    CUmemAllocationProp p = prop_of(dev);
    CUmemGenericAllocationHandle h;
    coll_status_t st = enter(dev);

    if (st != COLL_OK) {
        return st;
    }
    CU_TRY(leave(cu.cuMemCreate(&h, bytes, &p, 0)), "cuMemCreate(device %d, %zu bytes)", dev,
           bytes);
    *mem_p = h;
    return COLL_OK;
}

static coll_status_t cuda_mem_export(coll_dev_mem_t mem, int *fd_p)
{
    int fd = -1;

    CU_TRY(cu.cuMemExportToShareableHandle(&fd, mem, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
           "cuMemExportToShareableHandle");
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    *fd_p = fd;
    return COLL_OK;
}

static coll_status_t cuda_mem_import(int dev, int fd, coll_dev_mem_t *mem_p)
{
    CUmemGenericAllocationHandle h;
    coll_status_t st = enter(dev);

    if (st != COLL_OK) {
        return st;
    }
    CU_TRY(leave(cu.cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd,
                                                   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)),
           "cuMemImportFromShareableHandle(device %d, fd %d)", dev, fd);
    *mem_p = h;
    return COLL_OK;
}

static void cuda_mem_release(coll_dev_mem_t mem)
{
    if (mem != 0) {
        cu.cuMemRelease(mem);
    }
}

static coll_status_t cuda_va_reserve(int dev, size_t bytes, size_t align, uint64_t *va_p)
{
    CUdeviceptr va;
    coll_status_t st = enter(dev);

    if (st != COLL_OK) {
        return st;
    }
    CU_TRY(leave(cu.cuMemAddressReserve(&va, bytes, align, 0, 0)),
           "cuMemAddressReserve(%zu bytes, aligned to %zu)", bytes, align);
    *va_p = va;
    return COLL_OK;
}

static void cuda_va_free(uint64_t va, size_t bytes)
{
    cu.cuMemAddressFree(va, bytes);
}

/* Let device @p dev read and write [@p va, @p va + @p bytes); the devices that had access keep
 * it (cuMemSetAccess changes only the locations it is given). */
static CUresult set_access(int dev, uint64_t va, size_t bytes)
{
    CUmemAccessDesc access;

    memset(&access, 0, sizeof(access));
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = dev;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return cu.cuMemSetAccess(va, bytes, &access, 1);
}

static coll_status_t cuda_map(int dev, uint64_t va, size_t bytes, coll_dev_mem_t mem)
{
    coll_status_t st = enter(dev);
    CUresult r;

    if (st != COLL_OK) {
        return st;
    }
    if ((r = cu.cuMemMap(va, bytes, 0, mem, 0)) != CUDA_SUCCESS) {
        return cu_fail(leave(r), "cuMemMap(%zu bytes at %#llx)", bytes, (unsigned long long)va);
    }
    if ((r = set_access(dev, va, bytes)) != CUDA_SUCCESS) {
        cu.cuMemUnmap(va, bytes);
        return cu_fail(leave(r), "cuMemSetAccess(device %d, %zu bytes at %#llx)", dev, bytes,
                       (unsigned long long)va);
    }
    leave(CUDA_SUCCESS);
    return COLL_OK;
}

static coll_status_t cuda_peer_access(int dev, int peer, int *can_p)
{
    CUdevice d, p;

    if (dev < 0 || dev >= ndevices || peer < 0 || peer >= ndevices) {
        return coll__dev_fail(COLL_ERR_INVALID, "peer access of CUDA device %d to %d (%d "
                              "present)", dev, peer, ndevices);
    }
    if (dev == peer) {
        *can_p = 1;
        return COLL_OK;
    }
    CU_TRY(cu.cuDeviceGet(&d, dev), "cuDeviceGet(%d)", dev);
    CU_TRY(cu.cuDeviceGet(&p, peer), "cuDeviceGet(%d)", peer);
    CU_TRY(cu.cuDeviceCanAccessPeer(can_p, d, p), "cuDeviceCanAccessPeer(%d, %d)", dev, peer);
    return COLL_OK;
}

/* The devices granted before keep their access (set_access()). */
static coll_status_t cuda_grant(int dev, uint64_t va, size_t bytes)
{
    coll_status_t st = enter(dev);
    CUresult r;

    if (st != COLL_OK) {
        return st;
    }
    if ((r = set_access(dev, va, bytes)) != CUDA_SUCCESS) {
        return cu_fail(leave(r), "cuMemSetAccess(peer device %d, %zu bytes at %#llx)", dev,
                       bytes, (unsigned long long)va);
    }
    leave(CUDA_SUCCESS);
    return COLL_OK;
}

static void cuda_unmap(uint64_t va, size_t bytes)
{
    cu.cuMemUnmap(va, bytes);
}

static coll_status_t cuda_stream_create(int dev, coll_dev_stream_t *s_p)
{
    CUstream s;
    coll_status_t st = enter(dev);

    if (st != COLL_OK) {
        return st;
    }
    CU_TRY(leave(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)), "cuStreamCreate(device %d)",
           dev);
    *s_p = (coll_dev_stream_t)s;
    return COLL_OK;
}

static void cuda_stream_destroy(coll_dev_stream_t s)
{
    if (s != NULL) {
        cu.cuStreamDestroy((CUstream)s);
    }
}

static coll_status_t cuda_copy_async(uint64_t dst, uint64_t src, size_t bytes,
                                     coll_dev_stream_t s)
{
    coll_status_t st = enter_stream(s);

    if (st != COLL_OK) {
        return st;
    }
    CU_TRY(leave(cu.cuMemcpyAsync(dst, src, bytes, (CUstream)s)), "cuMemcpyAsync(%zu bytes)",
           bytes);
    return COLL_OK;
}

static coll_status_t cuda_host_alloc(int dev, size_t bytes, void **p_p)
{
    coll_status_t st;

    if (bytes == 0) {
        return coll__dev_fail(COLL_ERR_INVALID, "cuMemHostAlloc: 0 bytes");
    }
    if ((st = enter(dev)) != COLL_OK) {
        return st;
    }
    /* Portable: pinned for every context, as the pools of several devices may share it. */
    CU_TRY(leave(cu.cuMemHostAlloc(p_p, bytes, CU_MEMHOSTALLOC_PORTABLE)),
           "cuMemHostAlloc(%zu bytes, device %d)", bytes, dev);
    return COLL_OK;
}

static void cuda_host_free(int dev, void *p)
{
    if (p != NULL && enter(dev) == COLL_OK) {
        leave(cu.cuMemFreeHost(p));
    }
}

static coll_status_t cuda_stream_sync(coll_dev_stream_t s)
{
    CU_TRY(cu.cuStreamSynchronize((CUstream)s), "cuStreamSynchronize");
    return COLL_OK;
}

static coll_status_t cuda_event_create(int dev, coll_dev_event_t *e_p)
{
    CUevent e;
    coll_status_t st = enter(dev);

    if (st != COLL_OK) {
        return st;
    }
    CU_TRY(leave(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING)), "cuEventCreate(device %d)", dev);
    *e_p = (coll_dev_event_t)e;
    return COLL_OK;
}

static void cuda_event_destroy(coll_dev_event_t e)
{
    if (e != NULL) {
        cu.cuEventDestroy((CUevent)e);
    }
}

static coll_status_t cuda_event_record(coll_dev_event_t e, coll_dev_stream_t s)
{
    coll_status_t st = enter_stream(s);

    if (st != COLL_OK) {
        return st;
    }
    CU_TRY(leave(cu.cuEventRecord((CUevent)e, (CUstream)s)), "cuEventRecord");
    return COLL_OK;
}

static coll_status_t cuda_event_query(coll_dev_event_t e)
{
    CUresult r = cu.cuEventQuery((CUevent)e);

    return r == CUDA_SUCCESS ? COLL_OK
           : r == CUDA_ERROR_NOT_READY ? COLL_INPROGRESS
                                       : cu_fail(r, "cuEventQuery");
}

static coll_status_t cuda_stream_wait(coll_dev_stream_t s, coll_dev_event_t e)
{
    coll_status_t st = enter_stream(s);

    if (st != COLL_OK) {
        return st;
    }
    CU_TRY(leave(cu.cuStreamWaitEvent((CUstream)s, (CUevent)e, 0)), "cuStreamWaitEvent");
    return COLL_OK;
}

static coll_status_t cuda_ctx_enter(int dev)
{
    return enter(dev);
}

static void cuda_ctx_leave(void)
{
    leave(CUDA_SUCCESS);
}

/* Portable: page-locked for every context; device-mapped: device addresses for it, the same in
 * every context (unified addressing). The driver wants a context current: device 0's. */
static coll_status_t cuda_host_register(void *p, size_t bytes, uint64_t *dev_p)
{
    coll_status_t st = coll__dev_check_register(p, bytes, dev_p, "cuMemHostRegister");
    CUdeviceptr d;
    CUresult r;

    if (st != COLL_OK || (st = enter(0)) != COLL_OK) {
        return st;
    }
    r = cu.cuMemHostRegister(p, bytes, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
    if (r != CUDA_SUCCESS) {
        return cu_fail(leave(r), "cuMemHostRegister(%zu bytes at %p)", bytes, p);
    }
    if ((r = cu.cuMemHostGetDevicePointer(&d, p, 0)) != CUDA_SUCCESS) {
        cu.cuMemHostUnregister(p);
        return cu_fail(leave(r), "cuMemHostGetDevicePointer(%p)", p);
    }
    leave(CUDA_SUCCESS);
    *dev_p = d;
    return COLL_OK;
}

static void cuda_host_unregister(void *p)
{
    if (p != NULL && enter(0) == COLL_OK) {
        leave(cu.cuMemHostUnregister(p));
    }
}

static coll_status_t cuda_stream_wait_word(coll_dev_stream_t s, uint64_t word, uint64_t value)
{
    coll_status_t st = coll__dev_check_word(word, "cuStreamWaitValue64");

    if (st != COLL_OK || (st = enter_stream(s)) != COLL_OK) {
        return st;
    }
    CU_TRY(leave(cu.cuStreamWaitValue64(cu_stream(s), word, value, CU_STREAM_WAIT_VALUE_GEQ)),
           "cuStreamWaitValue64(word at %#llx, >= %llu)", (unsigned long long)word,
           (unsigned long long)value);
    return COLL_OK;
}

static coll_status_t cuda_stream_write_word(coll_dev_stream_t s, uint64_t word, uint64_t value)
{
    coll_status_t st = coll__dev_check_word(word, "cuStreamWriteValue64");

    if (st != COLL_OK || (st = enter_stream(s)) != COLL_OK) {
        return st;
    }
    CU_TRY(leave(cu.cuStreamWriteValue64(cu_stream(s), word, value,
                                         CU_STREAM_WRITE_VALUE_DEFAULT)),
           "cuStreamWriteValue64(word at %#llx, %llu)", (unsigned long long)word,
           (unsigned long long)value);
    return COLL_OK;
}

static const coll_dev_ops_t cuda_ops = {
    .name = "cuda",
    .count = cuda_count,
    .info = cuda_info,
    .granularity = cuda_granularity,
    .mem_create = cuda_mem_create,
    .mem_export = cuda_mem_export,
    .mem_import = cuda_mem_import,
    .mem_release = cuda_mem_release,
    .va_reserve = cuda_va_reserve,
    .va_free = cuda_va_free,
    .map = cuda_map,
    .peer_access = cuda_peer_access,
    .grant = cuda_grant,
    .unmap = cuda_unmap,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .copy_async = cuda_copy_async,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .stream_sync = cuda_stream_sync,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .stream_wait = cuda_stream_wait,
    .ctx_enter = cuda_ctx_enter,
    .ctx_leave = cuda_ctx_leave,
    .host_register = cuda_host_register,
    .host_unregister = cuda_host_unregister,
    .stream_wait_word = cuda_stream_wait_word,
    .stream_write_word = cuda_stream_write_word,
};

/* Every entry by its exported (versioned) name; @return the first one missing, or NULL. */
static const char *resolve(void *lib)
{
#define CU_RESOLVE(f)                                                                              \
    if ((*(void **)&cu.f = dlsym(lib, CU_STR(f))) == NULL) {                                       \
        return CU_STR(f);                                                                          \
    }
    CU_ENTRIES(CU_RESOLVE)
#undef CU_RESOLVE
    return NULL;
}

coll_status_t coll__dev_cuda_open(const coll_dev_ops_t **ops_p, char *why, size_t whylen)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    const char *missing, *name = NULL, *text = NULL;
    CUresult r;
    int n = 0;

    if (lib == NULL) {
        snprintf(why, whylen, "no CUDA driver: %s", dlerror());
        return COLL_ERR_UNSUPPORTED;
    }
    if ((missing = resolve(lib)) != NULL) {
        snprintf(why, whylen, "CUDA driver too old: libcuda.so.1 has no %s", missing);
        dlclose(lib);
        return COLL_ERR_UNSUPPORTED;
    }
    if ((r = cu.cuInit(0)) != CUDA_SUCCESS || (r = cu.cuDeviceGetCount(&n)) != CUDA_SUCCESS) {
        cu.cuGetErrorName(r, &name);
        cu.cuGetErrorString(r, &text);
        snprintf(why, whylen, "CUDA driver present, but cuInit failed: %s: %s",
                 name ? name : "CUDA_ERROR_UNKNOWN", text ? text : "unknown error");
        return COLL_ERR_UNSUPPORTED; /* the library stays loaded: its entries may be resolved */
    }
    ndevices = n < COLL_DEV_MAX ? n : COLL_DEV_MAX;
    *ops_p = &cuda_ops;
    return COLL_OK;
}

void coll__dev_cuda_version(char *buf, size_t len)
{
    int v = 0;

    cu.cuDriverGetVersion(&v);
    snprintf(buf, len, "%d.%d", v / 1000, v % 1000 / 10);
}
