#include "models/norm.h"

#include "core/check.h"
#include "kernels/ops.h"

namespace llmt::models {

void norm_forward(NormKind kind, Tensor out, NormStats stats, Tensor x, Tensor w, Tensor b, float eps) {
    if (kind == NormKind::kLayerNorm) return kernels::layernorm_forward(out, stats.mean, stats.rstd, x, w, b, eps);
    kernels::rmsnorm_forward(out, stats.rstd, x, w, eps);
}

void norm_backward(NormKind kind, Tensor dx, Tensor dw, Tensor db, Tensor dout, Tensor x, Tensor w, NormStats stats,
                   Tensor dx_colsum) {
    if (kind == NormKind::kLayerNorm)
        return kernels::layernorm_backward(dx, dw, db, dout, x, w, stats.mean, stats.rstd, dx_colsum);
    LLMT_INTERNAL_CHECK(dx_colsum.empty(), "norm_backward: RMSNorm sums no bias gradient");
    kernels::rmsnorm_backward(dx, dw, dout, x, w, stats.rstd);
}

}  // namespace llmt::models
