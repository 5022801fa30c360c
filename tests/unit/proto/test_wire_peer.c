/*
 * Unit tests of the peer decoders (proto/wire.h): NodeJoin and NodeJoinReply fields, each
 * broken on its own from a valid message (wire_msgs.h); a join's device UUIDs (the NCCL offer,
 * net/rdv_nccl.h) bounded in count and length.
 */
#include "wire_msgs.h"

#include "device/dev.h"

/* ---- NodeJoin fields ---- */

static void test_node_join_rank_at_world_size_rejected(void **state)
{
    peer_t p;
    peer_init(&p);
    p.ranks[1][1] = p.join.world_size;
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "rank 6 >= world size 6");
}

static void test_node_join_without_ranks_rejected(void **state)
{
    peer_t p;
    peer_init(&p);
    p.join.n_ranks = 0;
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "ranks");
}

static void test_node_join_more_ranks_than_world_rejected(void **state)
{
    uint32_t ranks[3] = {0, 1, 1};
    peer_t p;

    peer_init(&p);
    p.join.world_size = 2;
    p.join.ranks = ranks;
    p.join.n_ranks = 3;
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "ranks");
}

static void test_node_join_worker_address_empty_rejected(void **state)
{
    peer_t p;
    peer_init(&p);
    p.join.worker_address.len = 0;
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "worker address");
}

static void test_node_join_worker_address_size_limit(void **state)
{
    uint8_t *addr = calloc(1, COLL_WORKER_ADDR_MAX + 1);
    peer_t p;

    assert_non_null(addr);
    peer_init(&p);
    p.join.worker_address.data = addr;
    p.join.worker_address.len = COLL_WORKER_ADDR_MAX;
    expect_ok(KIND_PEER, peer_join(&p));
    p.join.worker_address.len = COLL_WORKER_ADDR_MAX + 1;
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "worker address");
    free(addr);
}

static void test_node_join_world_size_out_of_range_rejected(void **state)
{
    peer_t p;
    peer_init(&p);
    p.join.world_size = 0;
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "world size");
    p.join.world_size = COLL_WORLD_MAX + 1;
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "world size");
}

static void test_node_join_bad_job_id_rejected(void **state)
{
    peer_t p;
    peer_init(&p);
    p.join.job = "";
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "job id");
    p.join.job = "a b";
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "job id");
}

static void test_node_join_host_too_long_rejected(void **state)
{
    char *over = repeat('h', 256);
    peer_t p;

    peer_init(&p);
    p.join.host = over;
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "host");
    free(over);
}

static void test_node_join_device_uuids_bounded(void **state)
{
    uint8_t uuid[COLL_DEV_UUID_BYTES + 1] = {0};
    ProtobufCBinaryData u[COLL_DEV_MAX + 1];
    peer_t p;

    peer_init(&p);
    for (size_t i = 0; i <= COLL_DEV_MAX; i++) {
        u[i] = (ProtobufCBinaryData){COLL_DEV_UUID_BYTES, uuid};
    }
    p.join.device_uuids = u;
    p.join.n_device_uuids = COLL_DEV_MAX;
    expect_ok(KIND_PEER, peer_join(&p));
    p.join.n_device_uuids = COLL_DEV_MAX + 1;
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "device UUIDs");
    p.join.n_device_uuids = 2;
    u[1].len = COLL_DEV_UUID_BYTES + 1;
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "a device UUID of 17 bytes");
}

/* ---- NodeJoinReply fields ---- */

static void test_node_join_reply_node_rank_at_n_nodes_rejected(void **state)
{
    peer_t p;
    peer_init(&p);
    p.reply.node_rank = NODES;
    expect_err(KIND_PEER, peer_reply(&p), COLL_ERR_PROTOCOL, "node rank");
}

static void test_node_join_reply_without_nodes_rejected(void **state)
{
    peer_t p;
    peer_init(&p);
    p.reply.n_nodes = 0;
    p.reply.node_rank = 0;
    expect_err(KIND_PEER, peer_reply(&p), COLL_ERR_PROTOCOL, "nodes");
}

static void test_node_join_reply_node_without_address_rejected(void **state)
{
    peer_t p;
    peer_init(&p);
    p.info[2].worker_address.len = 0;
    expect_err(KIND_PEER, peer_reply(&p), COLL_ERR_PROTOCOL, "worker address");
}

static void test_node_join_reply_node_without_ranks_rejected(void **state)
{
    peer_t p;
    peer_init(&p);
    p.info[0].n_ranks = 0;
    expect_err(KIND_PEER, peer_reply(&p), COLL_ERR_PROTOCOL, "ranks");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_join_rank_at_world_size_rejected),
        cmocka_unit_test(test_node_join_without_ranks_rejected),
        cmocka_unit_test(test_node_join_more_ranks_than_world_rejected),
        cmocka_unit_test(test_node_join_worker_address_empty_rejected),
        cmocka_unit_test(test_node_join_worker_address_size_limit),
        cmocka_unit_test(test_node_join_world_size_out_of_range_rejected),
        cmocka_unit_test(test_node_join_bad_job_id_rejected),
        cmocka_unit_test(test_node_join_host_too_long_rejected),
        cmocka_unit_test(test_node_join_device_uuids_bounded),
        cmocka_unit_test(test_node_join_reply_node_rank_at_n_nodes_rejected),
        cmocka_unit_test(test_node_join_reply_without_nodes_rejected),
        cmocka_unit_test(test_node_join_reply_node_without_address_rejected),
        cmocka_unit_test(test_node_join_reply_node_without_ranks_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
