/*
 * copy_probe: node 0's copies watched (copy_probe.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "copy_probe.h"
#include "core/dev_pools.h"
#include "core/devices.h"

copy_probe_t copy_probe;

static fake_world_t *world;        /* the watched one's, NULL when no watch is on */
static coll_dev_ops_t probing;     /* node 0's device layer, its copies watched */
static const coll_dev_ops_t *real; /* the device layer it stands for */
static coll_dev_event_t probe;     /* of node 0's device, for stream_busy() */

static void add_stream(coll_dev_stream_t *set, int *n, coll_dev_stream_t s)
{
    for (int i = 0; i < *n; i++) {
        if (set[i] == s) {
            return;
        }
    }
    assert_true(*n < COPY_PROBE_STREAMS);
    set[(*n)++] = s;
}

/* Whether @p s has copies not done yet (the probe recorded there now, and queried). */
static int stream_busy(coll_dev_stream_t s)
{
    assert_int_equal(real->event_record(probe, s), COLL_OK);
    return real->event_query(probe) == COLL_INPROGRESS;
}

static coll_status_t probing_copy(uint64_t dst, uint64_t src, size_t bytes, coll_dev_stream_t s)
{
    const coll_pool_t *pool = world->job[0].dev_pools[0]->pool;
    uint64_t base = (uint64_t)(uintptr_t)coll_pool_base(pool);
    copy_probe_t *p = &copy_probe;

    if (dst >= base && dst < base + coll_pool_size(pool)) { /* to the device: a copy back */
        if (p->backs++ == 0) {
            p->back_idle = !stream_busy(s);
            for (int i = 0; i < p->n_in; i++) {
                p->in_busy |= stream_busy(p->in[i]);
            }
        }
        add_stream(p->back, &p->n_back, s);
    } else {
        add_stream(p->in, &p->n_in, s);
    }
    return real->copy_async(dst, src, bytes, s);
}

void copy_probe_begin(fake_world_t *w)
{
    assert_null(world);
    world = w;
    real = w->d[0].devices.ops;
    probing = *real;
    probing.copy_async = probing_copy;
    w->d[0].devices.ops = &probing;
    copy_probe = (copy_probe_t){0};
    assert_int_equal(real->event_create(0, &probe), COLL_OK);
}

void copy_probe_end(void)
{
    if (world != NULL && world->d[0].devices.ops == &probing) {
        world->d[0].devices.ops = real;
        real->event_destroy(probe);
    }
    world = NULL;
}
