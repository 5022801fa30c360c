#include "staging.hpp"

#include <c10/util/Exception.h>

namespace collectived {

namespace {
constexpr size_t kMinClass = 4096;
}

Lease &Lease::operator=(Lease &&other) noexcept
{
    if (this != &other) {
        if (ptr_ != nullptr) {
            owner_->give_back(ptr_, capacity_);
        }
        owner_ = std::move(other.owner_);
        ptr_ = other.ptr_;
        capacity_ = other.capacity_;
        other.ptr_ = nullptr;
    }
    return *this;
}

Lease::~Lease()
{
    if (ptr_ != nullptr) {
        owner_->give_back(ptr_, capacity_);
    }
}

size_t Staging::size_class(size_t bytes)
{
    if (bytes <= kMinClass) {
        return kMinClass;
    }
    size_t top = size_t(1) << (63 - __builtin_clzll(bytes - 1)); /* highest bit of bytes - 1 */
    size_t step = top / 4;
    return (bytes + step - 1) / step * step;
}

Staging::~Staging()
{
    std::lock_guard<std::mutex> lock(mu_);
    release_free_locked();
}

void Staging::release_free_locked()
{
    for (auto &entry : free_) {
        comm_->free(entry.second);
        stats_.bytes -= entry.first;
    }
    free_.clear();
}

Lease Staging::acquire(size_t bytes)
{
    size_t cls = size_class(bytes);
    void *ptr = nullptr;
    std::lock_guard<std::mutex> lock(mu_);

    auto it = free_.find(cls);
    if (it != free_.end()) {
        ptr = it->second;
        free_.erase(it);
        stats_.reuses++;
        return Lease(shared_from_this(), ptr, cls);
    }
    coll_status_t st = comm_->try_alloc(cls, device_, &ptr);
    if (st == COLL_ERR_POOL_FULL && !free_.empty()) {
        release_free_locked();
        st = comm_->try_alloc(cls, device_, &ptr);
    }
    if (st != COLL_OK) {
        comm_->fail(st, "staging " + std::to_string(bytes) + " bytes in the pool" +
                            (device_ < 0 ? std::string() : " on cuda:" + std::to_string(device_)) +
                            (st == COLL_ERR_POOL_FULL
                                 ? std::string(" (tensors of collective.torch_backend.empty() "
                                               "need no staging)")
                                 : std::string()));
    }
    stats_.allocations++;
    stats_.bytes += cls;
    return Lease(shared_from_this(), ptr, cls);
}

void Staging::give_back(void *ptr, size_t capacity)
{
    std::lock_guard<std::mutex> lock(mu_);
    free_.emplace(capacity, ptr);
}

Staging::Stats Staging::stats() const
{
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
}

}  // namespace collectived
