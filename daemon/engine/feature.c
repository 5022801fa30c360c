/*
 * The features an operation may carry (feature.h), registered here and nowhere else: a new one
 * is a table of hooks in its own file and one line below. The order is the order their hooks
 * run in: compression chooses what an operation runs before the bytes it sends are counted
 * (the wire), the parameter service's stage attaches after both, and the node-reduced path,
 * which answers the ranks through their shared-memory posts, completes last, when the others
 * filled the completion record. The staged path of device buffers attaches after them all: it
 * wraps the implementation compression or the table chose (their attach hooks only set up
 * state; the implementations read op->in and op->out once started, by then the host copies)
 * and finishes by copying the results back before the ranks hear of them. A parameter service
 * step on device buffers carries both: the stage reads op->in and op->out when its pieces
 * arrive, by then the host copies (engine/dev_staged.c copies the master weights in too).
 */
#include "engine/feature.h"

#include "common/assert.h"
#include "engine/codec/codec.h"
#include "engine/node_op.h"
#include "engine/stage.h"
#include "engine/dev_staged.h"

static const coll_op_feature_t *const features[] = {
    &coll_codec_feature,
    &coll_wire_feature,
    &coll_stage_feature,
    &coll_node_feature,
    &coll_dev_staged_feature,
};

_Static_assert(sizeof(features) / sizeof(features[0]) <= COLL_OP_FEATURES,
               "coll_op_t has a slot per registered feature");

const coll_op_feature_t *const *coll_op_features(uint32_t *n_p)
{
    *n_p = (uint32_t)(sizeof(features) / sizeof(features[0]));
    return features;
}

/* Every caller names a feature of the table. */
static uint32_t index_of(const coll_op_feature_t *f)
{
    uint32_t i = 0;

    while (i + 1 < sizeof(features) / sizeof(features[0]) && features[i] != f) {
        i++;
    }
    COLL_ASSERT(features[i] == f);
    return i;
}

void *coll_op_feature_state(const coll_op_t *op, const coll_op_feature_t *f)
{
    return op->feature[index_of(f)];
}

void coll_op_feature_attach(coll_op_t *op, const coll_op_feature_t *f, void *state)
{
    uint32_t i = index_of(f);

    COLL_ASSERT(state != NULL && op->feature[i] == NULL);
    op->feature[i] = state;
}

coll_status_t coll_op_feature_post(coll_op_t *op, const coll_op_feature_t *f, int send,
                                   uint32_t node, uint64_t tag, void *buf, size_t len,
                                   coll_xfer_t *x)
{
    x->feature = (uint8_t)(index_of(f) + 1);
    return send ? coll_op_send(op, node, tag, buf, len, x)
                : coll_op_recv(op, node, tag, buf, len, x);
}

const coll_op_feature_t *coll_op_feature_of(const coll_xfer_t *x)
{
    return x->feature != 0 ? features[x->feature - 1] : NULL;
}
