/**
 * @file process_group.hpp
 * @brief The "collectived" backend: torch.distributed's collectives over libcollective.
 *
 * Its base is chosen at build time: c10d::ProcessGroup under torch 1.x, whose process groups
 * are backends themselves; c10d::Backend under torch 2.x, where torch's ProcessGroup holds one
 * backend per device type and this one serves both "cpu" and "cuda" (collective/
 * torch_backend.py registers it so). COLL_TORCH_AS_BACKEND forces the second under torch 1.13,
 * whose c10d::Backend has the same virtual collectives, to check that variant here.
 *
 * Tensors live on the CPU or on one CUDA device per operation (device.hpp): CUDA tensors go
 * through the job's device pool and follow ProcessGroupNCCL's stream semantics.
 *
 * Every operation is asynchronous: it is submitted at once and returns a Work that completes
 * when the daemon's request does (see work.hpp, progress.hpp).
 *
 * Matching (the threads rule of collective.h): torch may call a process group from any thread
 * (DDP's reducer runs on autograd's), and the library refuses an operation without a key from
 * a thread other than the communicator's creator. So every operation carries a key, taken
 * under a lock in call order: the group's n-th collective has key n (mod 2^39), which every
 * rank gives it as long as the ranks call collectives in the same order, the contract of every
 * c10d backend. Point-to-point messages are numbered per peer, direction and tag: key =
 * tag << 16 | n (mod 2^16), so the n-th send of tag t to a peer meets that peer's n-th receive
 * of tag t from this rank (tags 0..63; at most 65536 messages of one tag in flight per peer).
 * Tag 64 is the group's own, for monitoredBarrier()'s messages.
 *
 * Operations the library has no single call for are composed of its collectives in the
 * backend, one function each (coalesced.cpp, sparse.cpp, monitored_barrier.cpp): the doc
 * comment of each says which operations it runs and what that costs against a native
 * algorithm.
 *
 * Failures: arguments are checked before the key is taken, identically on every rank (a bad
 * dtype, reduction, root or size raises and nothing is submitted). A failure after it (no
 * room in the pool for staging, a refused submission) ends the job on every rank, as the
 * library does for refused submissions, since the other ranks could never complete that key.
 */
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2 || defined(COLL_TORCH_AS_BACKEND)
#include <torch/csrc/distributed/c10d/Backend.hpp>
#define COLL_TORCH_BACKEND_BASE 1
#endif

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "anysource.hpp"
#include "buffers.hpp"
#include "comm.hpp"
#include "device.hpp"
#include "progress.hpp"
#include "staging.hpp"

namespace collectived {

#ifdef COLL_TORCH_BACKEND_BASE
using PgBase = c10d::Backend;
#else
using PgBase = c10d::ProcessGroup;
#endif

class ProcessGroup : public PgBase {
  public:
    /**
     * @param comm      The group's communicator, whose rank and size are the group's.
     * @param store     The default group's torch store, held until the group ends (end()); null
     *                  for any other group.
     * @param releaser  How the destructor waits (the progress thread's join, end()'s barriers)
     *                  with the GIL released (Progress::Releaser).
     */
    ProcessGroup(std::shared_ptr<Comm> comm, c10::intrusive_ptr<c10d::Store> store,
                 Progress::Releaser releaser);
    /** Fails the receives from any source that wait (AnySource::close()); the default group
     *  then ends with every rank (end()). */
    ~ProcessGroup() override;

    const std::string getBackendName() const override { return "collectived"; }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                             const c10d::BroadcastOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                             const c10d::AllreduceOptions &opts) override;
#if TORCH_VERSION_MAJOR >= 2
    /** @brief torch 2's entry for a sparse tensor's allreduce: sparse_allreduce(). */
    c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor> &tensors,
                                                    const c10d::AllreduceOptions &opts) override;
