/**
 * @file ucx_address.h
 * @brief Checking a UCX worker address that came from another daemon before UCX reads it.
 *
 * UCX 1.13 unpacks a worker address (ucp_address_unpack(), called by ucp_ep_create()) without
 * its length: it trusts every length byte it meets, and an unknown version fails an assertion
 * that aborts the process. So an address from a peer is first walked here, every field
 * bounds-checked against the bytes that came, in UCX 1.13's packed format (versions 1 and 2 of
 * src/ucp/wireup/address.c, non-unified mode): header, worker uuid, client id and name; per
 * device its memory domain, address length, paths and system device; per interface its
 * transport checksum, attributes, address and endpoint addresses; nothing may be left over.
 * Values UCX shifts or divides by are bounded as it needs them (memory domain index < 64, at
 * least one path, at most 128 interfaces and 6 endpoint addresses each), and the interface
 * attributes it compares must be finite numbers (version 1's float overhead, bandwidth and
 * latency, version 2's 8-bit floats), since a NaN score fails another of its assertions.
 *
 * Why a walk of our own and not UCX itself in a forked child: unpacking alone is no public UCX
 * API, and a child running ucp_ep_create() would send a wireup message to the address's owner
 * from the daemon's own worker, which it inherited. This walk is pure, bounded and fuzzed
 * (tests/fuzz/fuzz_peer_handshake.c), so nothing a peer sends can abort the daemon through it.
 *
 * Unified mode (UCX_UNIFIED_MODE=y) packs no lengths (each side takes them from its own
 * interfaces), so its addresses cannot be checked: the transport refuses to start in it.
 */
#ifndef COLL_NET_UCX_ADDRESS_H
#define COLL_NET_UCX_ADDRESS_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

/** The UCX release whose address format coll_ucx_address_check() walks. */
#define COLL_UCX_ADDRESS_MAJOR 1
#define COLL_UCX_ADDRESS_MINOR 13

/**
 * @brief Check that @p addr (@p len bytes) is a whole UCX 1.13 worker address that UCX can
 *        unpack within its length. Pure; any thread.
 * @return COLL_OK; COLL_ERR_PROTOCOL with the first fault in @p why ("version 7 unknown",
 *         "interface 3: address of 40 bytes past the end").
 */
coll_status_t coll_ucx_address_check(const uint8_t *addr, size_t len, char *why, size_t whylen);

#endif
