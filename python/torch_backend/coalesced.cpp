/*
 * The coalesced operations: several tensors packed into one staging buffer and carried by ONE
 * collective of the library, then unpacked (the costs are in process_group.hpp).
 */
#include <c10/util/Exception.h>

#include "checks.hpp"
#include "run.hpp"
#include "types.hpp"

namespace collectived {

namespace {

/* A non-zero fingerprint of the element counts of @p tensors, in order (FNV-1a over the list
 * length and each count): ranks whose lists are cut differently fail with COLL_ERR_MISMATCH. */
uint64_t counts_layout(const std::vector<at::Tensor> &tensors)
{
    constexpr uint64_t kPrime = 1099511628211ull;
    uint64_t h = 14695981039346656037ull;
    auto mix = [&](uint64_t v) {
        for (int i = 0; i < 8; i++) {
            h = (h ^ ((v >> (8 * i)) & 0xff)) * kPrime;
        }
    };
    mix(tensors.size());
    for (const auto &t : tensors) {
        mix(static_cast<uint64_t>(t.numel()));
    }
    return h != 0 ? h : 1;
}

/* @p params with @p layout added. */
coll_op_params_t with_layout(const coll_op_params_t *params, uint64_t layout)
{
    coll_op_params_t p = *params;
    p.field_mask |= COLL_OP_PARAM_LAYOUT;
    p.layout = layout;
    return p;
}

/* Copy @p tensors one after the other into @p flat from element @p at. */
void pack(const std::vector<at::Tensor> &tensors, const at::Tensor &flat, int64_t at)
{
    for (const auto &t : tensors) {
        flat.narrow(0, at, t.numel()).view(t.sizes()).copy_(t);
        at += t.numel();
    }
}

/* On success, copy @p flat from element @p at back into @p tensors, one after the other. */
void unpack(OpBuffers &b, const at::Tensor &flat, int64_t at,
            const std::vector<at::Tensor> &tensors)
{
    for (const auto &t : tensors) {
        b.copy_back(flat.narrow(0, at, t.numel()), t);
        at += t.numel();
    }
}

/* The checks of allgather_coalesced() beyond the inputs' own: one list per rank, each holding
 * a tensor of input i's dtype and sizes at i. */
void check_output_lists(const std::vector<std::vector<at::Tensor>> &outputs,
                        const std::vector<at::Tensor> &inputs, int size)
{
    TORCH_CHECK(static_cast<int>(outputs.size()) == size, "collectived: allgather_coalesced: ",
                outputs.size(), " output lists; the group has ", size, " ranks");
    for (size_t r = 0; r < outputs.size(); r++) {
        TORCH_CHECK(outputs[r].size() == inputs.size(), "collectived: allgather_coalesced: "
                    "output list ", r, " has ", outputs[r].size(), " tensors where the input "
                    "list has ", inputs.size());
        for (size_t i = 0; i < inputs.size(); i++) {
            const at::Tensor &o = outputs[r][i];
            check_tensor(o, "allgather_coalesced: output");
            check_device(o, inputs[i], "allgather_coalesced");
            TORCH_CHECK(o.scalar_type() == inputs[i].scalar_type() &&
                            o.sizes() == inputs[i].sizes(),
                        "collectived: allgather_coalesced: output ", i, " of list ", r, " is a ",
                        o.scalar_type(), " tensor of sizes ", o.sizes(), " where input ", i,
                        " is ", inputs[i].scalar_type(), " of ", inputs[i].sizes());
        }
    }
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroup::allreduce_coalesced(
    std::vector<at::Tensor> &tensors, const c10d::AllreduceCoalescedOptions &opts)
{
    int64_t total = check_coalesced(tensors, "allreduce_coalesced");
    coll_dtype_t dt = to_coll_dtype(tensors[0].scalar_type());
    coll_redop_t op = to_coll_op(opts.reduceOp, dt);
    uint64_t layout = counts_layout(tensors);
    void *p = nullptr;
    return run(
        c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", next_key(), tensors,
        op_device(tensors[0]),
        [&](OpBuffers &b) {
            at::Tensor flat = b.scratch(total, tensors[0].scalar_type());
            pack(tensors, flat, 0);
            unpack(b, flat, 0, tensors);
            p = flat.data_ptr();
        },
        [&](const coll_op_params_t *params, coll_request_t **req) {
            coll_op_params_t pl = with_layout(params, layout);
            return coll_allreduce_async(comm_->get(), p, p, total, dt, op, &pl, req);
        });
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::allgather_coalesced(
    std::vector<std::vector<at::Tensor>> &outputs, std::vector<at::Tensor> &inputs,
    const c10d::AllgatherOptions &)
{
    int64_t total = check_coalesced(inputs, "allgather_coalesced");
    coll_dtype_t dt = to_coll_dtype(inputs[0].scalar_type());
    check_output_lists(outputs, inputs, size_);
    uint64_t layout = counts_layout(inputs);
    std::vector<at::Tensor> results;
    for (const auto &list : outputs) {
        results.insert(results.end(), list.begin(), list.end());
    }
    void *send = nullptr, *recv = nullptr;
    return run(
        c10d::OpType::ALLGATHER_COALESCED, "allgather_coalesced", next_key(), results,
        op_device(inputs[0]),
        [&](OpBuffers &b) {
            at::Tensor all = b.scratch(size_ * total, inputs[0].scalar_type());
            pack(inputs, all, rank_ * total);
            for (int r = 0; r < size_; r++) {
                unpack(b, all, r * total, outputs[r]);
            }
            send = all.narrow(0, rank_ * total, total).data_ptr();
            recv = all.data_ptr();
        },
        [&](const coll_op_params_t *params, coll_request_t **req) {
            coll_op_params_t pl = with_layout(params, layout);
            return coll_allgather_async(comm_->get(), send, recv, total, dt, &pl, req);
        });
}

}  // namespace collectived
