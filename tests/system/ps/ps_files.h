/*
 * The files of ps_rank's checkpoints (--save, --load, --dump): whole files written and read,
 * the shards of a directory. Errors are printed on stderr with the path.
 */
#ifndef TEST_PS_FILES_H
#define TEST_PS_FILES_H

#include <stddef.h>

/* @return 0, or -1 when @p path could not be written whole. */
int ps_write_file(const char *path, const void *data, size_t len);

/* @return The contents of @p path (malloc'd, its size in *@p len), or NULL. */
void *ps_read_file(const char *path, size_t *len);

/* Every @p dir/shard* file, in name order, at most @p max: @p n images (malloc'd) and their
 * sizes. @return 0, or -1 when none could be read. */
int ps_read_shards(const char *dir, void **images, size_t *lens, size_t max, size_t *n);

#endif
