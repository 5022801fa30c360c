/**
 * @file checks.hpp
 * @brief The argument checks of the process group's operations: each raises c10::Error with a
 *        message naming the operation and the argument, before anything is submitted, the same
 *        way on every rank that passed the same arguments.
 */
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace collectived {

/** Point-to-point tags a user may give (0 .. kUserTags - 1); the group keeps some above. */
constexpr int kUserTags = 64;

/** @return The only tensor of @p tensors. @throws c10::Error for another count. */
at::Tensor &only(std::vector<at::Tensor> &tensors, const char *name);

/** @throws c10::Error unless 0 <= @p r < @p size ("@p what @p r is not a rank ..."). */
void check_rank(int r, int size, const char *what);

/** @throws c10::Error unless 0 <= @p tag < kUserTags. */
void check_tag(int tag);

/**
 * @brief Every tensor of @p list is one collectived carries with @p like's dtype and element
 *        count, and the list has @p size tensors.
 * @throws c10::Error naming @p what and the first tensor that differs.
 */
void check_list(const std::vector<at::Tensor> &list, const at::Tensor &like, int size,
                const char *what);

/**
 * @brief The root's list of a gather (its outputs) or a scatter (its inputs): @p lists holds
 *        one list of @p size tensors like @p like at the root, nothing elsewhere.
 * @param what "gather" or "scatter"; @param role "output" or "input".
 * @return The root's list (a copy of the handles); empty on the other ranks.
 * @throws c10::Error naming @p what and the root for any other shape.
 */
std::vector<at::Tensor> root_list(std::vector<std::vector<at::Tensor>> &lists,
                                  const at::Tensor &like, int rank, int root, int size,
                                  const char *what, const char *role);

/** @throws c10::Error unless @p t is on @p like's device (one operation's tensors share one
 *          device: the CPU or one CUDA device); @p what names the operation. */
void check_device(const at::Tensor &t, const at::Tensor &like, const char *what);

/** @throws c10::Error unless @p b has @p a's dtype and @p factor times its elements. */
void check_same(const at::Tensor &a, const at::Tensor &b, int64_t factor, const char *what);

/**
 * @brief The tensors of a coalesced operation: at least one, each one collectived carries, all
 *        of the first one's dtype.
 * @return Their elements in all.
 * @throws c10::Error naming @p what and the first tensor that is not so.
 */
int64_t check_coalesced(const std::vector<at::Tensor> &tensors, const char *what);

}  // namespace collectived
