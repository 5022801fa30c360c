/*
 * Operations: matching the local members' submissions by (group, key), the descriptor check
 * with the previous node of the group's ring, completion and failure.
 *
 * Submissions are matched by key, not by arrival order, so local ranks (and nodes) that submit
 * buckets in different orders do not deadlock: every operation whose local members are all in
 * starts at once and runs beside the others, those of other groups included.
 */
#include "engine/op.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "base/log.h"
#include "core/stats.h"
#include "engine/algo.h"
#include "engine/algos/p2p.h"
#include "engine/stage.h"
#include "engine/codec/codec.h"
#include "engine/submit.h"
#include "net/clientlink.h"
#include "net/transport.h"
#include "proto/tag.h"

/* "allreduce #12" for messages, in a buffer of the caller's. */
static const char *name(const coll_desc_t *d, char *buf, size_t len)
{
    coll_desc_name(d, buf, len);
    return buf;
}

coll_op_t *coll_op_find(coll_job_t *job, const coll_group_t *grp, uint64_t key)
{
    coll_op_t *op, *tmp;
    coll_list_for_each_safe(op, tmp, &job->engine.ops, coll_op_t, link)
    {
        if (!op->done && op->grp == grp && op->desc.key == key &&
            !coll_kind_is_p2p(op->desc.coll)) {
            return op;
        }
    }
    return NULL;
}

coll_op_t *coll_op_create(coll_job_t *job, coll_group_t *grp, const coll_desc_t *desc)
{
    uint32_t l = grp->nlocal;
    coll_op_t *op = calloc(1, sizeof(*op) + l * (sizeof(coll_op_member_t) + 2 * sizeof(void *)));

    if (op == NULL) {
        return NULL;
    }
    op->job = job;
    op->grp = grp;
    grp->ops++;
    op->desc = *desc;
    op->esize = coll_dtype_size((coll_dtype_t)desc->dtype);
    op->nbufs = l;
    op->members = (coll_op_member_t *)(op + 1);
    op->in = (const void **)(op->members + l);
    op->out = (void **)(op->in + l);
    coll_list_init(&op->posted);
    coll_list_init(&op->parked);
    op->t_submit_ns = coll_stats_now_ns();
    coll_list_push(&job->engine.ops, &op->link);
    return op;
}

static void fail_local_mismatch(coll_op_t *op, coll_session_t *s, const coll_desc_t *mine)
{
    char a[200], b[200], nm[64], who[32] = "an earlier rank";

    /* The operation's descriptor came from the first local member that submitted it. */
    for (uint32_t l = 0; l < op->grp->nlocal; l++) {
        if (op->members[l].session != NULL && op->members[l].session != s) {
            snprintf(who, sizeof(who), "rank %u", op->members[l].session->rank);
            break;
        }
    }
    coll_desc_format(&op->desc, a, sizeof(a));
    coll_desc_format(mine, b, sizeof(b));
    coll_job_fail(op->job, COLL_ERR_MISMATCH, 1, "%s: %s submitted %s but rank %u submitted %s",
                  name(mine, nm, sizeof(nm)), who, a, s->rank, b);
}

/* A submission this node refuses (bad buffers, root or peer, overlap, a repeated key, no
 * memory) can never complete on the other ranks either: it fails the job on every node, with
 * the reason, rather than leaving them to the timeout. The refused request gets the reason. */
static void refuse_everywhere(coll_job_t *job, coll_session_t *s, uint32_t req_id,
                              coll_status_t st, const char *why)
{
    coll_job_fail(job, st, 1, "job %s: rank %u's submission was refused on node %u: %s", job->id,
                  s->rank, job->node_rank, why);
    coll_session_complete(s, req_id, job->error, job->errmsg, "");
}

/* The group a submission names, when its rank registered it on this node (the world: always).
 * NULL otherwise, with the reason in @p err. */
static coll_group_t *member_group(coll_job_t *job, const coll_session_t *s,
                                  const Coll__Wire__Submit *sub, char *err, size_t len)
{
    coll_group_t *grp = coll_group_find(job, sub->group);
    uint32_t i = grp != NULL ? grp->local_of[s->local_rank] : COLL_GROUP_NONE;

    if (i == COLL_GROUP_NONE || (grp->id != 0 && !(grp->registered & (1ull << i)))) {
        snprintf(err, len, "rank %u is not a member of group %u of job %s (a %s on a "
                 "communicator it did not split or has destroyed)", s->rank, sub->group,
                 job->id, coll_kind_name((coll_kind_t)sub->coll));
        return NULL;
    }
    return grp;
}

