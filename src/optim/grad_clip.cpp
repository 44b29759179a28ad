// Global-norm clipping (grad_clip.h) on top of the reduction kernels.
#include "optim/grad_clip.h"

#include <cmath>
#include <cstdint>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace llmt::optim {

double grad_sum_squares(const float* grads, std::size_t n, Device device) {
    if (n == 0) return 0.0;
    return kernels::sum_squares(
        Tensor(const_cast<float*>(grads), {static_cast<std::int64_t>(n)}, DType::kF32, device));
}

double global_norm_from_sumsq(double sumsq) { return std::sqrt(sumsq); }

float clip_coefficient(double total_norm, double max_norm) {
    if (max_norm <= 0.0 || !std::isfinite(total_norm)) return 1.0f;
    // torch: clip_coef = max_norm / (total_norm + 1e-6); clamp(max=1.0). Computed in double then
    // rounded once to fp32 (torch computes it in the grads' dtype, fp32).
    double coef = max_norm / (total_norm + 1e-6);
    return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

double clip_grad_norm(float* grads, std::size_t n, double max_norm) {
    double norm = global_norm_from_sumsq(grad_sum_squares(grads, n));
    float coef = clip_coefficient(norm, max_norm);
    if (coef < 1.0f && n > 0) kernels::scale_inplace(Tensor(grads, {static_cast<std::int64_t>(n)}), coef);
    return norm;
}

}  // namespace llmt::optim
