/* Shared by every harness: failure reports and the re-validation of accepted envelopes. */
#include "fuzz.h"
#include "fuzz_wire.h"
#include "proto/frame.h"

static FILE *report;

FILE *fuzz_report_stream(void)
{
    return report != NULL ? report : stderr;
}

void fuzz_report_to(FILE *f)
{
    report = f;
}

void fuzz_fail(const char *file, int line, const char *cond)
{
    fprintf(fuzz_report_stream(), "%s:%d: invariant violated: %s\n", file, line, cond);
}

/* Drop the unknown fields of @p m and of every message inside it. The daemons ignore them (a
 * newer peer's fields) and never send a received message on. protobuf-c also keeps a field
 * numbered 0 when its tag is written in more than one byte (0x80 0x00), and packs it back as
 * 0x00, which it then refuses: only the fields we know are compared. */
static void strip_unknown(ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;

    for (unsigned i = 0; i < m->n_unknown_fields; i++) {
        free(m->unknown_fields[i].data);
    }
    free(m->unknown_fields);
    m->unknown_fields = NULL;
    m->n_unknown_fields = 0;
    for (unsigned f = 0; f < d->n_fields; f++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[f];
        char *at = (char *)m + fd->offset;

        if (fd->type != PROTOBUF_C_TYPE_MESSAGE) {
            continue;
        }
        if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(size_t *)(void *)((char *)m + fd->quantifier_offset);
            ProtobufCMessage **items = *(ProtobufCMessage ***)(void *)at;
            for (size_t k = 0; k < n; k++) {
                strip_unknown(items[k]);
            }
        } else if (!(fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) ||
                   *(uint32_t *)(void *)((char *)m + fd->quantifier_offset) == fd->id) {
            if (*(ProtobufCMessage **)(void *)at != NULL) {
                strip_unknown(*(ProtobufCMessage **)(void *)at);
            }
        }
    }
}

void fuzz_check_roundtrip(ProtobufCMessage *m, fuzz_decode_t decode)
{
    size_t len, len2;
    uint8_t *buf, *buf2;
    ProtobufCMessage *again;
    char err[256] = "";
    coll_status_t st;

    strip_unknown(m);
    len = protobuf_c_message_get_packed_size(m);
    buf = malloc(len + 1);

    FUZZ_CHECK(buf != NULL, "out of memory");
    FUZZ_CHECK(protobuf_c_message_pack(m, buf) == len, "packed size differs from its estimate");
    st = decode(buf, len, &again, err, sizeof(err));
    FUZZ_CHECK(st == COLL_OK, "an accepted message, packed again, is refused: %s (%s)",
               coll_err_name(st), err);
    len2 = protobuf_c_message_get_packed_size(again);
    buf2 = malloc(len2 + 1);
    FUZZ_CHECK(buf2 != NULL, "out of memory");
    protobuf_c_message_pack(again, buf2);
    FUZZ_CHECK(len2 == len && memcmp(buf, buf2, len) == 0,
               "decoding and packing again changed the message (%zu -> %zu bytes)", len, len2);
    protobuf_c_message_free_unpacked(again, NULL);
    free(buf2);
    free(buf);
}

int fuzz_check_verdict(coll_status_t st, const char *err, size_t errlen, int have_msg,
                       uint32_t version)
{
    if (st != COLL_OK) {
        FUZZ_CHECK(st == COLL_ERR_PROTOCOL || st == COLL_ERR_VERSION || st == COLL_ERR_NOMEM,
                   "refused with %s", coll_err_name(st));
        FUZZ_CHECK(err[0] != '\0' && memchr(err, '\0', errlen) != NULL,
                   "refused without a reason");
        return 0;
    }
    FUZZ_CHECK(have_msg && version == COLL_WIRE_VERSION, "accepted version %u", version);
    return 1;
}

int fuzz_cstr_len_below(const char *s, size_t limit)
{
    return s != NULL && strlen(s) < limit;
}
