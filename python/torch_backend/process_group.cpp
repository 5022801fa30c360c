#include "process_group.hpp"

#include <c10/util/Exception.h>

#include "checks.hpp"
#include "run.hpp"
#include "types.hpp"

namespace collectived {

namespace {
constexpr uint32_t kP2pSeqMask = 0xffff;
}  // namespace

ProcessGroup::ProcessGroup(std::shared_ptr<Comm> comm, c10::intrusive_ptr<c10d::Store> store,
                           Progress::Releaser releaser)
    : PgBase(coll_comm_rank(comm->get()), coll_comm_world_size(comm->get())),
      comm_(std::move(comm)), store_(std::move(store)), releaser_(releaser),
      staging_(std::make_shared<Staging>(comm_, -1)),
      any_(std::make_shared<AnySource>(
          [this](const at::Tensor &buf, int peer, int tag) {
              std::vector<at::Tensor> t{buf};
              return p2p(t, peer, tag, false);
          },
          comm_, rank_, size_)),
      progress_(std::move(releaser))
{
    init();
}

ProcessGroup::~ProcessGroup()
{
    any_->close();
    if (store_) {
        end();
    }
}

std::shared_ptr<Staging> ProcessGroup::staging_for(int device)
{
    if (device < 0) {
        return staging_;
    }
    std::lock_guard<std::mutex> lock(device_mu_);
    auto &staging = device_staging_[device];
    if (!staging) {
        staging = std::make_shared<Staging>(comm_, device);
    }
    return staging;
}

c10::Stream ProcessGroup::side_stream(int device)
{
    std::lock_guard<std::mutex> lock(device_mu_);
    auto it = side_.find(device);
    if (it == side_.end()) {
        it = side_.emplace(device, side_stream_for(device)).first;
    }
    return it->second;
}

uint64_t ProcessGroup::next_key(int n)
{
    std::lock_guard<std::mutex> lock(key_mu_);
    uint64_t first = next_seq_;
    next_seq_ += static_cast<uint64_t>(n);
    return first & kKeyMask;
}

uint64_t ProcessGroup::p2p_key(int peer, int tag, bool send)
{
    std::lock_guard<std::mutex> lock(key_mu_);
    uint32_t n = p2p_seq_[(int64_t(peer) * 2 + send) * kTags + tag]++;
    return uint64_t(tag) << 16 | (n & kP2pSeqMask);
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::allreduce(std::vector<at::Tensor> &tensors,
                                                       const c10d::AllreduceOptions &opts)
{
    at::Tensor &t = only(tensors, "allreduce");
    if (t.layout() == at::kSparse) {
        return sparse_allreduce(t, opts);
    }
    coll_dtype_t dt = check_tensor(t, "allreduce: tensor");
    coll_redop_t op = to_coll_op(opts.reduceOp, dt);
    void *p = nullptr;
    return run(
        c10d::OpType::ALLREDUCE, "allreduce", next_key(), tensors, op_device(t),
        [&](OpBuffers &b) { p = b.place(t, true, true).data_ptr(); },
        [&](const coll_op_params_t *params, coll_request_t **req) {
            return coll_allreduce_async(comm_->get(), p, p, t.numel(), dt, op, params, req);
        });
}

#if TORCH_VERSION_MAJOR >= 2
c10::intrusive_ptr<c10d::Work> ProcessGroup::allreduce_sparse(std::vector<at::Tensor> &tensors,
                                                              const c10d::AllreduceOptions &opts)
{
    return sparse_allreduce(only(tensors, "allreduce"), opts);
}

#endif
c10::intrusive_ptr<c10d::Work> ProcessGroup::broadcast(std::vector<at::Tensor> &tensors,
                                                       const c10d::BroadcastOptions &opts)
{
    at::Tensor &t = only(tensors, "broadcast");
    coll_dtype_t dt = check_tensor(t, "broadcast: tensor");
    int root = static_cast<int>(opts.rootRank);
    check_rank(root, size_, "broadcast: root");
    void *p = nullptr;
    return run(
        c10d::OpType::BROADCAST, "broadcast", next_key(), tensors, op_device(t),
        [&](OpBuffers &b) { p = b.place(t, rank_ == root, rank_ != root).data_ptr(); },
        [&](const coll_op_params_t *params, coll_request_t **req) {
            return coll_broadcast_async(comm_->get(), p, p, t.numel(), dt, root, params, req);
        });
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::reduce(std::vector<at::Tensor> &tensors,
                                                    const c10d::ReduceOptions &opts)
{
    at::Tensor &t = only(tensors, "reduce");
    coll_dtype_t dt = check_tensor(t, "reduce: tensor");
    coll_redop_t op = to_coll_op(opts.reduceOp, dt);
    int root = static_cast<int>(opts.rootRank);
    check_rank(root, size_, "reduce: root");
    void *p = nullptr;
    return run(
        c10d::OpType::REDUCE, "reduce", next_key(), tensors, op_device(t),
        [&](OpBuffers &b) { p = b.place(t, true, rank_ == root).data_ptr(); },
        [&](const coll_op_params_t *params, coll_request_t **req) {
            return coll_reduce_async(comm_->get(), p, p, t.numel(), dt, op, root, params, req);
        });
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::allgather(
    std::vector<std::vector<at::Tensor>> &outputs, std::vector<at::Tensor> &inputs,
    const c10d::AllgatherOptions &)
{
    at::Tensor &in = only(inputs, "allgather");
    coll_dtype_t dt = check_tensor(in, "allgather: input");
    TORCH_CHECK(outputs.size() == 1, "collectived: allgather takes one output list");
    std::vector<at::Tensor> &outs = outputs[0];
    check_list(outs, in, size_, "allgather: output list");
    int64_t n = in.numel();
    void *send = nullptr, *recv = nullptr;
    /* Gathered into one staging buffer (this rank's block in place), then copied out. */
    return run(
        c10d::OpType::ALLGATHER, "allgather", next_key(), outs, op_device(in),
        [&](OpBuffers &b) {
            at::Tensor all = b.scratch(size_ * n, in.scalar_type());
            at::Tensor mine = all.narrow(0, rank_ * n, n);
            mine.view(in.sizes()).copy_(in);
            for (int i = 0; i < size_; i++) {
                b.copy_back(all.narrow(0, i * n, n), outs[i]);
            }
            send = mine.data_ptr();
            recv = all.data_ptr();
        },
        [&](const coll_op_params_t *params, coll_request_t **req) {
            return coll_allgather_async(comm_->get(), send, recv, n, dt, params, req);
        });
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::_allgather_base(at::Tensor &output,
                                                             at::Tensor &input,
                                                             const c10d::AllgatherOptions &)
{
    coll_dtype_t dt = check_tensor(input, "all_gather_into_tensor: input");
    check_tensor(output, "all_gather_into_tensor: output");
    check_same(input, output, size_, "all_gather_into_tensor");
    int64_t n = input.numel();
    void *send = nullptr, *recv = nullptr;
    return run(
        c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor", next_key(), {output},
        op_device(output),
        [&](OpBuffers &b) {
            at::Tensor out = b.place(output, false, true);
            at::Tensor mine = out.narrow(0, rank_ * n, n);
            if (b.in_pool(input) &&
                (input.data_ptr() == mine.data_ptr() || !OpBuffers::overlaps(input, out))) {
                send = input.data_ptr(); /* zero copy; in place when it is block rank */
            } else {
                mine.view(input.sizes()).copy_(input);
                send = mine.data_ptr();
            }
            recv = out.data_ptr();
        },
        [&](const coll_op_params_t *params, coll_request_t **req) {
            return coll_allgather_async(comm_->get(), send, recv, n, dt, params, req);
        });
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::reduce_scatter(
    std::vector<at::Tensor> &outputs, std::vector<std::vector<at::Tensor>> &inputs,
    const c10d::ReduceScatterOptions &opts)
{
    at::Tensor &out = only(outputs, "reduce_scatter");
    coll_dtype_t dt = check_tensor(out, "reduce_scatter: output");
    coll_redop_t op = to_coll_op(opts.reduceOp, dt);
    TORCH_CHECK(inputs.size() == 1, "collectived: reduce_scatter takes one input list");
    std::vector<at::Tensor> &ins = inputs[0];
    check_list(ins, out, size_, "reduce_scatter: input list");
    int64_t n = out.numel();
    void *send = nullptr, *recv = nullptr;
    return run(
        c10d::OpType::REDUCE_SCATTER, "reduce_scatter", next_key(), outputs, op_device(out),
        [&](OpBuffers &b) {
            at::Tensor all = b.scratch(size_ * n, out.scalar_type());
            for (int i = 0; i < size_; i++) {
                all.narrow(0, i * n, n).view(ins[i].sizes()).copy_(ins[i]);
            }
            if (b.in_pool(out)) {
                recv = out.data_ptr();
            } else {
                at::Tensor mine = all.narrow(0, rank_ * n, n);
                b.copy_back(mine, out);
                recv = mine.data_ptr();
            }
            send = all.data_ptr();
        },
        [&](const coll_op_params_t *params, coll_request_t **req) {
            return coll_reduce_scatter_async(comm_->get(), send, recv, n, dt, op, params, req);
        });
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::_reduce_scatter_base(
    at::Tensor &output, at::Tensor &input, const c10d::ReduceScatterOptions &opts)
{
    coll_dtype_t dt = check_tensor(output, "reduce_scatter_tensor: output");
    check_tensor(input, "reduce_scatter_tensor: input");
    check_same(output, input, size_, "reduce_scatter_tensor");
    coll_redop_t op = to_coll_op(opts.reduceOp, dt);
    int64_t n = output.numel();
    void *send = nullptr, *recv = nullptr;
    return run(
        c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", next_key(), {output},
        op_device(output),
        [&](OpBuffers &b) {
            at::Tensor in = b.place(input, true, false);
            at::Tensor mine = in.narrow(0, rank_ * n, n);
            if (b.in_pool(output) &&
                (output.data_ptr() == mine.data_ptr() || !OpBuffers::overlaps(output, in))) {
                recv = output.data_ptr();
            } else if (!b.in_pool(input)) {
                b.copy_back(mine, output); /* in place in the staged copy of the input */
                recv = mine.data_ptr();
            } else {
                at::Tensor r = b.scratch(n, output.scalar_type()); /* the input stays intact */
                b.copy_back(r, output);
                recv = r.data_ptr();
            }
            send = in.data_ptr();
        },
        [&](const coll_op_params_t *params, coll_request_t **req) {
            return coll_reduce_scatter_async(comm_->get(), send, recv, n, dt, op, params, req);
        });
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::barrier(const c10d::BarrierOptions &)
{
    return run(
        c10d::OpType::BARRIER, "barrier", next_key(), {}, -1, [](OpBuffers &) {},
        [&](const coll_op_params_t *params, coll_request_t **req) {
            return coll_barrier_async(comm_->get(), params, req);
        });
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::send(std::vector<at::Tensor> &tensors, int dst,
                                                  int tag)
{
    only(tensors, "send");
    check_tag(tag);
    return p2p(tensors, dst, tag, true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::recv(std::vector<at::Tensor> &tensors, int src,
                                                  int tag)
{
    at::Tensor &t = only(tensors, "recv");
    check_tag(tag);
    check_tensor(t, "recv: tensor");
    check_rank(src, size_, "recv: source");
    if (auto taken = any_->take(t, src, tag)) {
        return taken;
    }
    return p2p(tensors, src, tag, false);
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::recvAnysource(std::vector<at::Tensor> &tensors,
                                                           int tag)
{
    at::Tensor &t = only(tensors, "recv");
    check_tag(tag);
    check_tensor(t, "recv: tensor");
    TORCH_CHECK(size_ > 1, "collectived: recv from any source in a group of one rank");
    TORCH_CHECK(t.device().is_cpu(), "collectived: recv from any source takes CPU tensors (",
                t.device(), " given)");
    return any_->any(t, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::p2p(std::vector<at::Tensor> &tensors, int peer,
                                                 int tag, bool send)
{
    at::Tensor &t = tensors[0];
    const char *name = send ? "send" : "recv";
    coll_dtype_t dt = check_tensor(t, send ? "send: tensor" : "recv: tensor");
    check_rank(peer, size_, send ? "send: destination" : "recv: source");
    TORCH_CHECK(peer != rank_, "collectived: ", send ? "send to" : "receive from",
                " itself (rank ", rank_, ")");
    void *p = nullptr;
    return run(
        send ? c10d::OpType::SEND : c10d::OpType::RECV, name, p2p_key(peer, tag, send), tensors,
        op_device(t),
        [&](OpBuffers &b) { p = b.place(t, send, !send).data_ptr(); },
        [&](const coll_op_params_t *params, coll_request_t **req) {
            return send ? coll_send_async(comm_->get(), p, t.numel(), dt, peer, params, req)
                        : coll_recv_async(comm_->get(), p, t.numel(), dt, peer, params, req);
        });
}

/* Gather: the root gathers into one staging buffer (its own block in place), then copies
 * every block out; the other ranks only send. */
c10::intrusive_ptr<c10d::Work> ProcessGroup::gather(std::vector<std::vector<at::Tensor>> &outputs,
                                                    std::vector<at::Tensor> &inputs,
                                                    const c10d::GatherOptions &opts)
{
    at::Tensor &in = only(inputs, "gather");
    coll_dtype_t dt = check_tensor(in, "gather: input");
    int root = static_cast<int>(opts.rootRank);
    check_rank(root, size_, "gather: root");
    std::vector<at::Tensor> outs = root_list(outputs, in, rank_, root, size_, "gather", "output");
    int64_t n = in.numel();
    void *send = nullptr, *recv = nullptr;
    return run(
        c10d::OpType::GATHER, "gather", next_key(), outs, op_device(in),
        [&](OpBuffers &b) {
            if (rank_ != root) {
                send = b.place(in, true, false).data_ptr();
                return;
            }
            at::Tensor all = b.scratch(size_ * n, in.scalar_type());
            at::Tensor mine = all.narrow(0, rank_ * n, n);
            mine.view(in.sizes()).copy_(in);
            for (int i = 0; i < size_; i++) {
                b.copy_back(all.narrow(0, i * n, n), outs[i]);
            }
            send = mine.data_ptr();
            recv = all.data_ptr();
        },
        [&](const coll_op_params_t *params, coll_request_t **req) {
            return coll_gather_async(comm_->get(), send, recv, n, dt, root, params, req);
        });
}

/* Scatter: the root copies every block into one staging buffer and sends from it; every rank
 * receives its block in place. */
c10::intrusive_ptr<c10d::Work> ProcessGroup::scatter(std::vector<at::Tensor> &outputs,
                                                     std::vector<std::vector<at::Tensor>> &inputs,
                                                     const c10d::ScatterOptions &opts)
{
    at::Tensor &out = only(outputs, "scatter");
    coll_dtype_t dt = check_tensor(out, "scatter: output");
    int root = static_cast<int>(opts.rootRank);
    check_rank(root, size_, "scatter: root");
    std::vector<at::Tensor> ins = root_list(inputs, out, rank_, root, size_, "scatter", "input");
    int64_t n = out.numel();
    void *send = nullptr, *recv = nullptr;
    return run(
        c10d::OpType::SCATTER, "scatter", next_key(), outputs, op_device(out),
        [&](OpBuffers &b) {
            recv = b.place(out, false, true).data_ptr();
            if (rank_ == root) {
                at::Tensor all = b.scratch(size_ * n, out.scalar_type());
                for (int i = 0; i < size_; i++) {
                    all.narrow(0, i * n, n).view(ins[i].sizes()).copy_(ins[i]);
                }
                send = all.data_ptr();
            }
        },
        [&](const coll_op_params_t *params, coll_request_t **req) {
            return coll_scatter_async(comm_->get(), send, recv, n, dt, root, params, req);
        });
}

at::Tensor ProcessGroup::alloc(int64_t bytes, int device)
{
    TORCH_CHECK(bytes >= 0, "collectived: cannot allocate ", bytes, " bytes");
    TORCH_CHECK(device < 0 || cuda_built(), "collectived: a tensor on cuda:", device,
                " in the pool needs the backend built against a torch with CUDA");
    std::shared_ptr<Comm> comm = comm_;
    void *ptr = comm->alloc(bytes > 0 ? static_cast<size_t>(bytes) : 1, device);
    at::TensorOptions options = at::TensorOptions().dtype(at::kByte);
    if (device >= 0) {
        options = options.device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device));
    }
    return at::from_blob(ptr, {bytes}, [comm](void *p) { comm->free(p); }, options);
}

}  // namespace collectived
