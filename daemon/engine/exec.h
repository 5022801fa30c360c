/**
 * @file exec.h
 * @brief The memory kind of an operation's buffers and the executor that works on them
 *        (kernels/exec.h): every reduction, cast, compression kernel and optimizer step the
 *        engine and the parameter service run on an operation's data goes through it.
 */
#ifndef COLL_ENGINE_EXEC_H
#define COLL_ENGINE_EXEC_H

#include "engine/op.h"
#include "kernels/exec.h"

/**
 * @return The kind of @p op's buffers: its job's pool's (inputs, outputs, compression slots and
 *         the parameter service's state all live in the pool). Loop thread or a kernel thread
 *         of the operation.
 */
coll_mem_kind_t coll_op_mem_kind(const coll_op_t *op);

/**
 * @return The executor of coll_op_mem_kind(@p op). The job's pool must be of a kind this build
 *         has an executor for (the host's always is); asserted. Thread-safe.
 */
const coll_exec_t *coll_op_exec(const coll_op_t *op);

#endif
