/**
 * @file work.hpp
 * @brief The c10d::Work of one collectived operation: its request, the staging buffers it
 *        holds, the copies back into the caller's tensors, and the future torch waits on.
 *
 * Life: the process group builds the operation's Buffers (copying inputs that live outside
 * the pool into staging), submits it and hands the Work to its Progress thread, which calls
 * complete() once the daemon's request ended: the results are copied back into the caller's
 * tensors, the staging buffers return to their free lists, and then (only then) the Work
 * counts as completed and its future is marked, so whoever waits reads final tensors.
 */
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <ATen/core/ivalue.h>
#include <c10/core/Event.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm.hpp"
#include "staging.hpp"

namespace collectived {

/** The pool side of one operation: leased buffers and what to copy back on success. */
struct Buffers {
    std::vector<Lease> leases;
    /** (pool view, caller's tensor): copied from the first into the second on success. */
    std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;
};

class Work : public c10d::Work {
  public:
    /**
     * @param comm     The communicator the request belongs to (kept alive by the Work).
     * @param name     The operation, for messages ("allreduce").
     * @param key      Its key, for messages.
     * @param outputs  The tensors the future's value and result() hold.
     */
    Work(std::shared_ptr<Comm> comm, int rank, c10d::OpType type, const char *name, uint64_t key,
         std::vector<at::Tensor> outputs, Buffers buffers);
    ~Work() override;

    /** @brief Set the request of the submission (before the Work is shared). */
    void set_request(coll_request_t *req) { req_ = req; }

    /** @return The request, or nullptr when the operation completed at submission. */
    coll_request_t *request() const { return req_; }
    /** @return The copies back (pool view, caller's tensor) of the operation's buffers. */
    const std::vector<std::pair<at::Tensor, at::Tensor>> &copies() const
    {
        return buffers_.copy_back;
    }
    /**
     * @brief Make this the Work of an operation on CUDA tensors (device.hpp): @p end is
     *        recorded on the side stream after the copies back, which complete() then no longer
     *        makes. Before the Work is shared.
     */
    void set_end(std::unique_ptr<c10::Event> end) { end_ = std::move(end); }

    /**
     * @brief The request ended with @p st: copy back (on success; on CUDA tensors, wait until
     *        the end event completed instead), release the buffers, mark the Work and its
     *        future completed (with the daemon's message on failure). Called once, by the
     *        progress thread (or the submitter, for an operation done at once).
     */
    void complete(coll_status_t st);

    /**
     * @brief Complete a Work without a request of its own (a receive handed a message another
     *        request received, see anysource.hpp): copy @p data (of the outputs' only
     *        tensor's elements and dtype) into it and record @p source as sourceRank().
     */
    void complete_from(int source, const at::Tensor &data);

    /** @brief Fail a Work without a request of its own with @p error (see complete_from()). */
    void fail(std::exception_ptr error);

    /** @return The rank a receive's message came from (complete_from()). @throws c10::Error
     *          for any other Work, as c10d::Work does. */
    int sourceRank() const override;

    /**
     * @brief Give up on an operation still in flight (its process group is being destroyed):
     *        the request is freed (detached), the staging buffers stay allocated for the
     *        daemon until the communicator goes, and the Work fails with @p why.
     */
    void abandon(const std::string &why);

    /**
     * @brief On CPU tensors: block until complete() ran, at most @p timeout (0: no bound of the
     *        caller's; the library ends every collective by the job's timeout + 1 s). On CUDA
     *        tensors, ProcessGroupNCCL's semantics: make the current stream of their device
     *        wait for the operation's end, without blocking (synchronize() blocks).
     * @return true (on CPU tensors, once completed successfully).
     * @throws c10::Error with the daemon's message when the operation failed (on CUDA tensors:
     *         when that is known already), or a timeout error when @p timeout passed first
     *         (the operation stays in flight; wait again).
     */
    bool wait(std::chrono::milliseconds timeout) override;
    /** @brief Block until complete() ran (for CUDA tensors: their copies back and end event
     *         too). @throws c10::Error with the daemon's message when the operation failed. */
    void synchronize() override;

    std::vector<at::Tensor> result() override { return outputs_; }
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  private:
    void finish_with(std::exception_ptr error);

    std::shared_ptr<Comm> comm_;
    coll_request_t *req_ = nullptr;
    std::string name_;
    uint64_t key_;
    int source_ = -1;
    std::vector<at::Tensor> outputs_;
    Buffers buffers_;
    std::unique_ptr<c10::Event> end_; /* CUDA tensors: the side stream's end event */
    c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace collectived
