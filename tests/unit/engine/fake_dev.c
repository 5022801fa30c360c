/* The fake net's world with a fake device per daemon (fake_dev.h). */
#include "fake_dev.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <unistd.h>

#include "core/dev_pools.h"
#include "core/devices.h"

int fake_dev_init(fake_world_t *w, uv_loop_t *loop, uint32_t nnodes, uint32_t nlocal,
                  size_t cache_bytes)
{
    fake_net_init(w, nnodes, nlocal, 1024, 64 << 20, FAKE_EAGER);
    uv_loop_init(loop);
    for (uint32_t n = 0; n < nnodes; n++) {
        w->d[n].loop = loop;
        coll_devices_open(&w->d[n].devices, 64 << 20);
        if (w->d[n].devices.n != 1) {
            return -1;
        }
        coll_pinned_configure(&w->d[n].devices.pinned, loop, cache_bytes, 60000);
    }
    return 0;
}

int fake_dev_free(fake_world_t *w, uv_loop_t *loop)
{
    uint32_t nnodes = w->nnodes;

    fake_net_free(w);
    for (uint32_t n = 0; n < nnodes; n++) {
        coll_dev_pools_destroy(&w->job[n]);
        coll_pinned_close(&w->d[n].devices.pinned);
    }
    uv_run(loop, UV_RUN_DEFAULT); /* the polls' and the cache's close callbacks */
    return uv_loop_close(loop) == 0 ? 0 : -1;
}

float *fake_dev_alloc(fake_world_t *w, uint32_t n, uint32_t l, size_t bytes, uint64_t *off_p)
{
    coll_dev_pool_t *dp;
    char err[256];
    size_t off;

    assert_int_equal(coll_dev_pool_get(&w->job[n], 0, &dp, err, sizeof(err)), COLL_OK);
    assert_int_equal(coll_pool_alloc(dp->pool, bytes, &w->sess[n][l], &off), COLL_OK);
    *off_p = off;
    return (float *)(coll_pool_base(dp->pool) + off);
}

const fake_done_t *fake_dev_drive(fake_world_t *w, uv_loop_t *loop, uint32_t n, uint32_t l,
                                  uint32_t req_id, int ms)
{
    const fake_done_t *d = NULL;

    for (int i = 0; i < ms && (d = fake_net_done(w, n, l, req_id)) == NULL; i++) {
        uv_run(loop, UV_RUN_NOWAIT);
        fake_net_run(w);
        usleep(1000);
    }
    return d;
}

Coll__Wire__Submit fake_dev_allreduce(uint32_t key, uint64_t count, uint32_t pool, uint64_t send,
                                      uint64_t recv)
{
    Coll__Wire__Submit s = COLL__WIRE__SUBMIT__INIT;

    s.req_id = key;
    s.key = key;
    s.coll = COLL__WIRE__COLLECTIVE__ALLREDUCE;
    s.dtype = COLL_FLOAT32;
    s.op = COLL_SUM;
    s.count = count;
    s.algo = COLL_ALGO_RING;
    s.pool = pool;
    s.send_offset = send;
    s.recv_offset = recv;
    return s;
}
