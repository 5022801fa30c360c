/**
 * @file stream.h
 * @brief Writing protobuf frames on libuv streams (client sessions and control links).
 */
#ifndef COLL_STREAM_H
#define COLL_STREAM_H

#include <protobuf-c/protobuf-c.h>
#include <uv.h>

#include <collective.h>

/**
 * @brief Write @p len bytes of an encoded frame: at once when the socket takes them, the rest
 *        queued (copied) behind earlier writes. The caller keeps ownership of @p frame.
 * @return COLL_OK; COLL_ERR_NOMEM; COLL_ERR_IO when the stream refuses the write.
 */
coll_status_t coll_stream_write(uv_stream_t *stream, const uint8_t *frame, size_t len);

/**
 * @brief Encode @p msg as one frame and write it with coll_stream_write().
 * @return COLL_OK; COLL_ERR_NOMEM; COLL_ERR_IO when the stream refuses the write (logged by the
 *         caller, which closes the stream).
 */
coll_status_t coll_stream_send(uv_stream_t *stream, const ProtobufCMessage *msg);

/**
 * @brief Parse "host:port" or "[v6addr]:port".
 * @return 0 on success, -1 when malformed (no port, port out of range, host too long), -2 for
 *         an IPv6 address with a port but without brackets ("fd00::1:2": write [fd00::1]:2).
 */
int coll_parse_hostport(const char *text, char *host, size_t hostlen, int *port_p);

#endif
