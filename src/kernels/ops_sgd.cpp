// Validation and device dispatch of kernels/ops.h's sgd_update_runs (SGD with momentum, cpu/sgd.h).
#include <cstddef>
#include <vector>

#include "core/bf16.h"
#include "core/check.h"
#include "kernels/cpu/sgd.h"
#include "kernels/ops.h"
#include "kernels/ops_check.h"

#if LLMT_CUDA_ENABLED
#include "kernels/cuda/sgd.h"
#endif

namespace llmt::kernels {

using namespace ops_check;  // NOLINT(google-build-using-namespace): the shared helpers of every ops*.cpp

void sgd_update_runs(Tensor params, Tensor buf, Tensor grads, const SgdParams& hp, const std::vector<AdamWRun>& runs,
                     Tensor params_lp) {
    const char* op = "sgd_update_runs";
    check_device(op, {{"params", params}, {"buf", buf}, {"grads", grads}, {"params_lp", params_lp}});
    const bool momentum = hp.momentum != 0.0f;
    LLMT_INTERNAL_CHECK(momentum != buf.empty(), "{}: a momentum buffer is needed exactly when momentum != 0 "
                        "(momentum {}, buffer {})", op, hp.momentum, buf.empty() ? "absent" : "present");
    if (momentum) check_same_numel(op, {{"params", params}, {"buf", buf}, {"grads", grads}});
    else check_same_numel(op, {{"params", params}, {"grads", grads}});
    check_f32(op, {{"params", params}, {"buf", buf}, {"grads", grads}});
    if (!params_lp.empty()) {
        check_dtype(op, "params_lp", params_lp, DType::kBF16);
        LLMT_INTERNAL_CHECK(params_lp.numel() == params.numel(), "{}: params_lp has {} elements, params {}", op,
                            params_lp.numel(), params.numel());
    }
    for (size_t r = 0; r < runs.size(); r++)
        LLMT_INTERNAL_CHECK(runs[r].begin < runs[r].end && runs[r].end <= params.numel() &&
                                (r == 0 ? runs[r].begin >= 0 : runs[r].begin >= runs[r - 1].end),
                            "{}: run {} [{}, {}) is empty, outside the {} elements or not after the previous run", op,
                            r, runs[r].begin, runs[r].end, params.numel());
    float* b = momentum ? f(buf) : nullptr;
    LLMT_ON_CUDA(params.device,
                 sgd_update_runs(f(params), params_lp.empty() ? nullptr : p<__nv_bfloat16>(params_lp), b, f(grads),
                                 runs.data(), static_cast<int>(runs.size()), hp, cuda::stream()));
    for (const AdamWRun& r : runs) {
        SgdParams h = hp;
        if (!r.decay) h.weight_decay = 0.0f;
        cpu::sgd_update(f(params) + r.begin, b ? b + r.begin : nullptr, f(grads) + r.begin,
                        static_cast<size_t>(r.end - r.begin), h);
        if (!params_lp.empty())  // the compute copy, as the CUDA kernel writes it in the same pass
            for (int64_t i = r.begin; i < r.end; ++i) p<uint16_t>(params_lp)[i] = bf16_from_float(f(params)[i]);
    }
}

}  // namespace llmt::kernels
