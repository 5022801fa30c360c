/**
 * @file progress.hpp
 * @brief The thread that completes a process group's Work objects when their requests end.
 *
 * torch waits on a Work (wait()), polls it (is_completed()) or chains callbacks on its future
 * (DDP's reducer does), so something must notice each request's end without the caller: one
 * thread per process group sleeps in coll_req_wait() on the oldest pending request (the
 * library sleeps on its control block's futex, without spinning) for at most a slice of 5 ms,
 * then tests every pending request and completes those that ended, oldest first. A request
 * that ends in order is seen at once; one that ends before an older one, at most a slice late
 * (as in the Python package's progress thread). Shorter slices cost more than they save: with
 * 1 ms, the wake-ups during backward made DDP's step 25-40 % slower on a 2-vCPU host running
 * 4 ranks (tests/system/torch/ddp_step_time.py), as each one preempts the ranks' compute.
 *
 * Future callbacks run on this thread: they must not wait for another Work of the same group.
 * A Python callback takes the GIL here; so the destructor, which the interpreter may run with
 * the GIL held, joins the thread through a hook that releases it (see module.cpp).
 */
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "work.hpp"

namespace collectived {

class Progress {
  public:
    /** Runs its argument (the join of the thread) with whatever must not be held meanwhile
     *  released; may be empty. */
    using Releaser = std::function<void(const std::function<void()> &)>;

    explicit Progress(Releaser releaser)
        : releaser_(std::move(releaser)), thread_([this] { run(); }) {}

    /** @brief Stop the thread; Work still in flight is abandoned (fails, see Work::abandon). */
    ~Progress();

    /** @brief Complete @p work when its request ends. Thread-safe. */
    void add(c10::intrusive_ptr<Work> work);

  private:
    void run();
    void complete_ended();

    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<c10::intrusive_ptr<Work>> pending_; /* in submission order */
    bool stop_ = false;
    Releaser releaser_;
    std::thread thread_; /* last: starts once the members above exist */
};

}  // namespace collectived
