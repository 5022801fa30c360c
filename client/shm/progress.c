/*
 * A posted collective's way through the shared-memory area (proto/shm_area.h): agreement, then
 * either its chunks run here or it goes to the daemon, and how it ends.
 *
 * The ranks agree before any output is written: a rank that finds every local rank's post of
 * a key compares them with its own, and runs or hands over the operation only when they are
 * all equal; a rank that finds a difference reports it to the daemon, which fails the job on
 * every rank (and node) with both descriptors in the message. Whoever finds the operation
 * agreed first claims its chunks (or the hand-over) through the home post: the last rank to
 * post does everything itself unless others are waiting too and help, so a rank that posted
 * and went on computing never holds the others up. The one that finishes the last chunk marks
 * every rank's post DONE and wakes them through their control blocks' event words.
 *
 * An allreduce of a multi-node job (route NODE) has two runs of chunks around the daemon: the
 * rank that finishes the last chunk of the reduce hands the node buffer over
 * (COLL_SUBMISSION_REDUCED); the distribution's chunks may be claimed once the daemon's node word
 * is in the home post, and its last one completes the operation as above. The daemon counts
 * such an operation among its own, so the ranks do not count it again.
 *
 * A failed job (the header's word, written by the daemon) ends this rank's posts that the
 * daemon has not taken, with the job's error: first no more chunks may be claimed, and the
 * chunks another rank is still running get COLL_SHM_FAIL_GRACE_MS to finish, so that no
 * output is written after its request failed.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "client/shm/shm.h"

/* How long a failed operation waits for chunks that other ranks are running. */
#define COLL_SHM_FAIL_GRACE_MS 200u

void coll__shm_desc(const coll_comm_t *c, const coll_submission_t *sub, coll_desc_t *d)
{
    coll_desc_make(sub, &(coll_desc_ctx_t){.world_size = (uint32_t)c->world_size,
                                           .algo = sub->algo, .epoch = c->epoch},
                   d);
}

/* Local rank @p l posted another operation under this one's key: the daemon fails the job. */
static void report_mismatch(coll_comm_t *c, coll_shm_op_t *op, uint32_t l,
                            const coll_desc_t *theirs)
{
    char who[32], msg[600];

    snprintf(who, sizeof(who), "rank %u", coll__shm_area(c->shm, l)->rank);
    coll_desc_mismatch(theirs, who, &op->desc, (uint32_t)c->rank, msg, sizeof(msg));
    coll__abort(c, COLL_ERR_MISMATCH, msg);
    op->reported = 1;
}

/* A local rank that left cannot post: the collective can never run. */
static void report_left(coll_comm_t *c, coll_shm_op_t *op)
{
    coll_shm_hdr_t *h = c->shm->hdr;
    char msg[400];

    snprintf(msg, sizeof(msg), "%.*s left job %s; its collectives cannot run without it (rank "
             "%d submitted the next one)", COLL_SHM_LEFT_BYTES - 1, h->left_msg, c->job, c->rank);
    coll__abort(c, COLL_ERR_JOB, msg);
    op->reported = 1;
}

/* Whether this rank's post is still the operation's, not completed meanwhile. The other ranks
 * may complete an operation without this one (they ran every chunk) and post the key's next
 * operation at once: a post of that key found after that is the next one's. They move this
 * rank's post to DONE before they post again (sequentially consistent stores), so a rank that
 * found their post and then sees its own still POSTED found this operation's. */
static int mine_current(const coll_shm_t *s, const coll_shm_op_t *op)
{
    return atomic_load(&coll__shm_post_of(s, s->self, op->slot)->state) == op->state;
}

/* Local rank @p l's post of the operation into @p d (with its slot and state): 1 when it is
 * there and describes the same operation as this rank's, 0 while it is missing or when it
 * differs (reported once, unless the operation completed meanwhile). */