#endif
    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                          const c10d::ReduceOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                             std::vector<at::Tensor> &inputs,
                                             const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                   const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                  std::vector<std::vector<at::Tensor>> &inputs,
                                                  const c10d::ReduceScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
        at::Tensor &output, at::Tensor &input, const c10d::ReduceScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::GatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                           std::vector<std::vector<at::Tensor>> &inputs,
                                           const c10d::ScatterOptions &opts) override;

    /**
     * @brief Allreduce of several tensors of one dtype as ONE allreduce: they are packed into
     *        one staging buffer (in list order), reduced, and unpacked. Costs what an allreduce
     *        of their total elements costs (the bytes a native coalesced algorithm moves) plus
     *        a copy of each tensor in and out of the buffer. The operation carries a layout
     *        fingerprint of the tensors' element counts (coll_op_params_t.layout), so ranks
     *        whose lists differ in count or sizes (even with the same total) fail with the
     *        library's COLL_ERR_MISMATCH, never reduce unrelated elements.
     * @throws c10::Error before submitting for an empty list, mixed dtypes, a tensor
     *         collectived does not carry, or a reduction it does not have.
     */
    c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
        std::vector<at::Tensor> &tensors, const c10d::AllreduceCoalescedOptions &opts) override;

    /**
     * @brief All-gather of several tensors as ONE all-gather: this rank's tensors are packed
     *        into its block of one staging buffer, the blocks gathered, and rank r's block
     *        unpacked into @p outputs[r]. Costs an all-gather of their total elements (what a
     *        native algorithm moves) plus local copies; mismatches as allreduce_coalesced().
     * @throws c10::Error before submitting unless @p outputs has one list per rank, each with
     *         a tensor of input i's dtype and sizes at i, and the inputs share one dtype.
     */
    c10::intrusive_ptr<c10d::Work> allgather_coalesced(
        std::vector<std::vector<at::Tensor>> &outputs, std::vector<at::Tensor> &inputs,
        const c10d::AllgatherOptions &opts) override;

    /**
     * @brief A barrier that names the ranks that did not come (gloo's protocol): every other
     *        rank sends rank 0 a byte and waits for its answer; rank 0 waits for each at most
     *        @p opts.timeout (from the start; each the whole timeout with @p wait_all_ranks),
     *        then answers all. 2 (N - 1) one-byte messages, all through rank 0, where the
     *        dissemination barrier sends N log2 N spread over the ranks. Blocks the caller.
     * @throws c10::Error on rank 0 "Rank r failed to pass monitoredBarrier in T ms" (the first
     *         missing rank), or with @p wait_all_ranks "Ranks r, s failed ..." (all of them),
     *         or without it "Rank 0 timed out in monitoredBarrier after T ms" (with the ranks
     *         that passed) when the time ran out before a rank was waited for; rank 0 then ends the job on every rank (coll_comm_abort()) with that message, so
     *         the others fail at once ("Rank q successfully reached monitoredBarrier, but
     *         received errors while waiting for send/recv from rank 0") instead of waiting for
     *         the group's timeout, and a rank that comes late finds the job ended.
     */
    void monitoredBarrier(const c10d::BarrierOptions &opts, bool wait_all_ranks) override;

    /**
     * @brief all_to_all_single: block j of @p input (@p input_splits[j] rows along its first
     *        dimension; N equal blocks when empty) goes to rank j, block i of @p output (by
     *        @p output_splits) receives rank i's. One coll_alltoallv_async() (alltoall.cpp):
     *        ranks that disagree on a pair's block or on the dtype fail together with
     *        COLL_ERR_MISMATCH, no output written.
     * @throws c10::Error before submitting for tensors collectived does not carry, differing
     *         dtypes or sizes beyond the first dimension, split sizes that are not N in
     *         number, are negative or do not sum to the first dimension (or, when empty, an N
     *         that does not divide it).
     */
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                                 std::vector<int64_t> &output_splits,
                                                 std::vector<int64_t> &input_splits,
                                                 const c10d::AllToAllOptions &opts) override;

    /**
     * @brief all_to_all: @p inputs[j] goes to rank j, @p outputs[i] receives rank i's (any
     *        sizes, each pair agreeing). One coll_alltoallv_async() through one staging
     *        buffer per list (alltoall.cpp), failing as alltoall_base().
     * @throws c10::Error before submitting unless both lists have N tensors collectived
     *         carries, all of one dtype.
     */
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                            std::vector<at::Tensor> &inputs,
                                            const c10d::AllToAllOptions &opts) override;

    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst,
                                        int tag) override;
    /** @brief Receive from @p src; takes over a receive an earlier recvAnysource() left posted
     *         for @p src (see anysource.hpp). */
    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src,
                                        int tag) override;

    /**
     * @brief Receive the next message with @p tag from any other rank (anysource.hpp: a
     *        receive posted for every rank that has none, the first to end taken; the others
     *        stay posted for their ranks' next messages). The Work's sourceRank() is the
     *        sender.
     * @throws c10::Error before posting for a bad tensor or tag, a CUDA tensor, or a group of
     *         one rank.
     */
    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors,
                                                 int tag) override;

    /**
     * @return A uint8 tensor of @p bytes in the group's pool on CUDA device @p device, or in
     *         host memory for -1 (freed when its storage goes): collectives on it, or on
     *         contiguous views of it, copy nothing.
     * @throws c10::Error when the pool has no room, or the daemon no pool on that device.
     */
    at::Tensor alloc(int64_t bytes, int device);

    /** @return The staging counters (see staging.hpp). */
    Staging::Stats staging_stats() const { return staging_->stats(); }

  private:
    /** @return The first of @p n consecutive collective keys, taken at once (call order). */
    uint64_t next_key(int n = 1);
    /** @return The next key of a message to (@p send) or from @p peer with @p tag. */
    uint64_t p2p_key(int peer, int tag, bool send);

    /** send() and recv() once their arguments are checked; @p tag may be the group's own. */
    c10::intrusive_ptr<c10d::Work> p2p(std::vector<at::Tensor> &tensors, int peer, int tag,
                                       bool send);

    /**
     * @brief allreduce() of a sparse COO tensor (sparse.cpp): two all-gathers, the tensors'
     *        sizes and nnz (96 bytes per rank), then their indices and values, each rank's
     *        padded to the largest nnz: (N - 1) x max nnz x (8 x sparse dims + the bytes of a
     *        dense block) bytes into every rank, where an all-gather of varying sizes (gloo's
     *        allgatherv) moves the sum of the actual nnz instead; then N sparse additions on
     *        every rank. Blocks the caller until done (the second all-gather's size comes
     *        from the first); the returned Work is complete.
     * @throws c10::Error before submitting for a reduction other than SUM or more than 8
     *         dimensions; on every rank, before the second all-gather, when the ranks' tensors
     *         differ in dtype, dimensions or sizes (naming the rank); a failure of either
     *         all-gather with the library's message.
     */
    c10::intrusive_ptr<c10d::Work> sparse_allreduce(at::Tensor &t,
                                                    const c10d::AllreduceOptions &opts);

    /**
     * @brief All-gather of @p block bytes per rank under collective @p key, this rank's block
     *        beginning with @p parts (byte tensors, at most @p block bytes in all; the rest of
     *        the block is not meant to be read). Blocks until done.
     * @return The N blocks, in rank order (a CPU byte tensor of N x @p block).
     */
    at::Tensor gather_blocks(const std::vector<at::Tensor> &parts, int64_t block, uint64_t key);

    /** monitoredBarrier() on rank 0: wait for every other rank, then answer them. */
    void monitor_ranks(std::chrono::milliseconds timeout, bool wait_all_ranks);

    template <typename Build, typename Call>
    c10::intrusive_ptr<c10d::Work> run(c10d::OpType type, const char *name, uint64_t key,
                                       std::vector<at::Tensor> outputs, int device, Build build,
                                       Call call);

    /**
     * @brief The end of the default group, in its destructor (shutdown.cpp): a barrier (every
     *        rank is done with the store), the store released (on rank 0 under env://, the
     *        last reference to its TCPStore: the server closes), a second barrier (no rank
     *        returns, and starts its next rendezvous at the same address, before that). Each
     *        barrier waits at most the group's timeout; a failed one (a rank gone, the job
     *        ended) ends the wait, and the store is released all the same.
     */
    void end();
    /** @return Whether a barrier of the group (the next key) completed; waits with the GIL
     *          released. */
    bool end_barrier();

    /** @return The staging buffers of @p device (-1: host memory), made on first use. */
    std::shared_ptr<Staging> staging_for(int device);
    /** @return The group's side stream of CUDA device @p device (device.hpp), taken from
     *          torch's pool on first use. */
    c10::Stream side_stream(int device);

    std::shared_ptr<Comm> comm_;
    c10::intrusive_ptr<c10d::Store> store_;   /* the default group's; null for others */
    Progress::Releaser releaser_;
    std::shared_ptr<Staging> staging_;        /* host memory's */
    std::mutex device_mu_;
    std::map<int, std::shared_ptr<Staging>> device_staging_; /* under device_mu_ */
    std::map<int, c10::Stream> side_;         /* under device_mu_ */
    std::shared_ptr<AnySource> any_;
    std::mutex key_mu_;
    uint64_t next_seq_ = 0;                   /* under key_mu_ */
    static constexpr uint64_t kKeyMask = (uint64_t(1) << 27) - 1; /* a collective key's bits */
    static constexpr int kMonitorTag = 64;    /* monitoredBarrier()'s messages */
    static constexpr int kTags = kMonitorTag + 1;
    std::map<int64_t, uint32_t> p2p_seq_;     /* (peer, direction, tag) -> next number */
    Progress progress_;                       /* last: stops first */
};

}  // namespace collectived
