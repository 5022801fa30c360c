/*
 * fake_dev: the fake net's world (fake_net.h) with each node's daemon holding one device of the
 * fake device layer (COLL_DEVICE_FAKE=1 in the test's environment) and its cache of page-locked
 * host copies, all on one loop: what the engine's tests of the staged path share.
 */
#ifndef TESTS_UNIT_ENGINE_FAKE_DEV_H
#define TESTS_UNIT_ENGINE_FAKE_DEV_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "fake_net.h"

/**
 * @brief fake_net_init() of @p nnodes x @p nlocal (1 KiB segments, 64 MiB pools, eager), @p loop
 *        initialised as every daemon's, each daemon's devices opened (a 64 MiB device budget)
 *        with a cache of @p cache_bytes of page-locked copies (idle for 60 s at most).
 * @return 0, or -1 when a daemon does not see exactly one device.
 */
int fake_dev_init(fake_world_t *w, uv_loop_t *loop, uint32_t nnodes, uint32_t nlocal,
                  size_t cache_bytes);

/** @brief Free what fake_dev_init() made and close @p loop. @return 0, or -1 when it cannot. */
int fake_dev_free(fake_world_t *w, uv_loop_t *loop);

/**
 * @brief @p bytes of local rank @p l of node @p n in its job's pool on device 0 (pool id 1);
 *        its offset in that pool in *@p off_p. Asserts on failure.
 */
float *fake_dev_alloc(fake_world_t *w, uint32_t n, uint32_t l, size_t bytes, uint64_t *off_p);

/** @return A ring allreduce (float32, sum) of @p count elements, key and request @p key, its
 *          buffers at @p send and @p recv of pool @p pool, as a rank submits it. */
Coll__Wire__Submit fake_dev_allreduce(uint32_t key, uint64_t count, uint32_t pool, uint64_t send,
                                      uint64_t recv);

/**
 * @brief Run @p loop and the fake net, a millisecond apart, until local rank @p l of node @p n
 *        has its answer to @p req_id, for at most @p ms milliseconds.
 * @return The answer, or NULL when none came.
 */
const fake_done_t *fake_dev_drive(fake_world_t *w, uv_loop_t *loop, uint32_t n, uint32_t l,
                                  uint32_t req_id, int ms);

#endif
