#include "types.hpp"

#include <c10/util/Exception.h>

#include "device.hpp"

namespace collectived {

coll_dtype_t to_coll_dtype(at::ScalarType type)
{
    switch (type) {
    case at::kFloat:
        return COLL_FLOAT32;
    case at::kDouble:
        return COLL_FLOAT64;
    case at::kHalf:
        return COLL_FLOAT16;
    case at::kBFloat16:
        return COLL_BFLOAT16;
    case at::kChar:
        return COLL_INT8;
    case at::kByte:
        return COLL_UINT8;
    case at::kInt:
        return COLL_INT32;
    case at::kLong:
        return COLL_INT64;
    default:
        TORCH_CHECK(false, "collectived does not support dtype ", type, " (supported: float32, "
                    "float64, float16, bfloat16, int8, uint8, int32, int64)");
    }
}

/* The bitwise reductions, of the integer dtypes only. */
static coll_redop_t bitwise(coll_redop_t op, coll_dtype_t dtype)
{
    TORCH_CHECK(dtype != COLL_FLOAT32 && dtype != COLL_FLOAT64 && dtype != COLL_FLOAT16 &&
                    dtype != COLL_BFLOAT16,
                "collectived: reduction ", coll_redop_name(op), " does not apply to ",
                coll_dtype_name(dtype), ": ReduceOp.BAND, BOR and BXOR take integer tensors "
                "(int8, uint8, int32, int64)");
    return op;
}

coll_redop_t to_coll_op(const c10d::ReduceOp &op, coll_dtype_t dtype)
{
    switch (op.op_) {
    case c10d::ReduceOp::SUM:
        return COLL_SUM;
    case c10d::ReduceOp::AVG:
        return COLL_AVG;
    case c10d::ReduceOp::PRODUCT:
        return COLL_PROD;
    case c10d::ReduceOp::MIN:
        return COLL_MIN;
    case c10d::ReduceOp::MAX:
        return COLL_MAX;
    case c10d::ReduceOp::BAND:
        return bitwise(COLL_BAND, dtype);
    case c10d::ReduceOp::BOR:
        return bitwise(COLL_BOR, dtype);
    case c10d::ReduceOp::BXOR:
        return bitwise(COLL_BXOR, dtype);
    default:
        TORCH_CHECK(false, "collectived does not support reduction ", int(op.op_),
                    " (PREMUL_SUM is NCCL's; supported: SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, "
                    "BXOR)");
    }
}

coll_dtype_t check_tensor(const at::Tensor &t, const char *what)
{
    TORCH_CHECK(t.device().is_cpu() || (t.is_cuda() && cuda_built()), "collectived: ", what,
                " is on ", t.device(), "; the collectived backend carries CPU tensors",
                cuda_built() ? " and CUDA tensors" : " (built against a torch without CUDA)");
    TORCH_CHECK(t.layout() == at::kStrided, "collectived: ", what, " has layout ", t.layout(),
                "; only dense (strided) tensors are supported");
    return to_coll_dtype(t.scalar_type());
}

}  // namespace collectived