static int peer_agrees(coll_comm_t *c, coll_shm_op_t *op, uint32_t l, uint32_t *slot,
                       uint64_t *state, coll_shm_rec_t *d)
{
    coll_shm_t *s = c->shm;
    coll_desc_t theirs;

    if (!coll_shm_find(coll__shm_area(s, l), op->rec.sub.key, COLL_SHM_POSTED, slot, state, d)) {
        if (!op->reported && atomic_load(&s->hdr->left) && mine_current(s, op)) {
            report_left(c, op);
        }
        return 0;
    }
    if (coll__post_completed(s, l, *slot)) {
        return 0; /* the key's last operation, still moving to DONE: this one's comes later */
    }
    coll__shm_desc(c, &d->sub, &theirs);
    if (!coll_desc_equal(&theirs, &op->desc)) {
        if (!op->reported && mine_current(s, op)) {
            report_mismatch(c, op, l, &theirs);
        }
        return 0;
    }
    return 1;
}

/* Every local rank's post of the operation, all equal: 1; 0 while one is missing (or they
 * differ, which is reported once). */
static int agree(coll_comm_t *c, coll_shm_op_t *op)
{
    coll_shm_t *s = c->shm;
    uint64_t ready = op->rec.post_ns;

    for (uint32_t l = 0; l < s->nlocal; l++) {
        coll_shm_rec_t theirs;
        const coll_shm_rec_t *d = &op->rec;
        uint64_t state = op->state;
        uint32_t slot = op->slot;
        if (l != s->self) {
            if (!peer_agrees(c, op, l, &slot, &state, &theirs)) {
                return 0;
            }
            d = &theirs;
        }
        op->peer_slot[l] = slot;
        op->peer_state[l] = state;
        op->in_off[l] = d->sub.send_offset;
        op->out_off[l] = d->sub.recv_offset;
        op->node_off = l == 0 ? d->node_off : op->node_off;
        ready = d->post_ns > ready ? d->post_ns : ready;
    }
    if (!mine_current(s, op)) {
        return 0; /* completed by the others: the posts found may be the key's next ones */
    }
    if (op->route == COLL_SHM_ROUTE_NODE && op->node_off == 0) {
        op->route = COLL_SHM_ROUTE_DAEMON; /* local rank 0 had no node buffer free */
    }
    op->agreed = 1;
    op->ready_ns = ready;
    return 1;
}

/* One rank sends the node submission; every rank then waits for the daemon to take it. */
static void hand_over(coll_comm_t *c, coll_shm_op_t *op)
{
    if (!op->handed && coll__post_claim_hand_over(c->shm, op)) {
        coll__shm_hand_over(c, op, COLL_SUBMISSION_NODE);
    }
    op->handed = 1;
}

/* The last chunk is done: every rank's outputs are written. */
static void complete(coll_comm_t *c, coll_shm_op_t *op)
{
    coll_shm_t *s = c->shm;
    uint64_t now = coll__now_ns();
    uint64_t node = op->route == COLL_SHM_ROUTE_NODE ? coll__shm_node_word(s, op) : 0;

    coll__post_complete(s, op, now, node);
    for (uint32_t l = 0; l < s->nlocal; l++) { /* a rank that polls sees its post move */
        if (l != s->self) {
            coll_ctl_notify_sleeper(coll_ctl_of(s->base, l));
        }
    }
    if (op->route == COLL_SHM_ROUTE_LOCAL || op->direct) { /* the daemon counted the others */
        coll__shm_count(s, &op->rec.sub, (uint32_t)c->world_size, now - op->ready_ns);
    }
}

/* Chunks that may be claimed now: all of them, or for route NODE the reduce's until the
 * daemon's inter-node phase ended well. */
static uint32_t claimable(const coll_shm_t *s, const coll_shm_op_t *op)
{
    uint64_t w;

    if (op->route != COLL_SHM_ROUTE_NODE) {
        return op->nchunks;
    }
    w = coll__shm_node_word(s, op);
    return w != 0 && coll_shm_node_status(w) == COLL_OK ? op->nchunks : op->nchunks / 2;
}

/* The node sum of route-NODE operation @p op is complete (this rank finished its last chunk):
 * the leader runs the rounds of a direct one (woken when another rank finished it), the
 * daemon the inter-node phase of the others. */
static void node_sum_done(coll_comm_t *c, coll_shm_op_t *op)
{
    coll_shm_t *s = c->shm;

    if (!op->direct) {
        coll__shm_hand_over(c, op, COLL_SUBMISSION_NODE | COLL_SUBMISSION_REDUCED);
    } else if (s->self == 0) {
        coll__shm_direct_progress(c, op);
    } else {
        coll_ctl_notify(coll_ctl_of(s->base, 0));
    }
}

