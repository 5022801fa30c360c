/*
 * Whether a job's daemons run NCCL between them (rdv_nccl.h): each node's offer in its join and
 * the root's decision from all of them.
 */
#include "net/rdv_nccl.h"

#include <stdio.h>
#include <string.h>

#include "device/nccl.h"

/* Why this node cannot run NCCL, or NULL when it can. */
static const char *cannot(const coll_daemon_t *d, char *buf, size_t len)
{
    const coll_nccl_ops_t *nccl;
    const char *text;
    int fake = d->devices.ops == &coll_dev_fake;

    if (strcmp(d->cfg.nccl, "off") == 0) {
        return "nccl = off";
    }
    if (d->devices.ops == NULL || d->devices.n == 0) {
        return "no device";
    }
    if (coll_nccl_open(&nccl) != COLL_OK) {
        coll_nccl_probe(&text);
        snprintf(buf, len, "no NCCL (%s)", text);
        return buf;
    }
    if (nccl->host_memory != fake) {
        return fake ? "the fake device layer runs NCCL only through the tests' stand-in"
                    : "the tests' stand-in NCCL runs on the fake device layer only";
    }
    return NULL;
}

void coll_rdv_nccl_offer(const coll_daemon_t *d, Coll__Wire__NodeJoin *j,
                         ProtobufCBinaryData *uuids)
{
    static char why[COLL_DEV_TEXT_MAX + 16];
    const char *no = cannot(d, why, sizeof(why));

    j->nccl = no == NULL;
    j->nccl_why = no != NULL ? (char *)no : "";
    j->n_device_uuids = 0;
    j->device_uuids = uuids;
    for (int i = 0; d->devices.ops != &coll_dev_fake && i < d->devices.n; i++) {
        uuids[j->n_device_uuids++] = (ProtobufCBinaryData){
            COLL_DEV_UUID_BYTES, (uint8_t *)d->devices.dev[i].info.uuid};
    }
}

/* Whether joins @p a and @p b name one GPU. */
static int share_a_gpu(const Coll__Wire__NodeJoin *a, const Coll__Wire__NodeJoin *b)
{
    for (size_t x = 0; x < a->n_device_uuids; x++) {
        for (size_t y = 0; y < b->n_device_uuids; y++) {
            if (a->device_uuids[x].len == b->device_uuids[y].len &&
                memcmp(a->device_uuids[x].data, b->device_uuids[y].data,
                       a->device_uuids[x].len) == 0) {
                return 1;
            }
        }
    }
    return 0;
}

int coll_rdv_nccl_decide(const Coll__Wire__NodeJoin *const *joins, size_t n, char *why,
                         size_t whylen)
{
    why[0] = '\0';
    for (size_t a = 0; a < n; a++) {
        if (!joins[a]->nccl) {
            snprintf(why, whylen, "node %s: %s", joins[a]->host, joins[a]->nccl_why);
            return 0;
        }
        for (size_t b = 0; b < a; b++) {
            if (share_a_gpu(joins[a], joins[b])) {
                snprintf(why, whylen, "nodes %s and %s serve the same GPU (NCCL refuses two "
                         "ranks on one)", joins[b]->host, joins[a]->host);
                return 0;
            }
        }
    }
    return 1;
}
