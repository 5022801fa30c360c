/*
 * libFuzzer harness: the daemon's decoder of job control messages from other daemons (abort,
 * goodbye, heartbeat, blame query, blame: UCX active messages), coll_jobmsg_decode(), for a job
 * of 4 nodes and a fixed epoch. The first byte picks the text bound, the rest is the message.
 *
 * Invariants: an accepted message has the job's epoch, a known type and a sender below the node
 * count; blame queries and blames hold a key; an abort's status is an error and its lost node
 * below the node count or "none"; the text of aborts, goodbyes and blames lies inside the input
 * after the header (and key) and within the bound; heartbeats and queries carry no text.
 */
#include "fuzz.h"

#include "proto/jobmsg.h"

#define NODES 4u
#define EPOCH 0x1122334455667788ull

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    coll_jobmsg_t m;
    const char *text = NULL;
    size_t text_len = 99999, max, head;
    uint64_t key = 1;
    int keyed;

    if (size < 1) {
        return 0;
    }
    max = data[0];
    data++;
    size--;
    if (!coll_jobmsg_decode(data, size, NODES, EPOCH, &m, &key, &text, &text_len, max)) {
        return 0;
    }
    FUZZ_CHECK(size >= sizeof(m), "accepted %zu bytes, shorter than the header", size);
    FUZZ_CHECK(m.epoch == EPOCH && m.node < NODES, "epoch %llx node %u",
               (unsigned long long)m.epoch, m.node);
    FUZZ_CHECK(m.type >= COLL_JOBMSG_ABORT && m.type <= COLL_JOBMSG_BLAME, "type %u", m.type);
    keyed = m.type == COLL_JOBMSG_BLAME_QUERY || m.type == COLL_JOBMSG_BLAME;
    head = sizeof(m) + (keyed ? sizeof(key) : 0);
    FUZZ_CHECK(size >= head && (keyed || key == 0), "a %u message of %zu bytes, key %llx",
               m.type, size, (unsigned long long)key);
    if (m.type == COLL_JOBMSG_HEARTBEAT || m.type == COLL_JOBMSG_BLAME_QUERY) {
        FUZZ_CHECK(text_len == 0, "a %u message with %zu bytes of text", m.type, text_len);
        return 0;
    }
    if (m.type == COLL_JOBMSG_ABORT) {
        FUZZ_CHECK(m.status < 0 && m.status > -2000, "abort status %d", m.status);
        FUZZ_CHECK(m.lost < NODES || m.lost == COLL_JOBMSG_NO_NODE, "lost node %u", m.lost);
    }
    FUZZ_CHECK(text_len <= max && text == (const char *)data + head && head + text_len <= size,
               "text of %zu bytes (bound %zu, input %zu)", text_len, max, size);
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < text_len; i++) {
        sink ^= (uint8_t)text[i]; /* every byte of it is readable (ASan checks) */
    }
    return 0;
}
