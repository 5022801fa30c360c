/*
 * Unit tests of the job parameter nccl (net/rdv_nccl.c): each node's offer from its daemon's
 * configuration, device layer and NCCL (the tests' stand-in, fake_libnccl.c, first on
 * LD_LIBRARY_PATH), and the root's decision from every node's offer: yes only when every node
 * can and no GPU is served by two of them, with the reason otherwise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "net/rdv_nccl.h"

static coll_daemon_t d;

/* A daemon with @p ndev devices of layer @p ops and nccl = @p key. */
static void daemon_with(const coll_dev_ops_t *ops, int ndev, char *key)
{
    memset(&d, 0, sizeof(d));
    d.cfg.nccl = key;
    d.devices.ops = ops;
    d.devices.n = ndev;
    for (int i = 0; i < ndev; i++) {
        memset(d.devices.dev[i].info.uuid, 0xa0 + i, COLL_DEV_UUID_BYTES);
    }
}

static void offer(Coll__Wire__NodeJoin *j, ProtobufCBinaryData *uuids)
{
    coll__wire__node_join__init(j);
    coll_rdv_nccl_offer(&d, j, uuids);
}

static void test_offers(void **state)
{
    static const coll_dev_ops_t real = {.name = "cuda"}; /* any layer but the fake */
    ProtobufCBinaryData uuids[COLL_DEV_MAX];
    Coll__Wire__NodeJoin j;

    (void)state;
    daemon_with(&coll_dev_fake, 2, "auto");
    offer(&j, uuids);
    assert_true(j.nccl);
    assert_int_equal(j.n_device_uuids, 0); /* fake devices name no GPU */
    daemon_with(&coll_dev_fake, 2, "off");
    offer(&j, uuids);
    assert_false(j.nccl);
    assert_string_equal(j.nccl_why, "nccl = off");
    daemon_with(NULL, 0, "auto");
    offer(&j, uuids);
    assert_false(j.nccl);
    assert_string_equal(j.nccl_why, "no device");
    daemon_with(&real, 2, "auto");
    offer(&j, uuids);
    assert_false(j.nccl);
    assert_string_equal(j.nccl_why, "the tests' stand-in NCCL runs on the fake device layer only");
    assert_int_equal(j.n_device_uuids, 2);
    assert_int_equal(j.device_uuids[1].len, COLL_DEV_UUID_BYTES);
    assert_int_equal(j.device_uuids[1].data[0], 0xa1);
}

static void join_of(Coll__Wire__NodeJoin *j, char *host, int nccl, ProtobufCBinaryData *uuid,
                    size_t nuuid)
{
    coll__wire__node_join__init(j);
    j->host = host;
    j->nccl = nccl;
    j->nccl_why = nccl ? "" : "no NCCL (absent: libnccl.so.2: cannot open shared object file)";
    j->device_uuids = uuid;
    j->n_device_uuids = nuuid;
}

static void test_decisions(void **state)
{
    uint8_t g[3][COLL_DEV_UUID_BYTES];
    ProtobufCBinaryData u[3];
    Coll__Wire__NodeJoin j[3];
    const Coll__Wire__NodeJoin *joins[3] = {&j[0], &j[1], &j[2]};
    char why[300];

    (void)state;
    for (int i = 0; i < 3; i++) {
        memset(g[i], i + 1, sizeof(g[i]));
        u[i] = (ProtobufCBinaryData){COLL_DEV_UUID_BYTES, g[i]};
    }
    join_of(&j[0], "a", 1, &u[0], 1);
    join_of(&j[1], "b", 1, &u[1], 2); /* GPUs 1 and 2 */
    join_of(&j[2], "c", 1, NULL, 0);  /* the fake layer's: none named */
    assert_int_equal(coll_rdv_nccl_decide(joins, 3, why, sizeof(why)), 1);
    assert_string_equal(why, "");
    join_of(&j[2], "c", 1, &u[2], 1); /* GPU 2 again */
    assert_int_equal(coll_rdv_nccl_decide(joins, 3, why, sizeof(why)), 0);
    assert_string_equal(why, "nodes b and c serve the same GPU (NCCL refuses two ranks on one)");
    join_of(&j[1], "b", 0, &u[1], 1);
    assert_int_equal(coll_rdv_nccl_decide(joins, 3, why, sizeof(why)), 0);
    assert_string_equal(why, "node b: no NCCL (absent: libnccl.so.2: cannot open shared object "
                             "file)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_offers),
        cmocka_unit_test(test_decisions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
