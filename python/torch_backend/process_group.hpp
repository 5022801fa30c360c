/**
 * @file process_group.hpp
 * @brief c10d::ProcessGroup "collectived": torch.distributed's collectives over libcollective.
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
 *
 * Failures: arguments are checked before the key is taken, identically on every rank (a bad
 * dtype, reduction, root or size raises and nothing is submitted). A failure after it (no
 * room in the pool for staging, a refused submission) ends the job on every rank, as the
 * library does for refused submissions, since the other ranks could never complete that key.
 */
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "buffers.hpp"
#include "comm.hpp"
#include "progress.hpp"
#include "staging.hpp"

namespace collectived {

class ProcessGroup : public c10d::ProcessGroup {
  public:
    /**
     * @param comm      The group's communicator, whose rank and size are the group's.
     * @param releaser  How the destructor joins the progress thread (Progress::Releaser).
     */
    ProcessGroup(std::shared_ptr<Comm> comm, Progress::Releaser releaser);
    ~ProcessGroup() override = default;

    const std::string getBackendName() const override { return "collectived"; }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                             const c10d::BroadcastOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                             const c10d::AllreduceOptions &opts) override;
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
    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst,
                                        int tag) override;
    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src,
                                        int tag) override;

    /**
     * @return A uint8 CPU tensor of @p bytes in the group's pool (freed when its storage
     *         goes): collectives on it, or on contiguous views of it, copy nothing.
     */
    at::Tensor alloc(int64_t bytes);

    /** @return The staging counters (see staging.hpp). */
    Staging::Stats staging_stats() const { return staging_->stats(); }

  private:
    uint64_t next_key();
    uint64_t p2p_key(int peer, int tag, bool send);

    template <typename Build, typename Call>
    c10::intrusive_ptr<c10d::Work> run(c10d::OpType type, const char *name, uint64_t key,
                                       std::vector<at::Tensor> outputs, Build build, Call call);

    std::shared_ptr<Comm> comm_;
    std::shared_ptr<Staging> staging_;
    std::mutex key_mu_;
    uint64_t next_seq_ = 0;                   /* under key_mu_ */
    std::map<int64_t, uint32_t> p2p_seq_;     /* (peer, direction, tag) -> next number */
    Progress progress_;                       /* last: stops first */
};

}  // namespace collectived
