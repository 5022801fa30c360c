#include "comm.hpp"

#include <c10/util/Exception.h>

namespace collectived {

std::shared_ptr<Comm> Comm::create(const CommOptions &o)
{
    coll_comm_params_t p = {};
    coll_comm_t *comm = nullptr;

    p.field_mask = COLL_COMM_PARAM_JOB | COLL_COMM_PARAM_RANK | COLL_COMM_PARAM_LOCAL_RANK |
                   COLL_COMM_PARAM_TIMEOUT;
    p.job = o.job.c_str();
    p.rank = o.rank;
    p.world_size = o.world_size;
    p.local_rank = o.local_rank;
    p.local_size = o.local_size;
    p.timeout_ms = o.timeout_ms;
    if (!o.token.empty()) {
        p.field_mask |= COLL_COMM_PARAM_TOKEN;
        p.job_token = o.token.c_str();
    }
    if (!o.root.empty()) {
        p.field_mask |= COLL_COMM_PARAM_ROOT;
        p.root = o.root.c_str();
    }
    coll_status_t st = coll_comm_create(&p, &comm);
    TORCH_CHECK(st == COLL_OK, "collectived: joining job ", o.job, " as rank ", o.rank, " of ",
                o.world_size, " failed: ", coll_err_name(st), ": ", coll_strerror(st), ": ",
                coll_comm_last_error(nullptr));
    return std::shared_ptr<Comm>(new Comm(comm));
}

Comm::~Comm() { coll_comm_destroy(comm_); }

coll_status_t Comm::try_alloc(size_t bytes, int device, void **ptr_p)
{
    void *ptr = nullptr;
    coll_status_t st = device < 0 ? coll_mem_alloc(comm_, bytes, &ptr)
                                  : coll_mem_alloc_on(comm_, bytes, COLL_MEMORY_CUDA, device, &ptr);
    if (st == COLL_OK) {
        std::lock_guard<std::mutex> lock(mu_);
        allocs_[reinterpret_cast<uintptr_t>(ptr)] = Alloc{bytes, device};
        *ptr_p = ptr;
    }
    return st;
}

void *Comm::alloc(size_t bytes, int device)
{
    void *ptr = nullptr;
    coll_status_t st = try_alloc(bytes, device, &ptr);
    if (st != COLL_OK) {
        fail(st, "collectived: allocating " + std::to_string(bytes) + " bytes in the pool" +
                     (device < 0 ? std::string() : " on cuda:" + std::to_string(device)));
    }
    return ptr;
}

void Comm::free(void *ptr)
{
    {
        std::lock_guard<std::mutex> lock(mu_);
        allocs_.erase(reinterpret_cast<uintptr_t>(ptr));
    }
    coll_mem_free(comm_, ptr);
}

bool Comm::contains(const void *ptr, size_t bytes, int device) const
{
    uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = allocs_.upper_bound(p);
    if (it == allocs_.begin()) {
        return false;
    }
    --it;
    const Alloc &a = it->second;
    return a.device == device && p - it->first <= a.bytes && bytes <= a.bytes - (p - it->first);
}

std::string Comm::message(coll_status_t st, const std::string &what) const
{
    std::string detail = coll_comm_last_error(comm_);
    std::string text = what + ": " + coll_err_name(st) + ": " + coll_strerror(st);
    if (st == COLL_ERR_TIMEDOUT) {
        text += " (the group's timeout passed)";
    }
    return detail.empty() ? text : text + ": " + detail;
}

void Comm::fail(coll_status_t st, const std::string &what) const
{
    TORCH_CHECK(false, message(st, what));
}

}  // namespace collectived