/* Run chunks while there are some to claim. */
static void run(coll_comm_t *c, coll_shm_op_t *op)
{
    coll_shm_t *s = c->shm;
    _Atomic uint64_t *busy = &coll__shm_area(s, s->self)->busy_key;
    int64_t k;

    while (!atomic_load_explicit(&s->hdr->failed, memory_order_relaxed) &&
           (k = coll__post_claim(s, op, claimable(s, op))) >= 0) {
        uint32_t done;
        atomic_store_explicit(busy, op->rec.sub.key, memory_order_relaxed);
        coll__shm_run_chunk(s, op, (uint32_t)k, (uint32_t)c->world_size);
        atomic_store_explicit(busy, COLL_SHM_IDLE, memory_order_relaxed);
        done = coll__post_chunk_done(s, op);
        if (done == op->nchunks) {
            complete(c, op);
        } else if (op->route == COLL_SHM_ROUTE_NODE && done == op->nchunks / 2) {
            node_sum_done(c, op);
        }
    }
}

/* The daemons' steps of a node-reduced allreduce, as the daemon's completion would carry them:
 * counted from @p r's ready_ns instead of the daemon's start. Records that do not check out (a
 * rank's own post, but written by another process) are dropped whole. */
static void take_steps(coll_request_t *r, const coll_shm_steps_t *st)
{
    uint32_t n = st->n;
    uint64_t shift_us = st->base_ns > r->timing.ready_ns
                            ? (st->base_ns - r->timing.ready_ns) / 1000 : 0;

    r->nsteps = 0;
    if (n > COLL_CTL_MAX_STEPS || !coll_ctl_steps_valid(st->steps, n)) {
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint64_t rec = st->steps[i];
        r->steps[i] = coll_ctl_step_pack(coll_ctl_step_phase(rec), coll_ctl_step_last(rec),
                                         coll_ctl_step_end_us(rec) + shift_us);
    }
    r->nsteps = n;
}

static void finish_done(coll_shm_op_t *op)
{
    coll_request_t *r = op->req;
    const coll_shm_t *s = r->comm->shm;
    const coll_shm_post_t *p = coll__shm_post_of(s, s->self, op->slot);

    r->timing.ready_ns = r->timing.peers_ns = p->ready_ns;
    r->timing.reduced_ns = r->timing.done_ns = p->done_ns;
    if (op->route == COLL_SHM_ROUTE_NODE) { /* "shm+rd": around the daemons' algorithm */
        uint64_t w = atomic_load_explicit(&p->node, memory_order_relaxed);
        r->timing.peers_ns = p->peers_ns;     /* the local reduce, then the daemons' check */
        r->timing.reduced_ns = p->reduced_ns; /* the daemons' reduction; then distribution */
        take_steps(r, coll__shm_steps_of(s, s->self, op->slot));
        /* "direct" alone on a node of one rank: there was nothing to reduce among ranks */
        snprintf(r->algo, sizeof(r->algo), "%s%s", op->direct && s->nlocal == 1 ? "" : "shm+",
                 coll_algo_name((coll_algo_t)coll_shm_node_algo(w)));
    } else {
        memcpy(r->algo, "shm", sizeof("shm"));
    }
    r->comm->hooks->finish(r, COLL_OK);
}

/* No more claims; 1 once no chunk of the operation runs any more (or the grace is over). */
static int quiesced(coll_shm_t *s, coll_shm_op_t *op)
{
    uint64_t now = coll__now_ns();

    if (coll__post_close_claims(s, op)) {
        return 1;
    }
    if (op->fail_ns == 0) {
        op->fail_ns = now;
    }
    return now - op->fail_ns >= COLL_SHM_FAIL_GRACE_MS * 1000000ull;
}

/* The job failed: end the request with its error, unless the daemon has it. 1 when ended. */
static int fail(coll_comm_t *c, coll_shm_op_t *op)
{
    coll_shm_t *s = c->shm;
    coll_request_t *r = op->req;

    if (op->route != COLL_SHM_ROUTE_DAEMON && op->agreed && !quiesced(s, op)) {
        return 0;
    }
    coll__set_error(c, "%.*s", COLL_SHM_MSG_BYTES - 1, s->hdr->msg);
    c->hooks->finish(r, coll_shm_failed_status(s->hdr, (uint32_t)c->conn->rank));
    return 1;
}

