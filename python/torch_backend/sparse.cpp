/*
 * Sparse allreduce by gloo's rule (ProcessGroupGloo's AsyncSparseAllreduceWork): every rank's
 * coalesced COO tensor is all-gathered, its indices and values, and every rank sums the N
 * tensors itself. The library has no all-gather of varying sizes, so the second all-gather
 * pads every rank's part to the largest one (the cost is in process_group.hpp).
 */
#include <c10/util/Exception.h>

#include <algorithm>

#include "checks.hpp"
#include "run.hpp"

namespace collectived {

namespace {

constexpr int kMaxDims = 8;
constexpr int kMeta = 4 + kMaxDims; /* dtype, sparse dims, dense dims, nnz, sizes */
constexpr int kNnz = 3;

/* What the ranks compare of their tensors, and its nnz: kMeta int64. */
at::Tensor metadata(const at::Tensor &t)
{
    at::Tensor m = at::zeros({kMeta}, at::kLong);
    int64_t *d = m.data_ptr<int64_t>();
    d[0] = static_cast<int64_t>(t.scalar_type());
    d[1] = t.sparse_dim();
    d[2] = t.dense_dim();
    d[kNnz] = t._nnz();
    for (int64_t i = 0; i < t.dim(); i++) {
        d[4 + i] = t.size(i);
    }
    return m;
}

/* Every rank's metadata (@p all, one row each) describes @p me's tensor but for its nnz:
 * else every rank raises, naming the first rank that differs. */
void check_metadata(const at::Tensor &all, const at::Tensor &me, int rank)
{
    at::Tensor mine = all[rank];
    for (int64_t r = 0; r < all.size(0); r++) {
        at::Tensor row = all[r].clone();
        row[kNnz] = mine[kNnz];
        const int64_t *d = all[r].data_ptr<int64_t>();
        int64_t dims = std::min<int64_t>(kMaxDims, std::max<int64_t>(0, d[1] + d[2]));
        TORCH_CHECK(row.equal(mine), "collectived: sparse allreduce: rank ", r, " has a ",
                    static_cast<at::ScalarType>(d[0]), " tensor of ", d[1], " sparse and ", d[2],
                    " dense dimensions (sizes ", c10::IntArrayRef(d + 4, dims), ") where rank ",
                    rank, " has ", me.scalar_type(), " of ", me.sparse_dim(), " and ",
                    me.dense_dim(), " (sizes ", me.sizes(), ")");
    }
}

/* The bytes one nonzero of @p t takes: its indices and its dense block of values. */
int64_t nnz_bytes(const at::Tensor &t)
{
    int64_t dense = 1;
    for (int64_t i = t.sparse_dim(); i < t.dim(); i++) {
        dense *= t.size(i);
    }
    return t.sparse_dim() * 8 + dense * static_cast<int64_t>(t.element_size());
}

/* The tensor of @p nnz nonzeros whose indices and then values start at byte @p at of
 * @p bytes, of @p like's sizes and dtype. */
at::Tensor part(const at::Tensor &bytes, int64_t at, const at::Tensor &like, int64_t nnz)
{
    int64_t ib = like.sparse_dim() * nnz * 8;
    int64_t vb = nnz * nnz_bytes(like) - ib;
    std::vector<int64_t> vsizes{nnz};
    for (int64_t i = like.sparse_dim(); i < like.dim(); i++) {
        vsizes.push_back(like.size(i));
    }
    /* Cloned: the copies are aligned for their dtype, wherever the part began. */
    at::Tensor idx = bytes.narrow(0, at, ib).clone().view(at::kLong).view({like.sparse_dim(), nnz});
    at::Tensor val = bytes.narrow(0, at + ib, vb).clone().view(like.scalar_type()).view(vsizes);
    return at::sparse_coo_tensor(idx, val, like.sizes(), like.options());
}

/* The bytes of @p t's elements (contiguous). */
at::Tensor bytes_of(const at::Tensor &t)
{
    return t.contiguous().view(-1).view(at::kByte);
}

}  // namespace

at::Tensor ProcessGroup::gather_blocks(const std::vector<at::Tensor> &parts, int64_t block,
                                       uint64_t key)
{
    at::Tensor gathered = at::empty({size_ * block}, at::kByte);
    void *send = nullptr, *recv = nullptr;
    auto work = run(
        c10d::OpType::ALLGATHER, "sparse allreduce", key, {gathered}, -1,
        [&](OpBuffers &b) {
            at::Tensor all = b.scratch(size_ * block, at::kByte);
            int64_t at = rank_ * block;
            for (const auto &p : parts) {
                all.narrow(0, at, p.numel()).copy_(p);
                at += p.numel();
            }
            b.copy_back(all, gathered);
            send = all.narrow(0, rank_ * block, block).data_ptr();
            recv = all.data_ptr();
        },
        [&](const coll_op_params_t *params, coll_request_t **req) {
            return coll_allgather_async(comm_->get(), send, recv, block, COLL_UINT8, params, req);
        });
    work->wait();
    return gathered;
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::sparse_allreduce(at::Tensor &t,
                                                              const c10d::AllreduceOptions &opts)
{
    TORCH_CHECK(t.device().is_cpu(), "collectived: sparse allreduce: the tensor is on ",
                t.device(), "; the collectived backend carries CPU tensors");
    TORCH_CHECK(opts.reduceOp == c10d::ReduceOp::SUM, "collectived: sparse allreduce sums "
                "(ReduceOp.SUM) only");
    TORCH_CHECK(t.dim() <= kMaxDims, "collectived: sparse allreduce: ", t.dim(),
                " dimensions (at most ", kMaxDims, ")");
    at::Tensor in = t.coalesce();
    uint64_t key = next_key(2);
    at::Tensor meta = gather_blocks({bytes_of(metadata(in))}, kMeta * 8, key)
                          .view(at::kLong).view({size_, kMeta});
    check_metadata(meta, in, rank_);
    at::Tensor nnz = meta.select(1, kNnz);
    int64_t block = nnz.max().item<int64_t>() * nnz_bytes(in);
    at::Tensor all = gather_blocks({bytes_of(in.indices()), bytes_of(in.values())}, block,
                                   (key + 1) & kKeyMask);
    at::Tensor sum = part(all, 0, in, nnz[0].item<int64_t>());
    for (int r = 1; r < size_; r++) {
        sum = sum + part(all, r * block, in, nnz[r].item<int64_t>());
    }
    t.copy_(sum.coalesce());
    auto work = c10::make_intrusive<Work>(comm_, rank_, c10d::OpType::ALLREDUCE,
                                          "sparse allreduce", key, std::vector<at::Tensor>{t},
                                          Buffers());
    work->complete(COLL_OK);
    return work;
}

}  // namespace collectived