/* A local member left between operations, so nothing failed yet; this collective can never
 * run without it. Returns 1 (and fails the job everywhere now, or the other nodes would wait
 * for it until the timeout) when one did. */
static int member_left(coll_job_t *job, const coll_group_t *grp, const coll_session_t *s)
{
    for (uint32_t i = 0; i < grp->nlocal; i++) {
        if (job->locals[grp->locals[i]] == NULL) {
            coll_job_fail(job, COLL_ERR_JOB, 1, "%s left job %s; the collectives of its "
                          "communicators cannot run without it (rank %u submitted the next one "
                          "of group %u)", job->left, job->id, s->rank, grp->id);
            return 1;
        }
    }
    return 0;
}

/* Checks before a submission joins an operation; returns COLL_OK and its group in @p grp_p, or
 * an error with its text in @p err (the caller refuses the request, or the job with
 * refuse_everywhere()). */
static coll_status_t refuse(coll_job_t *job, coll_session_t *s, const Coll__Wire__Submit *sub,
                            coll_group_t **grp_p, char *err, size_t len)
{
    if (job->state == COLL_JOB_FAILED) {
        snprintf(err, len, "job %s failed earlier: %.400s", job->id, job->errmsg);
        return job->error;
    }
    if (job->state != COLL_JOB_READY) {
        snprintf(err, len, "submit before the job is ready");
        return COLL_ERR_PROTOCOL;
    }
    if ((*grp_p = member_group(job, s, sub, err, len)) == NULL) {
        return COLL_ERR_INVALID;
    }
    if (!coll_kind_is_p2p(sub->coll) && member_left(job, *grp_p, s)) {
        snprintf(err, len, "%.500s", job->errmsg);
        return job->error;
    }
    return coll_submit_check(job, *grp_p, s, sub, err, len);
}

static void add_member(coll_job_t *job, coll_group_t *grp, coll_session_t *s,
                       const Coll__Wire__Submit *sub, const coll_desc_t *desc)
{
    char err[256], nm[64];
    coll_op_t *op = coll_op_find(job, grp, sub->key);
    uint32_t i = grp->local_of[s->local_rank];

    if (op == NULL && (op = coll_op_create(job, grp, desc)) == NULL) {
        refuse_everywhere(job, s, sub->req_id, COLL_ERR_NOMEM, "daemon out of memory");
        return;
    }
    if (op->members[i].session != NULL) {
        snprintf(err, sizeof(err), "rank %u submitted %s twice", s->rank,
                 name(desc, nm, sizeof(nm)));
        refuse_everywhere(job, s, sub->req_id, COLL_ERR_INVALID, err);
        return;
    }
    op->members[i] = (coll_op_member_t){s, sub->req_id, sub->send_offset, sub->recv_offset};
    op->nsubmitted++;
    if (!coll_desc_equal(&op->desc, desc)) {
        fail_local_mismatch(op, s, desc);
    } else if (op->nsubmitted == grp->nlocal) {
        coll_op_start(op);
    }
}

void coll_op_submit(coll_job_t *job, coll_session_t *s, const Coll__Wire__Submit *sub)
{
    char err[640];
    coll_desc_t desc;
    coll_group_t *grp = NULL;
    coll_status_t st = refuse(job, s, sub, &grp, err, sizeof(err));

    if (st != COLL_OK && job->state == COLL_JOB_READY) {
        refuse_everywhere(job, s, sub->req_id, st, err);
        return;
    }
    if (st != COLL_OK) {
        coll_session_complete(s, sub->req_id, st, err, "");
        return;
    }
    if ((coll_kind_t)sub->coll == COLL_KIND_SEND || (coll_kind_t)sub->coll == COLL_KIND_RECV) {
        coll_p2p_submit(job, grp, s, sub);
        return;
    }
    /* A forced algorithm that cannot run still gets an operation (its descriptor names the
     * refused algorithm): ranks that all forced it fail together with COLL_ERR_UNSUPPORTED
     * after agreeing; a rank that did not force it disagrees, and the job fails. */
    coll_submit_desc(job, grp, sub, &desc);
    add_member(job, grp, s, sub, &desc);
}