/* The daemon ended route-NODE operation @p op's inter-node phase with an error while the job
 * goes on (the job's own failures come through the header): end the request with it. */
static void node_failed(coll_comm_t *c, coll_shm_op_t *op, coll_status_t st)
{
    char nm[48];

    coll_desc_name(&(coll_desc_t){.coll = (uint16_t)op->rec.sub.coll, .key = op->rec.sub.key}, nm,
                   sizeof(nm));
    coll__set_error(c, "rank %d: the daemon ended the inter-node phase of %s with %s", c->rank,
                    nm, coll_strerror(st));
    c->hooks->finish(op->req, st);
}

/* The daemon read the posts: it completes the request; this rank's post is free again. */
static void taken(coll_shm_op_t *op)
{
    coll__shm_forget(op->req);
}

static int progress_op(coll_comm_t *c, coll_shm_op_t *op)
{
    coll_shm_t *s = c->shm;
    coll_shm_post_t *mine = coll__shm_post_of(s, s->self, op->slot);
    uint32_t phase = coll_shm_phase(atomic_load(&mine->state));
    uint64_t node;
    int fresh;

    if (phase == COLL_SHM_DONE) {
        node = op->route == COLL_SHM_ROUTE_NODE ? atomic_load(&mine->node) : 0;
        if ((node & COLL_SHM_NODE_DONE) && coll_shm_node_status(node) != COLL_OK) {
            /* another rank saw the daemon's error first (coll__post_fail_node()) */
            node_failed(c, op, (coll_status_t)coll_shm_node_status(node));
        } else {
            finish_done(op);
        }
        return 1;
    }
    if (atomic_load_explicit(&s->hdr->failed, memory_order_acquire)) {
        /* The daemon takes posts before it fails the job: a post it took shows it now. */
        if (coll_shm_phase(atomic_load(&mine->state)) == COLL_SHM_TAKEN) {
            taken(op);
            return 0;
        }
        return fail(c, op);
    }
    if (phase == COLL_SHM_TAKEN) {
        taken(op);
        return 0;
    }
    fresh = !op->agreed;
    if (!op->agreed && !agree(c, op)) {
        return 0;
    }
    if (op->route == COLL_SHM_ROUTE_DAEMON) {
        hand_over(c, op);
        return 0;
    }
    node = op->route == COLL_SHM_ROUTE_NODE ? coll__shm_node_word(s, op) : 0;
    if (node != 0 && coll_shm_node_status(node) != COLL_OK) {
        coll__post_fail_node(s, op, node);
        node_failed(c, op, (coll_status_t)coll_shm_node_status(node));
        return 1;
    }
    if (op->direct && s->self == 0) {
        coll__shm_direct_progress(c, op); /* the rounds, once the node sum is complete */
    }
    /* Waiting ranks may help with the chunks (of the reduce, for route NODE). */
    if (fresh && op->nchunks > (op->route == COLL_SHM_ROUTE_NODE ? 2u : 1u)) {
        for (uint32_t l = 0; l < s->nlocal; l++) {
            if (l != s->self) {
                coll_ctl_notify(coll_ctl_of(s->base, l));
            }
        }
    }
    run(c, op);
    if (coll_shm_phase(atomic_load(&mine->state)) == COLL_SHM_DONE) {
        finish_done(op);
        return 1;
    }
    return 0;
}

void coll__shm_stop(coll_comm_t *c)
{
    coll_shm_t *s = c->shm;
    const struct timespec pause = {0, 100000};

    for (coll_shm_op_t *op = s != NULL ? s->ops.next : NULL; op != NULL && op != &s->ops;
         op = op->next) {
        while (op->route != COLL_SHM_ROUTE_DAEMON && op->agreed && !quiesced(s, op)) {
            nanosleep(&pause, NULL); /* quiesced() gives up after COLL_SHM_FAIL_GRACE_MS */
        }
    }
}

int coll__shm_progress(coll_comm_t *c)
{
    coll_shm_t *s = c->shm;
    int n = 0;

    if (s == NULL) {
        return 0;
    }
    for (coll_shm_op_t *op = s->ops.next, *next; op != &s->ops; op = next) {
        next = op->next;
        n += progress_op(c, op);
    }
    return n;
}
