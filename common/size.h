/**
 * @file size.h
 * @brief Byte sizes as people write them, shared by the daemon's configuration and the
 *        library's COLL_POOL_SIZE (not installed).
 */
#ifndef COLL_SIZE_H
#define COLL_SIZE_H

#include <stdint.h>

/**
 * @brief Parse a byte size such as "4096", "4096B", "256K", "64M", "2G", "1T" (powers of 1024,
 *        case-insensitive, an optional trailing B).
 * @return 0 on success, -1 when malformed or overflowing (nothing is stored then).
 */
int coll_parse_size(const char *text, uint64_t *bytes_p);

#endif