static coll_status_t desc_exchange(coll_op_t *op)
{
    const coll_group_t *grp = op->grp;
    uint32_t next = (grp->node_rank + 1) % grp->nnodes;
    uint32_t prev = (grp->node_rank + grp->nnodes - 1) % grp->nnodes;
    uint64_t tag = coll_tag_make(grp->id, op->desc.key, COLL_TAG_DESC, 0, 0);
    coll_status_t st;

    op->desc_recv = (coll_xfer_t){.op = op, .kind = COLL_TAG_DESC};
    op->desc_send = (coll_xfer_t){.op = op, .kind = COLL_TAG_DESC, .is_send = 1};
    st = coll_op_recv(op, prev, tag, &op->peer_desc, sizeof(op->peer_desc),
                             &op->desc_recv);
    if (st == COLL_OK) {
        st = coll_op_send(op, next, tag, &op->desc, sizeof(op->desc), &op->desc_send);
    }
    return st;
}

/* Daemon addresses of every local member's buffers (NULL where its role uses none); a
 * node-reduced allreduce has one, its node buffer. */
static void map_buffers(coll_op_t *op)
{
    const coll_group_t *grp = op->grp;
    uint8_t *base = coll_pool_base(op->job->pool);

    if (op->node.off != 0) {
        op->in[0] = op->out[0] = op->desc.count > 0 ? base + op->node.off : NULL;
        return;
    }
    for (uint32_t l = 0; l < grp->nlocal; l++) {
        uint64_t se, re;
        coll_kind_extent((coll_kind_t)op->desc.coll, op->desc.count, grp->size,
                         coll_group_rank_of_local(grp, l), op->desc.root, &se, &re);
        op->in[l] = se > 0 ? base + op->members[l].send_off : NULL;
        op->out[l] = re > 0 ? base + op->members[l].recv_off : NULL;
    }
}

static void impl_start(coll_op_t *op)
{
    coll_status_t st = op->impl->start(op);
    char nm[64];

    if (st != COLL_OK) {
        coll_job_fail(op->job, st, 1, "starting %s: %s", name(&op->desc, nm, sizeof(nm)),
                      coll_strerror(st));
    }
}

/* The parameter service's operations: the layer above prepares them (stage.h). A refusal
 * fails the job everywhere, as a refused submission does. @return 1 to go on. */
static int ps_start(coll_op_t *op)
{
    char err[512], nm[48];
    coll_status_t st = op->job->d->stage_hooks->start(op, err, sizeof(err));

    if (st != COLL_OK) {
        coll_job_fail(op->job, st, 1, "job %s: %s: %s", op->job->id,
                      name(&op->desc, nm, sizeof(nm)), err);
    }
    return st == COLL_OK;
}

void coll_op_start(coll_op_t *op)
{
    coll_job_t *job = op->job;
    int remote = op->grp->nnodes > 1; /* op may be freed by the time it is looked at again */
    coll_status_t st = COLL_OK;
    char nm[64];

    op->t_start_ns = coll_stats_now_ns();
    coll_stats_op_waited(&job->d->stats, op->desc.coll,
                         (double)(op->t_start_ns - op->t_submit_ns) / 1e9);
    map_buffers(op);
    /* Held: a failure of the codec (a busy bucket, no memory for its residual) fails the job,
     * which completes this operation and would free it under the codec. */
    op->inflight++;
    op->impl = coll_codec_start(op);
    op->inflight--;
    if (op->done) {
        coll_op_maybe_free(op);
        return;
    }
    if (op->impl == NULL) {
        op->impl =
            coll_algo_impl(op->grp, (coll_kind_t)op->desc.coll, (coll_algo_t)op->desc.algo);
    }
    if (coll_kind_is_ps(op->desc.coll) && !ps_start(op)) {
        return;
    }
    coll_debug(COLL_SUB_JOB, "job %s: %s of %" PRIu64 " elements starts (%s)", job->id,
               name(&op->desc, nm, sizeof(nm)), op->desc.count, op->impl->name);
    if (!remote) {
        op->desc_ok = 1;
        op->t_peers_ns = op->t_start_ns;
    } else {
        st = desc_exchange(op);
    }
    if (st == COLL_OK) {
        st = coll_codec_policy_post(op);
    }
    if (st != COLL_OK) {
        coll_job_fail(job, st, 1, "%s: posting the descriptor failed",
                      name(&op->desc, nm, sizeof(nm)));
    } else {
        impl_start(op);
    }
    if (remote) {
        coll_transport_drive(job);
    }
}

