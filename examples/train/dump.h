/**
 * @file dump.h
 * @brief Raw dumps of a network's parameters or gradients (coll-train --dump-weights,
 *        --dump-grads), for tests and offline analysis.
 *
 * Format: little-endian float32 whatever the host byte order, no header, in the parameter
 * layout of mlp.h: for each layer in order its weights (out x in, row-major), then its bias.
 */
#ifndef COLL_TRAIN_DUMP_H
#define COLL_TRAIN_DUMP_H

#include "mlp.h"

/** What dump_tensors() writes. */
typedef enum {
    DUMP_PARAMS, /**< the weights and biases */
    DUMP_GRADS,  /**< the gradients bound to each layer (gw, gb), wherever they live */
} dump_what_t;

/**
 * @brief Write every tensor of @p mlp to @p path (created or truncated).
 * @return 0; -1 after printing the file and the error to stderr.
 */
int dump_tensors(const mlp_t *mlp, dump_what_t what, const char *path);

#endif /* COLL_TRAIN_DUMP_H */
