/**
 * @file mem_kind.h
 * @brief Where a buffer's bytes live. Every pool (daemon/core/pool.h) and every buffer the
 *        engine touches has one, and its kind picks the executor that works on it
 *        (kernels/exec.h), as UCC's memory types pick its memory and execution components.
 */
#ifndef COLL_KERNELS_MEM_KIND_H
#define COLL_KERNELS_MEM_KIND_H

/** A memory kind. A new kind goes before COLL_MEM_KINDS (kernels/README.md says what else). */
typedef enum {
    COLL_MEM_HOST = 0, /**< host memory: the daemon's and the ranks' mappings of a memfd pool,
                            staging blocks, anything malloc gives */
    COLL_MEM_CUDA = 1, /**< an NVIDIA GPU's memory (a device pool, anything cudaMalloc gives):
                            its executor is the CUDA module's (kernels/cuda), there once the
                            module was loaded and registered */
    COLL_MEM_KINDS     /**< the number of kinds */
} coll_mem_kind_t;

/** @return "host", "cuda"; "unknown" for a value that is no kind. Thread-safe. */
const char *coll_mem_kind_name(coll_mem_kind_t kind);

#endif