static void count_done(const coll_op_t *op, coll_status_t status)
{
    uint64_t start = op->t_start_ns ? op->t_start_ns : op->t_submit_ns;
    coll_stats_op_t s = {op->desc.coll, op->desc.dtype, op->grp->size,
                         coll_stats_op_bytes(op->desc.coll, op->desc.count, op->esize,
                                             op->grp->size),
                         (unsigned)(op->desc.run & 0xffu)}; /* its method (proto/cspec.h) */

    coll_stats_op_done(&op->job->d->stats, &s, (double)(coll_stats_now_ns() - start) / 1e9,
                       status);
}

void coll_op_complete(coll_op_t *op, coll_status_t status, const char *error)
{
    coll_ctl_times_t t;

    if (op->done) {
        return;
    }
    t.ready_ns = op->t_start_ns;
    t.peers_ns = op->t_peers_ns;
    t.reduced_ns = op->t_reduced_ns;
    t.done_ns = uv_hrtime();
    t.nsteps = status == COLL_OK ? op->nsteps : 0;
    memcpy(t.steps, op->steps, t.nsteps * sizeof(t.steps[0]));
    t.wire_bytes = t.dense_bytes = 0;
    op->done = 1;
    coll_codec_op_done(op, status, &t);
    count_done(op, status);
    if (op->stage != NULL) {
        op->stage->done(op, status);
    }
    if (op->node.off != 0) { /* the ranks distribute the result, or end with the error */
        coll_shm_node_done(op->job, &op->node, status,
                           op->desc.algo < COLL_ALGO_REFUSED ? op->desc.algo : COLL_ALGO_AUTO,
                           &t);
    }
    for (uint32_t l = 0; l < op->grp->nlocal && op->node.off == 0; l++) {
        coll_op_member_t *m = &op->members[l];
        if (m->session != NULL) {
            coll_session_complete_op(m->session, m->req_id, status, error,
                                     op->impl != NULL ? op->impl->name : "", &t);
            m->session = NULL;
        }
    }
    coll_op_maybe_free(op);
}

void coll_op_mark_step(coll_op_t *op, uint32_t phase, uint32_t step, uint32_t nsteps,
                       uint32_t budget)
{
    uint64_t now = uv_hrtime();

    if (op->nsteps == COLL_CTL_MAX_STEPS || !coll_ctl_step_ends_record(step, nsteps, budget)) {
        return;
    }
    op->steps[op->nsteps++] = coll_ctl_step_pack(
        phase, step, now > op->t_start_ns ? (now - op->t_start_ns) / 1000 : 0);
}

void coll_op_mark_reduced(coll_op_t *op)
{
    if (op->t_reduced_ns == 0) {
        op->t_reduced_ns = uv_hrtime();
    }
}

/* Complete once the algorithm is done and every agreement came in. */
static void maybe_complete(coll_op_t *op)
{
    if (!op->done && op->algo_done && op->desc_ok && !coll_codec_policy_waiting(op)) {
        coll_op_complete(op, op->algo_status, op->algo_error);
    }
}

void coll_op_algo_done(coll_op_t *op)
{
    coll_op_mark_reduced(op);
    op->algo_done = 1;
    maybe_complete(op);
}

void coll_op_algo_failed(coll_op_t *op, coll_status_t status, const char *error)
{
    op->algo_status = status;
    snprintf(op->algo_error, sizeof(op->algo_error), "%s", error);
    coll_op_algo_done(op);
}

int coll_op_check_desc(coll_op_t *op, const coll_desc_t *p, uint32_t from)
{
    coll_job_t *job = op->job;
    char a[200], b[200], nm[64];

    if (coll_desc_equal(p, &op->desc)) {
        return 1;
    }
    coll_desc_format(p, a, sizeof(a));
    coll_desc_format(&op->desc, b, sizeof(b));
    coll_job_fail(job, COLL_ERR_MISMATCH, 1,
                  "%s: node %u (ranks from %u) submitted %s but node %u (ranks from %u) "
                  "submitted %s",
                  name(&op->desc, nm, sizeof(nm)), from, job->nodes[from].ranks[0], a,
                  job->node_rank, job->ranks[0], b);
    return 0;
}

int coll_op_check_msg(coll_op_t *op, const coll_xfer_t *x, const coll_desc_t *peer)
{
    char nm[48];

    if (x->length < sizeof(*peer)) {
        coll_job_fail(op->job, COLL_ERR_MISMATCH, 1, "%s: node %u sent %zu bytes, less than a "
                      "descriptor", name(&op->desc, nm, sizeof(nm)), x->peer, x->length);
        return 0;
    }
    if (!coll_op_check_desc(op, peer, x->peer)) {
        return 0;
    }
    if (x->length != x->expect) {
        coll_job_fail(op->job, COLL_ERR_MISMATCH, 1, "%s: node %u sent %zu bytes, %zu expected",
                      name(&op->desc, nm, sizeof(nm)), x->peer, x->length, x->expect);
        return 0;
    }
    return 1;
}

