/*
 * alltoall() and alltoall_base(): pairwise exchanges of the group's point-to-point messages
 * (tag kAllToAllTag), as gloo's alltoall does; the costs are in process_group.hpp.
 */
#include <c10/util/Exception.h>

#include <atomic>
#include <mutex>
#include <string>

#include "process_group.hpp"
#include "types.hpp"

namespace collectived {

namespace {

/* What the exchanges of one all-to-all share: how many have not ended, the first failure. */
struct Exchanges {
    std::atomic<int> left{0};
    std::mutex mu;
    std::exception_ptr error; /* under mu */
};

/* @p error, a failed exchange with @p peer, as the all-to-all's own error. */
std::exception_ptr exchange_error(const char *name, int peer, std::exception_ptr error)
{
    std::string why;
    try {
        std::rethrow_exception(error);
    } catch (const c10::Error &e) {
        why = e.what_without_backtrace();
    } catch (const std::exception &e) {
        why = e.what();
    }
    return std::make_exception_ptr(c10::Error(
        {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
        c10::str("collectived: ", name, ": the exchange with rank ", peer, " failed; no output "
                 "was written: ", why)));
}

/* The split sizes of @p t (@p what): @p splits, checked, or N equal ones when it is empty. */
std::vector<int64_t> rows_of(const at::Tensor &t, const std::vector<int64_t> &splits, int size,
                             const char *what)
{
    TORCH_CHECK(t.dim() >= 1, "collectived: all_to_all_single: the ", what, " is a scalar; "
                "its first dimension is split among the ranks");
    int64_t rows = t.size(0);
    if (splits.empty()) {
        TORCH_CHECK(rows % size == 0, "collectived: all_to_all_single: the ", what, "'s first "
                    "dimension (", rows, ") does not divide among ", size, " ranks; give ",
                    what, " split sizes");
        return std::vector<int64_t>(size, rows / size);
    }
    TORCH_CHECK(static_cast<int>(splits.size()) == size, "collectived: all_to_all_single: ",
                splits.size(), " ", what, " split sizes; the group has ", size, " ranks");
    int64_t sum = 0;
    for (int64_t s : splits) {
        TORCH_CHECK(s >= 0, "collectived: all_to_all_single: ", what, " split size ", s,
                    " is negative");
        sum += s;
    }
    TORCH_CHECK(sum == rows, "collectived: all_to_all_single: the ", what, " split sizes sum "
                "to ", sum, ", not to the ", what, "'s first dimension (", rows, ")");
    return splits;
}

/* @p t cut along its first dimension into blocks of @p rows rows. */
std::vector<at::Tensor> blocks_of(const at::Tensor &t, const std::vector<int64_t> &rows)
{
    std::vector<at::Tensor> blocks;
    int64_t at = 0;
    for (int64_t n : rows) {
        blocks.push_back(t.narrow(0, at, n));
        at += n;
    }
    return blocks;
}

/* The checks of alltoall()'s lists: one tensor per rank, each one collectived carries, all of
 * @p like's dtype. */
void check_blocks(const std::vector<at::Tensor> &list, const at::Tensor &like, int size,
                  const char *what)
{
    TORCH_CHECK(static_cast<int>(list.size()) == size, "collectived: all_to_all: ", list.size(),
                " ", what, " tensors; the group has ", size, " ranks");
    for (size_t i = 0; i < list.size(); i++) {
        check_tensor(list[i], what);
        TORCH_CHECK(list[i].scalar_type() == like.scalar_type(), "collectived: all_to_all: ",
                    what, " tensor ", i, " is ", list[i].scalar_type(), " where ",
                    like.scalar_type(), " is expected (one operation carries one dtype)");
    }
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroup::exchange(c10d::OpType type, const char *name,
                                                      std::vector<at::Tensor> outputs,
                                                      const std::vector<at::Tensor> &sends,
                                                      const std::vector<at::Tensor> &recvs)
{
    Buffers buffers;
    std::vector<at::Tensor> got;
    for (const auto &r : recvs) {
        got.push_back(at::empty({r.numel()}, r.options()));
        buffers.copy_back.emplace_back(got.back(), r);
    }
    got[rank_].view(sends[rank_].sizes()).copy_(sends[rank_]);
    auto work = c10::make_intrusive<Work>(comm_, rank_, type, name, 0, std::move(outputs),
                                          std::move(buffers));
    auto state = std::make_shared<Exchanges>();
    state->left = 2 * (size_ - 1) + 1; /* and one for the posting itself */
    auto ended = [state, work, name](int peer, std::exception_ptr error) {
        if (error) {
            std::lock_guard<std::mutex> lock(state->mu);
            if (!state->error) {
                state->error = exchange_error(name, peer, error);
            }
        }
        if (--state->left == 0) {
            state->error ? work->fail(state->error) : work->complete(COLL_OK);
        }
    };
    auto watch = [&ended](const c10::intrusive_ptr<c10d::Work> &w, int peer) {
        w->getFuture()->addCallback([ended, peer](c10::ivalue::Future &f) {
            ended(peer, f.hasError() ? f.exception_ptr() : nullptr);
        });
    };
    /* Step i sends to rank + i and receives from rank - i (gloo's order); all are posted
     * before any is waited for, so no order of the ranks' calls can deadlock. */
    for (int i = 1; i < size_; i++) {
        int to = (rank_ + i) % size_, from = (rank_ - i + size_) % size_;
        std::vector<at::Tensor> out{sends[to]}, in{got[from]};
        watch(p2p(out, to, kAllToAllTag, true), to);
        watch(p2p(in, from, kAllToAllTag, false), from);
    }
    ended(rank_, nullptr);
    return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::alltoall_base(at::Tensor &output, at::Tensor &input,
                                                           std::vector<int64_t> &output_splits,
                                                           std::vector<int64_t> &input_splits,
                                                           const c10d::AllToAllOptions &)
{
    check_tensor(input, "all_to_all_single: input");
    check_tensor(output, "all_to_all_single: output");
    TORCH_CHECK(input.scalar_type() == output.scalar_type(), "collectived: all_to_all_single: "
                "the input is ", input.scalar_type(), " and the output ", output.scalar_type(),
                " (one operation carries one dtype)");
    auto in_rows = rows_of(input, input_splits, size_, "input");
    auto out_rows = rows_of(output, output_splits, size_, "output");
    TORCH_CHECK(input.sizes().slice(1) == output.sizes().slice(1), "collectived: "
                "all_to_all_single: the input (sizes ", input.sizes(), ") and the output (",
                output.sizes(), ") differ beyond the first dimension");
    TORCH_CHECK(in_rows[rank_] == out_rows[rank_], "collectived: all_to_all_single: rank ",
                rank_, " sends itself ", in_rows[rank_], " rows but expects ", out_rows[rank_]);
    return exchange(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", {output},
                    blocks_of(input, in_rows), blocks_of(output, out_rows));
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::alltoall(std::vector<at::Tensor> &outputs,
                                                      std::vector<at::Tensor> &inputs,
                                                      const c10d::AllToAllOptions &)
{
    TORCH_CHECK(!inputs.empty(), "collectived: all_to_all: no input tensors; the group has ",
                size_, " ranks");
    check_blocks(inputs, inputs[0], size_, "input");
    check_blocks(outputs, inputs[0], size_, "output");
    TORCH_CHECK(inputs[rank_].numel() == outputs[rank_].numel(), "collectived: all_to_all: "
                "rank ", rank_, " sends itself ", inputs[rank_].numel(), " elements but "
                "expects ", outputs[rank_].numel());
    return exchange(c10d::OpType::ALLTOALL, "all_to_all", outputs, inputs, outputs);
}

}  // namespace collectived
