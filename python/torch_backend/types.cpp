#include "types.hpp"

#include <c10/util/Exception.h>

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

coll_redop_t to_coll_op(const c10d::ReduceOp &op)
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
        TORCH_CHECK(false, "collectived does not support ReduceOp.BAND (supported: SUM, AVG, "
                    "PRODUCT, MIN, MAX)");
    case c10d::ReduceOp::BOR:
        TORCH_CHECK(false, "collectived does not support ReduceOp.BOR (supported: SUM, AVG, "
                    "PRODUCT, MIN, MAX)");
    case c10d::ReduceOp::BXOR:
        TORCH_CHECK(false, "collectived does not support ReduceOp.BXOR (supported: SUM, AVG, "
                    "PRODUCT, MIN, MAX)");
    default:
        TORCH_CHECK(false, "collectived does not support reduction ", int(op.op_),
                    " (PREMUL_SUM is NCCL's; supported: SUM, AVG, PRODUCT, MIN, MAX)");
    }
}

coll_dtype_t check_tensor(const at::Tensor &t, const char *what)
{
    TORCH_CHECK(t.device().is_cpu(), "collectived: ", what, " is on ", t.device(),
                "; the collectived backend carries CPU tensors");
    TORCH_CHECK(t.layout() == at::kStrided, "collectived: ", what, " has layout ", t.layout(),
                "; only dense (strided) tensors are supported");
    return to_coll_dtype(t.scalar_type());
}

}  // namespace collectived