static void desc_check(coll_op_t *op)
{
    coll_list_t *e;
    char nm[64];

    if (op->desc_recv.length != sizeof(op->peer_desc)) {
        coll_job_fail(op->job, COLL_ERR_MISMATCH, 1,
                      "%s: malformed descriptor from node %u", name(&op->desc, nm, sizeof(nm)),
                      op->desc_recv.peer);
        return;
    }
    if (!coll_op_check_desc(op, &op->peer_desc, op->desc_recv.peer)) {
        return;
    }
    op->desc_ok = 1;
    op->t_peers_ns = uv_hrtime();
    if (op->impl->on_desc != NULL) {
        op->impl->on_desc(op);
    }
    while (!op->done && (e = coll_list_pop(&op->parked)) != NULL) {
        op->impl->on_xfer(op, coll_container_of(e, coll_xfer_t, link));
    }
    maybe_complete(op);
}

void coll_op_xfer_failed(coll_op_t *op, coll_xfer_t *x)
{
    coll_job_t *job = op->job;
    char nm[48];

    coll_node_lost(&job->nodes[x->peer], "%s failed: %s", x->is_send ? "a send to it" :
                   "a receive from it", ucs_status_string(x->status));
    coll_job_fail(job, COLL_ERR_PEER, 1,
                  "%s: %s node %u (%s, ranks from %u) failed: %s (is its daemon alive?)",
                  name(&op->desc, nm, sizeof(nm)), x->is_send ? "send to" : "receive from",
                  x->peer, job->nodes[x->peer].host, job->nodes[x->peer].ranks[0],
                  ucs_status_string(x->status));
}

/* The descriptor exchange and the auto policy message: the engine's, whatever the algorithm. */
static int agreement_xfer(coll_op_t *op, coll_xfer_t *x)
{
    if (x != &op->desc_recv && x != &op->desc_send && !coll_codec_is_policy_xfer(op, x)) {
        return 0;
    }
    if (x->status != UCS_OK) {
        coll_op_xfer_failed(op, x);
    } else if (x == &op->desc_recv) {
        desc_check(op);
    } else if (x != &op->desc_send) {
        coll_codec_policy_xfer(op, x);
        maybe_complete(op);
    }
    return 1;
}

/* A stage's transfer that completed: a send, or a receive of the length it expected. */
static void stage_xfer(coll_op_t *op, coll_xfer_t *x)
{
    char nm[64];

    if (x->is_send || x->length == x->expect) {
        op->stage->on_xfer(op, x);
        return;
    }
    coll_job_fail(op->job, COLL_ERR_MISMATCH, 1,
                  "%s: expected %zu bytes from node %u, got %zu (ranks disagree on the count)",
                  name(&op->desc, nm, sizeof(nm)), x->expect, x->peer, x->length);
}

static void dispatch(coll_op_t *op, coll_xfer_t *x)
{
    coll_job_t *job = op->job;
    char nm[64];

    /* A node that said goodbye had received everything it needed: a send to it that fails
     * because its endpoint closed was delivered. */
    if (x->status != UCS_OK && x->is_send && job->nodes[x->peer].left) {
        x->status = UCS_OK;
    }
    if (agreement_xfer(op, x)) {
        return;
    }
    if (x->kind == COLL_XFER_STAGE && x->status == UCS_OK) {
        stage_xfer(op, x); /* the stage's own, whatever the algorithm (a compressed step's too) */
    } else if (op->impl->flags & COLL_IMPL_OWN_ERRORS) {
        op->impl->on_xfer(op, x);
    } else if (!x->is_send && x->status == UCS_ERR_MESSAGE_TRUNCATED) {
        /* More bytes than posted: the data outran the descriptor of a larger count. */
        coll_job_fail(job, COLL_ERR_MISMATCH, 1,
                      "%s: node %u sent more than the %zu bytes expected (ranks disagree on "
                      "the count)", name(&op->desc, nm, sizeof(nm)), x->peer, x->expect);
    } else if (x->status != UCS_OK) {
        coll_op_xfer_failed(op, x);
    } else if (x->is_send) {
        op->impl->on_xfer(op, x);
    } else if (x->length != x->expect && !(op->impl->flags & COLL_IMPL_SELF_CHECK)) {
        coll_job_fail(job, COLL_ERR_MISMATCH, 1,
                      "%s: expected %zu bytes from node %u, got %zu (ranks disagree on the count)",
                      name(&op->desc, nm, sizeof(nm)), x->expect, x->peer, x->length);
    } else if (!op->desc_ok && !(op->impl->flags & COLL_IMPL_SELF_CHECK)) {
        coll_list_push(&op->parked, &x->link);
    } else {
        op->impl->on_xfer(op, x);
    }
}

