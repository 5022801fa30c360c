#include "buffers.hpp"

namespace collectived {

bool OpBuffers::in_pool(const at::Tensor &t) const
{
    return t.is_contiguous() && t.numel() > 0 && comm_.contains(t.data_ptr(), t.nbytes(), device_);
}

at::Tensor OpBuffers::scratch(int64_t numel, at::ScalarType type)
{
    Lease lease = staging_.acquire(static_cast<size_t>(numel) * c10::elementSize(type));
    at::TensorOptions options = at::TensorOptions().dtype(type);
    if (device_ >= 0) {
        options = options.device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device_));
    }
    at::Tensor view = at::from_blob(lease.get(), {numel}, options);
    buffers_.leases.push_back(std::move(lease));
    return view;
}

at::Tensor OpBuffers::place(const at::Tensor &t, bool copy_in, bool copy_back_after)
{
    if (in_pool(t)) {
        return t.view(-1);
    }
    at::Tensor view = scratch(t.numel(), t.scalar_type());
    if (copy_in) {
        view.view(t.sizes()).copy_(t);
    }
    if (copy_back_after) {
        copy_back(view, t);
    }
    return view;
}

void OpBuffers::copy_back(const at::Tensor &from, const at::Tensor &to)
{
    buffers_.copy_back.emplace_back(from, to);
}

bool OpBuffers::overlaps(const at::Tensor &a, const at::Tensor &b)
{
    auto pa = reinterpret_cast<uintptr_t>(a.data_ptr());
    auto pb = reinterpret_cast<uintptr_t>(b.data_ptr());
    return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

}  // namespace collectived
