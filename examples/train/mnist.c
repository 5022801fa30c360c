/* IDX reader for (Fashion-)MNIST; see mnist.h for the format. */
#include "mnist.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_MAGIC_UBYTE_1D 0x00000801u
#define IDX_MAGIC_UBYTE_3D 0x00000803u
#define IDX_MAX_DIMS 3
/* gzread() takes an unsigned int length; read in chunks well below that. */
#define IDX_CHUNK (1u << 30)

/* An open IDX file and the name it is reported under. */
typedef struct idx_file {
    gzFile gz;
    char path[4096];
} idx_file_t;

/* Opens <dir>/<name>.gz, or <dir>/<name> when only the uncompressed file exists. zlib reads a
 * file without a gzip header transparently, so both go through gzread(). */
static int idx_open(const char *dir, const char *name, idx_file_t *f)
{
    char plain[sizeof(f->path)];

    snprintf(f->path, sizeof(f->path), "%s/%s.gz", dir, name);
    snprintf(plain, sizeof(plain), "%s/%s", dir, name);
    if (access(f->path, F_OK) != 0 && access(plain, F_OK) == 0) {
        memcpy(f->path, plain, sizeof(plain));
    }
    errno = 0;
    f->gz = gzopen(f->path, "rb");
    if (f->gz == NULL) {
        fprintf(stderr, "coll-train: cannot open %s: %s\n", f->path,
                errno ? strerror(errno) : "out of memory");
        return -1;
    }
    return 0;
}

/* Reads up to len bytes; *got tells how many arrived before the end of the file. */
static int idx_read(idx_file_t *f, void *buf, size_t len, size_t *got)
{
    size_t done = 0;

    while (done < len) {
        size_t want = len - done < IDX_CHUNK ? len - done : IDX_CHUNK;
        int n = gzread(f->gz, (char *)buf + done, (unsigned)want);
        if (n < 0) {
            int zerr;
            const char *msg = gzerror(f->gz, &zerr);
            fprintf(stderr, "coll-train: %s: read error: %s\n", f->path,
                    zerr == Z_ERRNO ? strerror(errno) : msg);
            return -1;
        }
        if (n == 0) {
            break;
        }
        done += (size_t)n;
    }
    *got = done;
    return 0;
}

static int idx_read_exact(idx_file_t *f, void *buf, size_t len, const char *what)
{
    size_t got;

    if (idx_read(f, buf, len, &got) != 0) {
        return -1;
    }
    if (got < len) {
        fprintf(stderr, "coll-train: %s: truncated: %s needs %zu bytes, only %zu are there\n",
                f->path, what, len, got);
        return -1;
    }
    return 0;
}

static uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Reads the magic number and the ndims sizes that follow it. */
static int idx_read_header(idx_file_t *f, uint32_t magic, int ndims, uint32_t *dims)
{
    uint8_t hdr[4 * (1 + IDX_MAX_DIMS)];

    if (idx_read_exact(f, hdr, 4 * (size_t)(1 + ndims), "the IDX header") != 0) {
        return -1;
    }
    if (be32(hdr) != magic) {
        fprintf(stderr,
                "coll-train: %s: bad magic number 0x%08x (expected 0x%08x: IDX of unsigned "
                "bytes with %d dimension%s)\n",
                f->path, be32(hdr), magic, ndims, ndims > 1 ? "s" : "");
        return -1;
    }
    for (int i = 0; i < ndims; i++) {
        dims[i] = be32(hdr + 4 * (1 + i));
        if (dims[i] == 0) {
            fprintf(stderr, "coll-train: %s: dimension %d has size 0\n", f->path, i);
            return -1;
        }
    }
    return 0;
}

/* Fails when the file goes on after the data its header declares. */
static int idx_check_end(idx_file_t *f, size_t data_bytes)
{
    uint8_t extra;
    size_t got;

    if (idx_read(f, &extra, 1, &got) != 0) {
        return -1;
    }
    if (got != 0) {
        fprintf(stderr, "coll-train: %s: trailing data after the %zu data bytes of the header\n",
                f->path, data_bytes);
        return -1;
    }
    return 0;
}

