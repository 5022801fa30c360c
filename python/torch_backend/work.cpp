#include "work.hpp"

#include <ATen/core/jit_type.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <thread>

#include "device.hpp"

namespace collectived {

namespace {

/* How often complete() looks at a CUDA operation's end event, which follows the request's end
 * by its copies back only. */
constexpr int kEventPollUs = 50;

/* A c10::Error (RuntimeError in Python) with @p msg. */
std::exception_ptr error_of(const std::string &msg)
{
    return std::make_exception_ptr(
        c10::Error({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, msg));
}
}  // namespace

Work::Work(std::shared_ptr<Comm> comm, int rank, c10d::OpType type, const char *name,
           uint64_t key, std::vector<at::Tensor> outputs, Buffers buffers)
    : c10d::Work(rank, type), comm_(std::move(comm)), name_(name), key_(key),
      outputs_(std::move(outputs)), buffers_(std::move(buffers)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get())))
{
}

Work::~Work()
{
    /* A request that ended was freed by complete(); one in flight is detached by this. */
    coll_req_free(req_);
}

void Work::finish_with(std::exception_ptr error)
{
    finish(error);
    if (error) {
        future_->setError(error);
    } else {
        future_->markCompleted(c10::IValue(outputs_));
    }
}

void Work::complete(coll_status_t st)
{
    std::exception_ptr error;
    if (end_ != nullptr) {
        /* The copies back are queued on the side stream; the staging buffers go back to their
         * free lists once it passed them (the request's end, whatever it was, stored the done
         * word the side stream waits for). On the event's device, so that this thread makes
         * no context on another. A device error leaves the buffers to the daemon for good. */
        try {
            c10::DeviceGuard guard(end_->device());
            while (!end_->query()) {
                std::this_thread::sleep_for(std::chrono::microseconds(kEventPollUs));
            }
        } catch (...) {
            error = std::current_exception();
            st = COLL_ERR_TIMEDOUT; /* the buffers are abandoned below */
        }
    }
    if (st == COLL_OK && end_ == nullptr) {
        try {
            for (auto &copy : buffers_.copy_back) {
                copy.second.copy_(copy.first.view(copy.second.sizes()));
            }
        } catch (...) {
            error = std::current_exception();
        }
    } else if (st != COLL_OK && !error) {
        error = error_of(comm_->message(st, "collectived: " + name_ + " (key " +
                                                std::to_string(key_) + ")"));
    }
    if (st == COLL_ERR_TIMEDOUT) {
        /* The library's verdict on a daemon that answered nothing: it may still write. */
        for (auto &lease : buffers_.leases) {
            lease.abandon();
        }
    }
    coll_req_free(req_);
    req_ = nullptr;
    buffers_ = Buffers();
    finish_with(error);
}

void Work::complete_from(int source, const at::Tensor &data)
{
    source_ = source;
    buffers_.copy_back.emplace_back(data, outputs_.at(0));
    complete(COLL_OK);
}

void Work::fail(std::exception_ptr error)
{
    buffers_ = Buffers();
    finish_with(error);
}

int Work::sourceRank() const
{
    TORCH_CHECK(source_ >= 0, "collectived: ", name_, ": sourceRank() is the sender of a "
                "receive from any source");
    return source_;
}

void Work::abandon(const std::string &why)
{
    coll_req_free(req_);
    req_ = nullptr;
    for (auto &lease : buffers_.leases) {
        lease.abandon();
    }
    buffers_ = Buffers();
    finish_with(error_of("collectived: " + name_ + " (key " + std::to_string(key_) + "): " + why));
}

bool Work::wait(std::chrono::milliseconds timeout)
{
    if (end_ != nullptr) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (exception_) {
            std::rethrow_exception(exception_);
        }
        stream_wait_event(*end_);
        return true;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    if (timeout <= std::chrono::milliseconds(0)) {
        cv_.wait(lock, [this] { return completed_; });
    } else if (!cv_.wait_for(lock, timeout, [this] { return completed_; })) {
        TORCH_CHECK(false, "collectived: ", name_, " (key ", key_, ") did not complete within ",
                    timeout.count(), " ms; it is still in flight (wait again, or let the job's "
                    "timeout end it)");
    }
    if (exception_) {
        std::rethrow_exception(exception_);
    }
    return true;
}

void Work::synchronize()
{
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return completed_; });
    if (exception_) {
        std::rethrow_exception(exception_);
    }
}

}  // namespace collectived
