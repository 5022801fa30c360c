/* Raw little-endian float32 dumps of a network's tensors (dump.h). */
#include "dump.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void write_floats(FILE *f, const float *x, size_t n)
{
    unsigned char le[4];

    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], sizeof(bits));
        for (int b = 0; b < 4; b++) {
            le[b] = (unsigned char)(bits >> (8 * b));
        }
        fwrite(le, 1, sizeof(le), f);
    }
}

int dump_tensors(const mlp_t *mlp, dump_what_t what, const char *path)
{
    FILE *f = fopen(path, "wb");

    if (f == NULL) {
        fprintf(stderr, "coll-train: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    for (int l = 0; l < mlp->n_layers; l++) {
        const mlp_layer_t *layer = &mlp->layers[l];
        int grads = what == DUMP_GRADS;
        write_floats(f, grads ? layer->gw : layer->w, (size_t)layer->out * (size_t)layer->in);
        write_floats(f, grads ? layer->gb : layer->b, (size_t)layer->out);
    }
    int failed = ferror(f) != 0;
    if (fclose(f) != 0 || failed) {
        fprintf(stderr, "coll-train: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}
