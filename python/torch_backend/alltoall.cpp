/*
 * alltoall() and alltoall_base(): one coll_alltoallv_async() each, the tensors staged in the
 * pool as for the other collectives. The daemons check every pair's counts and the dtype
 * before a byte moves (collective.h), so a disagreement fails every rank with
 * COLL_ERR_MISMATCH and no output written.
 */
#include <c10/util/Exception.h>

#include <numeric>
#include <vector>

#include "checks.hpp"
#include "process_group.hpp"
#include "run.hpp"
#include "types.hpp"

namespace collectived {

namespace {

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

/* One side of an all-to-all: element counts and displacements per rank. */
struct Side {
    std::vector<size_t> counts, displs;
};

/* Blocks of @p numel elements each, one after the other. */
Side packed(const std::vector<int64_t> &numel)
{
    Side s;
    size_t at = 0;
    for (int64_t n : numel) {
        s.counts.push_back(static_cast<size_t>(n));
        s.displs.push_back(at);
        at += static_cast<size_t>(n);
    }
    return s;
}

/* @p rows scaled by the elements of one row of @p t. */
std::vector<int64_t> elements(const std::vector<int64_t> &rows, const at::Tensor &t)
{
    int64_t row = std::accumulate(t.sizes().begin() + 1, t.sizes().end(), int64_t(1),
                                  std::multiplies<int64_t>());
    std::vector<int64_t> n;
    for (int64_t r : rows) {
        n.push_back(r * row);
    }
    return n;
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
        check_device(list[i], like, "all_to_all");
        TORCH_CHECK(list[i].scalar_type() == like.scalar_type(), "collectived: all_to_all: ",
                    what, " tensor ", i, " is ", list[i].scalar_type(), " where ",
                    like.scalar_type(), " is expected (one operation carries one dtype)");
    }
}

std::vector<int64_t> numels(const std::vector<at::Tensor> &list)
{
    std::vector<int64_t> n;
    for (const auto &t : list) {
        n.push_back(t.numel());
    }
    return n;
}

/* The alltoallv of @p send's blocks of @p sbuf into @p recv's of @p rbuf. */
coll_status_t submit(coll_comm_t *comm, const Side &send, const void *sbuf, const Side &recv,
                     void *rbuf, coll_dtype_t dt, const coll_op_params_t *params,
                     coll_request_t **req)
{
    return coll_alltoallv_async(comm, sbuf, send.counts.data(), send.displs.data(), rbuf,
                                recv.counts.data(), recv.displs.data(), dt, params, req);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroup::alltoall_base(at::Tensor &output, at::Tensor &input,
                                                           std::vector<int64_t> &output_splits,
                                                           std::vector<int64_t> &input_splits,
                                                           const c10d::AllToAllOptions &)
{
    coll_dtype_t dt = check_tensor(input, "all_to_all_single: input");
    check_tensor(output, "all_to_all_single: output");
    check_device(input, output, "all_to_all_single");
    TORCH_CHECK(input.scalar_type() == output.scalar_type(), "collectived: all_to_all_single: "
                "the input is ", input.scalar_type(), " and the output ", output.scalar_type(),
                " (one operation carries one dtype)");
    auto in_rows = rows_of(input, input_splits, size_, "input");
    auto out_rows = rows_of(output, output_splits, size_, "output");
    TORCH_CHECK(input.sizes().slice(1) == output.sizes().slice(1), "collectived: "
                "all_to_all_single: the input (sizes ", input.sizes(), ") and the output (",
                output.sizes(), ") differ beyond the first dimension");
    Side send = packed(elements(in_rows, input)), recv = packed(elements(out_rows, output));
    void *sbuf = nullptr, *rbuf = nullptr;
    return run(
        c10d::OpType::ALLTOALL_BASE, "all_to_all_single", next_key(), {output},
        op_device(output),
        [&](OpBuffers &b) {
            at::Tensor out = b.place(output, false, true);
            /* The library takes no in-place form: an input that shares bytes with the output
             * is staged apart. */
            at::Tensor in;
            if (OpBuffers::overlaps(input, out)) {
                in = b.scratch(input.numel(), input.scalar_type());
                in.view(input.sizes()).copy_(input);
            } else {
                in = b.place(input, true, false);
            }
            sbuf = in.data_ptr();
            rbuf = out.data_ptr();
        },
        [&](const coll_op_params_t *params, coll_request_t **req) {
            return submit(comm_->get(), send, sbuf, recv, rbuf, dt, params, req);
        });
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::alltoall(std::vector<at::Tensor> &outputs,
                                                      std::vector<at::Tensor> &inputs,
                                                      const c10d::AllToAllOptions &)
{
    TORCH_CHECK(!inputs.empty(), "collectived: all_to_all: no input tensors; the group has ",
                size_, " ranks");
    coll_dtype_t dt = check_tensor(inputs[0], "all_to_all: input");
    check_blocks(inputs, inputs[0], size_, "input");
    check_blocks(outputs, inputs[0], size_, "output");
    Side send = packed(numels(inputs)), recv = packed(numels(outputs));
    void *sbuf = nullptr, *rbuf = nullptr;
    /* Each list through one staging buffer: the inputs copied in, the outputs copied out. */
    return run(
        c10d::OpType::ALLTOALL, "all_to_all", next_key(), outputs, op_device(inputs[0]),
        [&](OpBuffers &b) {
            int64_t ns = std::accumulate(send.counts.begin(), send.counts.end(), int64_t(0));
            int64_t nr = std::accumulate(recv.counts.begin(), recv.counts.end(), int64_t(0));
            at::Tensor in = b.scratch(ns, inputs[0].scalar_type());
            at::Tensor out = b.scratch(nr, inputs[0].scalar_type());
            for (int i = 0; i < size_; i++) {
                in.narrow(0, send.displs[i], send.counts[i]).view(inputs[i].sizes())
                    .copy_(inputs[i]);
                b.copy_back(out.narrow(0, recv.displs[i], recv.counts[i]), outputs[i]);
            }
            sbuf = in.data_ptr();
            rbuf = out.data_ptr();
        },
        [&](const coll_op_params_t *params, coll_request_t **req) {
            return submit(comm_->get(), send, sbuf, recv, rbuf, dt, params, req);
        });
}

}  // namespace collectived
