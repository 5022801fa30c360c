/**
 * @file types.hpp
 * @brief torch's datatypes and reductions as libcollective's, or a clear refusal.
 */
#pragma once

#include <collective.h>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

namespace collectived {

/**
 * @return The coll_dtype_t of @p type: float32, float64, float16, bfloat16, int8, uint8,
 *         int32, int64.
 * @throws c10::Error naming the type and the supported ones for any other.
 */
coll_dtype_t to_coll_dtype(at::ScalarType type);

/**
 * @return The coll_redop_t of @p op on tensors of @p dtype: SUM, AVG, PRODUCT, MIN, MAX, and of
 *         the integer dtypes BAND, BOR, BXOR.
 * @throws c10::Error for a bitwise op of a float dtype, naming both (here, before anything is
 *         submitted, so that the group stays usable, as gloo's does), and for PREMUL_SUM,
 *         which collectived does not have.
 */
coll_redop_t to_coll_op(const c10d::ReduceOp &op, coll_dtype_t dtype);

/**
 * @brief Check that @p t is a dense tensor collectived can carry, on the CPU or (in a build
 *        against a torch with CUDA) a CUDA device; returns its dtype.
 * @param what  The operation and argument, for the message ("allreduce: tensor").
 */
coll_dtype_t check_tensor(const at::Tensor &t, const char *what);

}  // namespace collectived
