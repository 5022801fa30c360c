/*
 * monitoredBarrier(): gloo's protocol over the group's point-to-point messages (tag
 * kMonitorTag): every other rank sends rank 0 a byte and waits for its answer; rank 0 waits for
 * each in turn within the timeout, names those that did not come, else answers them all.
 */
#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <string>
#include <vector>

#include "run.hpp"

namespace collectived {

namespace {

using Clock = std::chrono::steady_clock;
using Works = std::vector<c10::intrusive_ptr<c10d::Work>>;

/* The ranks (1 ..) whose Work in @p works did not complete successfully within @p timeout from
 * @p start (each within the whole @p timeout with @p wait_all); without @p wait_all, the first
 * such rank only, or none when the time ran out before rank r was waited for: then
 * @p *expired is r (else 0). */
std::vector<int> late_ranks(const Works &works, Clock::time_point start,
                            std::chrono::milliseconds timeout, bool wait_all, int *expired)
{
    std::vector<int> late;
    *expired = 0;
    for (size_t r = 1; r < works.size() && (wait_all || late.empty()); r++) {
        auto left = wait_all ? timeout
                             : timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                             Clock::now() - start);
        if (left.count() <= 0) {
            *expired = static_cast<int>(r);
            break;
        }
        bool came = false;
        try {
            came = works[r]->wait(left);
        } catch (const c10::Error &) {
            came = false; /* not within the time, or failed: either way it did not pass */
        }
        if (!came) {
            late.push_back(static_cast<int>(r));
        }
    }
    return late;
}

/* gloo's messages: the ranks that did not pass, or the time that ran out first. */
std::string failure(const std::vector<int> &late, int expired, std::chrono::milliseconds timeout)
{
    if (expired == 0) {
        return c10::str("[Rank 0]: Rank", late.size() > 1 ? "s " : " ", c10::Join(", ", late),
                        " failed to pass monitoredBarrier in ", timeout.count(), " ms");
    }
    std::vector<int> passed;
    for (int r = 1; r < expired; r++) {
        passed.push_back(r);
    }
    return c10::str("Rank 0 timed out in monitoredBarrier after ", timeout.count(), " ms.\n",
                    passed.empty() ? "No ranks successfully processed in monitoredBarrier."
                                   : "Successfully processed ranks: " + c10::Join(", ", passed));
}

}  // namespace

void ProcessGroup::monitor_ranks(std::chrono::milliseconds timeout, bool wait_all_ranks)
{
    auto start = Clock::now();
    std::vector<std::vector<at::Tensor>> bytes(size_);
    Works recvs(size_), sends(size_);
    for (int r = 1; r < size_; r++) {
        bytes[r] = {at::zeros({1}, at::kByte)};
        recvs[r] = p2p(bytes[r], r, kMonitorTag, false);
    }
    int expired = 0;
    std::vector<int> late = late_ranks(recvs, start, timeout, wait_all_ranks, &expired);
    if (late.empty() && expired == 0) {
        for (int r = 1; r < size_; r++) {
            sends[r] = p2p(bytes[r], r, kMonitorTag, true);
        }
        late = late_ranks(sends, start, timeout, wait_all_ranks, &expired);
    }
    if (!late.empty() || expired != 0) {
        std::string why = failure(late, expired, timeout);
        coll_comm_abort(comm_->get(), why.c_str());
        TORCH_CHECK(false, why);
    }
}

void ProcessGroup::monitoredBarrier(const c10d::BarrierOptions &opts, bool wait_all_ranks)
{
    auto timeout = opts.timeout == c10d::kUnsetTimeout ? ::kProcessGroupDefaultTimeout
                                                       : opts.timeout;
    TORCH_CHECK(timeout.count() >= 0, "collectived: monitoredBarrier: timeout ",
                timeout.count(), " ms");
    if (rank_ == 0) {
        monitor_ranks(timeout, wait_all_ranks);
        return;
    }
    std::vector<at::Tensor> out{at::zeros({1}, at::kByte)}, in{at::zeros({1}, at::kByte)};
    try {
        auto send = p2p(out, 0, kMonitorTag, true);
        auto recv = p2p(in, 0, kMonitorTag, false);
        send->wait();
        recv->wait();
    } catch (const c10::Error &e) {
        TORCH_CHECK(false, "Rank ", rank_, " successfully reached monitoredBarrier, but received "
                    "errors while waiting for send/recv from rank 0. Please check rank 0 logs "
                    "for faulty rank.\n Original exception: \n", e.what_without_backtrace());
    }
}

}  // namespace collectived
