#include "engine/workers.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/log.h"

struct coll_workers {
    pthread_mutex_t lock;
    pthread_cond_t cond;   /* work queued, or stop */
    coll_list_t queue;     /* tasks with pieces left to hand out */
    coll_list_t finished;  /* tasks whose pieces all ran, for the loop */
    uv_async_t async;      /* wakes the loop for finished tasks */
    int stop;
    unsigned n;
    pthread_t threads[];
};

static void *worker_main(void *arg)
{
    struct coll_workers *w = arg;

    pthread_mutex_lock(&w->lock);
    for (;;) {
        coll_task_t *t;
        uint32_t part;
        if (coll_list_empty(&w->queue)) {
            if (w->stop) {
                break;
            }
            pthread_cond_wait(&w->cond, &w->lock);
            continue;
        }
        t = coll_container_of(w->queue.next, coll_task_t, link);
        part = t->next_part++;
        if (t->next_part == t->nparts) {
            coll_list_remove(&t->link);
        }
        pthread_mutex_unlock(&w->lock);
        t->run(t, part);
        pthread_mutex_lock(&w->lock);
        if (++t->parts_done == t->nparts) {
            coll_list_push(&w->finished, &t->link);
            uv_async_send(&w->async);
        }
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static void finished_cb(uv_async_t *a)
{
    struct coll_workers *w = a->data;
    coll_list_t done;
    coll_list_t *e;

    coll_list_init(&done);
    pthread_mutex_lock(&w->lock);
    while ((e = coll_list_pop(&w->finished)) != NULL) {
        coll_list_push(&done, e);
    }
    pthread_mutex_unlock(&w->lock);
    while ((e = coll_list_pop(&done)) != NULL) {
        coll_task_t *t = coll_container_of(e, coll_task_t, link);
        t->done(t);
    }
}

static void workers_closed(uv_handle_t *h)
{
    free(h->data);
}

coll_status_t coll_workers_start(coll_daemon_t *d, unsigned nthreads)
{
    struct coll_workers *w;

    if (nthreads == 0) {
        return COLL_OK;
    }
    w = calloc(1, sizeof(*w) + nthreads * sizeof(pthread_t));
    if (w == NULL) {
        return COLL_ERR_NOMEM;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    coll_list_init(&w->queue);
    coll_list_init(&w->finished);
    uv_async_init(d->loop, &w->async, finished_cb);
    w->async.data = w;
    d->workers = w;
    for (; w->n < nthreads; w->n++) {
        if (pthread_create(&w->threads[w->n], NULL, worker_main, w) != 0) {
            coll_error(COLL_SUB_CORE, "starting kernel thread %u: %m", w->n);
            return COLL_ERR_NOMEM;
        }
    }
    coll_info(COLL_SUB_CORE, "%u kernel threads for large reductions", nthreads);
    return COLL_OK;
}

void coll_workers_stop(coll_daemon_t *d)
{
    struct coll_workers *w = d->workers;

    if (w == NULL) {
        return;
    }
    pthread_mutex_lock(&w->lock);
    w->stop = 1;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    for (unsigned i = 0; i < w->n; i++) {
        pthread_join(w->threads[i], NULL);
    }
    finished_cb(&w->async); /* tasks that finished after the last wake-up */
    uv_close((uv_handle_t *)&w->async, workers_closed);
    d->workers = NULL;
}

unsigned coll_workers_count(const coll_daemon_t *d)
{
    return d->workers != NULL ? d->workers->n : 0;
}

void coll_workers_submit(coll_daemon_t *d, coll_task_t *t)
{
    struct coll_workers *w = d->workers;

    t->next_part = t->parts_done = 0;
    if (w == NULL) {
        for (uint32_t p = 0; p < t->nparts; p++) {
            t->run(t, p);
        }
        t->done(t);
        return;
    }
    pthread_mutex_lock(&w->lock);
    coll_list_push(&w->queue, &t->link);
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}
