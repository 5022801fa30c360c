#include "progress.hpp"

#include <utility>
#include <vector>

namespace collectived {

namespace {
constexpr int kSliceMs = 5;
}

Progress::~Progress()
{
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_one();
    auto join = [this] { thread_.join(); };
    if (releaser_) {
        releaser_(join);
    } else {
        join();
    }
    for (auto &work : pending_) {
        work->abandon("the process group was destroyed before the operation completed");
    }
}

void Progress::add(c10::intrusive_ptr<Work> work)
{
    {
        std::lock_guard<std::mutex> lock(mu_);
        pending_.push_back(std::move(work));
    }
    cv_.notify_one();
}

/* Test every pending request once; complete the ended ones outside the lock, in order. */
void Progress::complete_ended()
{
    std::vector<std::pair<c10::intrusive_ptr<Work>, coll_status_t>> ended;
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto it = pending_.begin(); it != pending_.end();) {
            coll_status_t st = coll_req_test((*it)->request());
            if (st == COLL_INPROGRESS) {
                ++it;
                continue;
            }
            ended.emplace_back(std::move(*it), st);
            it = pending_.erase(it);
        }
    }
    for (auto &e : ended) {
        e.first->complete(e.second);
    }
}

void Progress::run()
{
    for (;;) {
        c10::intrusive_ptr<Work> oldest;
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [this] { return stop_ || !pending_.empty(); });
            if (stop_) {
                return;
            }
            oldest = pending_.front();
        }
        coll_req_wait(oldest->request(), kSliceMs);
        complete_ended();
    }
}

}  // namespace collectived