/* A transfer completed (or failed): the transport's callback. The transfer keeps the
 * operation alive while the engine handles it, even if the operation completes or fails
 * meanwhile. */
static void on_xfer(coll_xfer_t *x)
{
    coll_op_t *op = x->op;

    coll_list_remove(&x->posted);
    if (!op->done) {
        dispatch(op, x);
    }
    COLL_ASSERT(op->inflight > 0);
    op->inflight--;
    coll_op_maybe_free(op);
}

static const coll_transport_ops_t engine_transport = {.on_xfer = on_xfer};

coll_status_t coll_engine_job_open(coll_job_t *job)
{
    return coll_transport_job_open(job, &engine_transport);
}

void coll_engine_job_close(coll_job_t *job)
{
    coll_op_fail_all(job); /* cancels receives */
    coll_transport_job_close(job);
}

static coll_status_t posted(coll_op_t *op, coll_xfer_t *x, coll_status_t st)
{
    if (st == COLL_OK) {
        coll_list_push(&op->posted, &x->posted);
        op->inflight++;
    }
    return st;
}

coll_status_t coll_op_post_job_node(coll_op_t *op, int send, uint32_t node, uint64_t tag,
                                    void *buf, size_t len, coll_xfer_t *x)
{
    x->op = op;
    return posted(op, x, send ? coll_transport_send(op->job, node, tag, buf, len, x)
                              : coll_transport_recv(op->job, node, tag, buf, len, x));
}

coll_status_t coll_op_send(coll_op_t *op, uint32_t node, uint64_t tag, const void *buf,
                           size_t len, coll_xfer_t *x)
{
    if (x->kind != COLL_TAG_DESC) {
        op->sent_bytes += len;
    }
    return coll_op_post_job_node(op, 1, op->grp->nodes[node], tag, (void *)buf, len, x);
}

coll_status_t coll_op_recv(coll_op_t *op, uint32_t from, uint64_t tag, void *buf, size_t len,
                           coll_xfer_t *x)
{
    return coll_op_post_job_node(op, 0, op->grp->nodes[from], tag, buf, len, x);
}

void coll_stage_release(coll_op_t *op)
{
    COLL_ASSERT(op->stage_barrier && op->impl->release != NULL);
    /* Held, so that a failure on the way (which completes it) cannot free it under us. */
    op->inflight++;
    if (!op->done) {
        op->impl->release(op);
    }
    op->inflight--;
    coll_op_maybe_free(op);
}

void coll_op_fail_all(coll_job_t *job)
{
    coll_op_t *op, *tmp;
    coll_list_for_each_safe(op, tmp, &job->engine.ops, coll_op_t, link)
    {
        coll_xfer_t *x, *xtmp;
        coll_list_for_each_safe(x, xtmp, &op->posted, coll_xfer_t, posted)
        {
            if (!x->is_send) {
                coll_transport_cancel(job, x);
            }
        }
        coll_op_complete(op, job->error, job->errmsg);
    }
}

void coll_op_maybe_free(coll_op_t *op)
{
    if (!op->done || op->inflight > 0) {
        return;
    }
    COLL_ASSERT(coll_list_empty(&op->posted));
    coll_list_remove(&op->link);
    if (op->impl != NULL && op->impl->cleanup != NULL) {
        op->impl->cleanup(op);
    }
    coll_codec_op_free(op);
    if (op->stage != NULL) {
        op->stage->end(op);
    }
    COLL_ASSERT(op->grp->ops > 0);
    op->grp->ops--;
    coll_group_unref(op->grp);
    free(op);
}

void coll_op_free_all(coll_job_t *job)
{
    coll_op_t *op, *tmp;
    coll_list_for_each_safe(op, tmp, &job->engine.ops, coll_op_t, link)
    {
        op->done = 1;
        op->inflight = 0; /* the worker is gone: nothing will complete any more */
        coll_list_init(&op->posted);
        coll_op_maybe_free(op);
    }
}
