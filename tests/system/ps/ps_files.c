/* The files of ps_rank's checkpoints (ps_files.h). */
#include "ps_files.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ps_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    int ok = f != NULL && fwrite(data, 1, len, f) == len;

    if (f != NULL && fclose(f) != 0) {
        ok = 0;
    }
    if (!ok) {
        fprintf(stderr, "ps_rank: writing %s: %s\n", path, strerror(errno));
    }
    return ok ? 0 : -1;
}

void *ps_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    void *buf = NULL;
    long n;

    if (f != NULL && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
        fseek(f, 0, SEEK_SET) == 0 && (buf = malloc(n ? (size_t)n : 1)) != NULL &&
        fread(buf, 1, (size_t)n, f) == (size_t)n) {
        *len = (size_t)n;
        fclose(f);
        return buf;
    }
    fprintf(stderr, "ps_rank: reading %s: %s\n", path, strerror(errno));
    free(buf);
    if (f != NULL) {
        fclose(f);
    }
    return NULL;
}

int ps_read_shards(const char *dir, void **images, size_t *lens, size_t max, size_t *n)
{
    struct dirent **names;
    int k = scandir(dir, &names, NULL, alphasort);
    char path[4096];

    *n = 0;
    for (int i = 0; i < k; i++) {
        if (strncmp(names[i]->d_name, "shard", 5) == 0 && *n < max) {
            snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
            if ((images[*n] = ps_read_file(path, &lens[*n])) != NULL) {
                (*n)++;
            }
        }
        free(names[i]);
    }
    free(k >= 0 ? names : NULL);
    return *n > 0 ? 0 : -1;
}
