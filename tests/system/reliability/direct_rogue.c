/*
 * direct_rogue: a UCX sender outside a job that sends a node's leader rank direct-path messages
 * (proto/direct.h) with a wrong job token, for fault_test.py direct_token. It gets the leader's
 * worker address (hex) and the keys of the allreduces that wait there from the daemon's
 * /status, and sends, for each key, one message with the tag of the first doubling round
 * (client/direct/rounds.c: COLL_TAG_RS, step 2) whose header says "all agreed" and whose
 * payload is @p bytes of 0x7f (float32 3.4e38: combined into a sum, it would show).
 *
 *   direct_rogue ADDRESS_HEX BYTES KEY...
 *
 * Prints "SENT n" once every send completed. Exit status: 0 sent, 1 UCX failed, 2 usage.
 * Every wait is bounded (ROGUE_WAIT_MS).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ucp/api/ucp.h>

#include "proto/direct.h"
#include "proto/tag.h"

#define ROGUE_WAIT_MS 5000
#define ROGUE_STEP 2 /* the first round of recursive doubling (rounds.c STEP_ROUND0) */
#define ROGUE_TOKEN 0x5eedbad0c0ffeeULL

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* @p hex as bytes (malloc'd, *len_p of them); NULL when it is not hex. */
static uint8_t *unhex(const char *hex, size_t *len_p)
{
    size_t n = strlen(hex) / 2;
    uint8_t *b = n > 0 && strlen(hex) % 2 == 0 ? malloc(n) : NULL;

    for (size_t i = 0; b != NULL && i < n; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) {
            free(b);
            return NULL;
        }
        b[i] = (uint8_t)v;
    }
    *len_p = n;
    return b;
}

/* Wait (bounded) for request @p req; returns its status. */
static ucs_status_t wait_req(ucp_worker_h w, void *req)
{
    ucs_status_t st = UCS_PTR_STATUS(req);
    uint64_t end = now_ms() + ROGUE_WAIT_MS;

    if (!UCS_PTR_IS_PTR(req)) {
        return st;
    }
    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS && now_ms() < end) {
        ucp_worker_progress(w);
    }
    ucp_request_free(req);
    return st == UCS_INPROGRESS ? UCS_ERR_TIMED_OUT : st;
}

/* One message with the wrong token for the allreduce of key @p key. */
static ucs_status_t send_one(ucp_worker_h w, ucp_ep_h ep, uint8_t *msg, size_t len,
                             uint64_t key)
{
    coll_direct_hdr_t *h = (coll_direct_hdr_t *)(void *)msg;
    ucp_request_param_t prm = {.op_attr_mask = 0};

    *h = (coll_direct_hdr_t){.token = ROGUE_TOKEN, .node = 1, .agreed = 1};
    h->desc.key = key;
    return wait_req(w, ucp_tag_send_nbx(ep, msg, len,
                                        coll_tag_make(0, key, COLL_TAG_RS, ROGUE_STEP, 0), &prm));
}

static int run(ucp_worker_h w, const uint8_t *addr, size_t bytes, int nkeys, char **keys)
{
    ucp_ep_params_t ep_prm = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                                            UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
                              .address = (const ucp_address_t *)addr,
                              .err_mode = UCP_ERR_HANDLING_MODE_PEER};
    ucp_request_param_t close_prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                     .flags = UCP_EP_CLOSE_FLAG_FORCE};
    size_t len = sizeof(coll_direct_hdr_t) + bytes;
    uint8_t *msg = malloc(len);
    ucs_status_t st = UCS_ERR_NO_MEMORY;
    ucp_ep_h ep;
    int sent = 0;

    if (msg == NULL || (st = ucp_ep_create(w, &ep_prm, &ep)) != UCS_OK) {
        fprintf(stderr, "direct_rogue: %s\n", ucs_status_string(st));
        free(msg);
        return 1;
    }
    memset(msg, 0x7f, len);
    for (int i = 0; i < nkeys && st == UCS_OK; i++) {
        st = send_one(w, ep, msg, len, strtoull(keys[i], NULL, 0));
        sent += st == UCS_OK;
    }
    if (st != UCS_OK) {
        fprintf(stderr, "direct_rogue: send: %s\n", ucs_status_string(st));
    }
    (void)wait_req(w, ucp_ep_close_nbx(ep, &close_prm));
    free(msg);
    printf("SENT %d\n", sent);
    return st == UCS_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG};
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucp_context_h ucp;
    ucp_worker_h w;
    uint8_t *addr;
    size_t addr_len;
    int rc;

    if (argc < 4 || (addr = unhex(argv[1], &addr_len)) == NULL) {
        fprintf(stderr, "usage: direct_rogue ADDRESS_HEX BYTES KEY...\n");
        return 2;
    }
    if (ucp_init(&params, NULL, &ucp) != UCS_OK) {
        fprintf(stderr, "direct_rogue: ucp_init failed\n");
        free(addr);
        return 1;
    }
    if (ucp_worker_create(ucp, &wp, &w) != UCS_OK) {
        fprintf(stderr, "direct_rogue: ucp_worker_create failed\n");
        ucp_cleanup(ucp);
        free(addr);
        return 1;
    }
    rc = run(w, addr, strtoull(argv[2], NULL, 0), argc - 3, argv + 3);
    ucp_worker_destroy(w);
    ucp_cleanup(ucp);
    free(addr);
    return rc;
}
