/*
 * libFuzzer harness: the daemon's decoder of job control messages from other daemons (abort,
 * goodbye, heartbeat: UCX active messages), coll_control_decode(), for a job of 4 nodes and a
 * fixed epoch. The first byte picks the text bound, the rest is the message.
 *
 * Invariants: an accepted message has the job's epoch, a known type and a sender below the node
 * count; an abort's status is an error, its lost node below the node count or "none", and its
 * text lies inside the input and within the bound; other kinds carry no text.
 */
#include "fuzz.h"

#include "control.h"

#define NODES 4u
#define EPOCH 0x1122334455667788ull

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    coll_control_msg_t m;
    const char *text = NULL;
    size_t text_len = 99999, max;

    if (size < 1) {
        return 0;
    }
    max = data[0];
    data++;
    size--;
    if (!coll_control_decode(data, size, NODES, EPOCH, &m, &text, &text_len, max)) {
        return 0;
    }
    FUZZ_CHECK(size >= sizeof(m), "accepted %zu bytes, shorter than the header", size);
    FUZZ_CHECK(m.epoch == EPOCH && m.node < NODES, "epoch %llx node %u",
               (unsigned long long)m.epoch, m.node);
    FUZZ_CHECK(m.type >= COLL_CTL_ABORT && m.type <= COLL_CTL_HEARTBEAT, "type %u", m.type);
    if (m.type != COLL_CTL_ABORT) {
        FUZZ_CHECK(text_len == 0, "a %u message with %zu bytes of text", m.type, text_len);
        return 0;
    }
    FUZZ_CHECK(m.status < 0 && m.status > -2000, "abort status %d", m.status);
    FUZZ_CHECK(m.lost < NODES || m.lost == COLL_CTL_NO_NODE, "lost node %u", m.lost);
    FUZZ_CHECK(text_len <= max && text == (const char *)data + sizeof(m) &&
                   sizeof(m) + text_len <= size, "text of %zu bytes (bound %zu, input %zu)",
               text_len, max, size);
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < text_len; i++) {
        sink ^= (uint8_t)text[i]; /* every byte of it is readable (ASan checks) */
    }
    return 0;
}