/* Reads a whole IDX file of unsigned bytes: header sizes into dims, the elements into *data_p
 * (malloc'ed, owned by the caller on success), the path it was read from into path. */
static int idx_load(const char *dir, const char *name, uint32_t magic, int ndims, uint32_t *dims,
                    uint8_t **data_p, char *path, size_t path_len)
{
    idx_file_t f;
    uint8_t *data = NULL;
    size_t bytes = 1;

    if (idx_open(dir, name, &f) != 0) {
        return -1;
    }
    snprintf(path, path_len, "%s", f.path);
    if (idx_read_header(&f, magic, ndims, dims) != 0) {
        goto err_close;
    }
    for (int i = 0; i < ndims; i++) {
        if (dims[i] > SIZE_MAX / bytes) {
            fprintf(stderr, "coll-train: %s: header declares more data than memory can hold\n",
                    f.path);
            goto err_close;
        }
        bytes *= dims[i];
    }
    data = malloc(bytes);
    if (data == NULL) {
        fprintf(stderr, "coll-train: %s: cannot allocate %zu bytes\n", f.path, bytes);
        goto err_close;
    }
    if (idx_read_exact(&f, data, bytes, "the data") != 0 || idx_check_end(&f, bytes) != 0) {
        goto err_free;
    }
    gzclose(f.gz);
    *data_p = data;
    return 0;

err_free:
    free(data);
err_close:
    gzclose(f.gz);
    return -1;
}

static int mnist_check_labels(const char *path, const uint8_t *labels, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (labels[i] >= MNIST_CLASSES) {
            fprintf(stderr, "coll-train: %s: label %u of item %zu is not a class (0..%d)\n", path,
                    labels[i], i, MNIST_CLASSES - 1);
            return -1;
        }
    }
    return 0;
}

int mnist_load(const char *dir, const char *split, mnist_set_t *set)
{
    char img_name[256], lbl_name[256], img_path[4096], lbl_path[4096];
    uint32_t img_dims[3], lbl_dims[1];
    uint8_t *pixels, *labels;

    snprintf(img_name, sizeof(img_name), "%s-images-idx3-ubyte", split);
    snprintf(lbl_name, sizeof(lbl_name), "%s-labels-idx1-ubyte", split);
    if (idx_load(dir, img_name, IDX_MAGIC_UBYTE_3D, 3, img_dims, &pixels, img_path,
                 sizeof(img_path)) != 0) {
        return -1;
    }
    if (idx_load(dir, lbl_name, IDX_MAGIC_UBYTE_1D, 1, lbl_dims, &labels, lbl_path,
                 sizeof(lbl_path)) != 0) {
        goto err_pixels;
    }
    if (lbl_dims[0] != img_dims[0]) {
        fprintf(stderr, "coll-train: %s has %u labels but %s has %u images\n", lbl_path,
                lbl_dims[0], img_path, img_dims[0]);
        goto err_labels;
    }
    if (mnist_check_labels(lbl_path, labels, lbl_dims[0]) != 0) {
        goto err_labels;
    }
    set->count = img_dims[0];
    set->rows = img_dims[1];
    set->cols = img_dims[2];
    set->pixels = pixels;
    set->labels = labels;
    return 0;

err_labels:
    free(labels);
err_pixels:
    free(pixels);
    return -1;
}

void mnist_free(mnist_set_t *set)
{
    free(set->pixels);
    free(set->labels);
    memset(set, 0, sizeof(*set));
}

size_t mnist_image_size(const mnist_set_t *set)
{
    return set->rows * set->cols;
}

void mnist_gather(const mnist_set_t *set, const uint32_t *index, size_t first, size_t n,
                  float mean, float std, float *x, uint8_t *y)
{
    size_t dim = mnist_image_size(set);
    /* (p / 255 - mean) / std = p * scale + shift */
    float scale = 1.0f / (255.0f * std);
    float shift = -mean / std;

    for (size_t i = 0; i < n; i++) {
        size_t src = index != NULL ? index[i] : first + i;
        const uint8_t *p = set->pixels + src * dim;
        float *row = x + i * dim;
        for (size_t j = 0; j < dim; j++) {
            row[j] = (float)p[j] * scale + shift;
        }
        y[i] = set->labels[src];
    }
}
