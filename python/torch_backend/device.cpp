#include "device.hpp"

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#ifdef COLL_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace collectived {

namespace {

c10::Device cuda(int device)
{
    return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device));
}

/* torch's CUDA streams and events through its device-generic interface: only the stream's
 * handle needs CUDA's own headers (raw_stream()). */
const c10::impl::VirtualGuardImpl &cuda_impl()
{
    static const c10::impl::VirtualGuardImpl impl(c10::DeviceType::CUDA);
    return impl;
}

}  // namespace

int op_device(const at::Tensor &t)
{
    return t.is_cuda() ? t.device().index() : -1;
}

bool cuda_built()
{
#ifdef COLL_TORCH_CUDA
    return true;
#else
    return false;
#endif
}

void *raw_stream(const c10::Stream &s)
{
#ifdef COLL_TORCH_CUDA
    return c10::cuda::CUDAStream(s).stream();
#else
    TORCH_CHECK(false, "collectived: the backend was built against a torch without CUDA (",
                s, " has no handle here)");
#endif
}

StreamOrder::StreamOrder(int device, c10::Stream side)
    : current_(cuda_impl().getStream(cuda(device))), side_(side)
{
}

coll_status_t StreamOrder::after(coll_request_t *req,
                                 const std::vector<std::pair<at::Tensor, at::Tensor>> &copies,
                                 std::unique_ptr<c10::Event> *end_p)
{
    if (req != nullptr) {
        coll_status_t st = coll_req_stream_wait(req, raw_stream(side_));
        if (st != COLL_OK) {
            return st;
        }
    } else {
        /* Done at submission: the results are whatever the current stream left there. */
        c10::Event reached(c10::DeviceType::CUDA);
        reached.record(current_);
        reached.block(side_);
    }
    c10::StreamGuard guard(side_);
    for (const auto &c : copies) {
        c.second.copy_(c.first.view(c.second.sizes()));
        cuda_impl().recordDataPtrOnStream(c.second.storage().data_ptr(), side_);
    }
    auto end = std::make_unique<c10::Event>(c10::DeviceType::CUDA);
    end->record(side_);
    *end_p = std::move(end);
    return COLL_OK;
}

c10::Stream side_stream_for(int device)
{
    return cuda_impl().getStreamFromGlobalPool(cuda(device), false);
}

void stream_wait_event(const c10::Event &end)
{
    end.block(cuda_impl().getStream(end.device()));
}

}  // namespace collectived
