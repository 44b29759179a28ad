#include "models/lm_head.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/bf16.h"
#include "core/check.h"
#include "core/knobs.h"
#include "kernels/ops.h"

namespace llmt::models {

namespace {

// Rows [r0, r0 + n) of a (rows, width) tensor.
Tensor rows_of(Tensor t, int64_t r0, int64_t n) {
    const int64_t width = t.numel() / t.dim(0);
    Tensor v = t;
    v.data = static_cast<char*>(t.data) + static_cast<size_t>(r0 * width) * dtype_size(t.dtype);
    v.shape[0] = n;
    return v;
}

// (n, width) as (1, n, width): the classifier kernels take (B, T, Vp).
Tensor as_bt(Tensor t) { return Tensor(t.data, {1, t.dim(0), t.numel() / t.dim(0)}, t.dtype, t.device); }

}  // namespace

int64_t lm_head_chunk_rows(int64_t BT, int64_t Vp, size_t elem_bytes, size_t act_bytes) {
    LLMT_INTERNAL_CHECK(BT >= 1 && Vp >= 1 && elem_bytes >= 1, "lm head: rows {} x {} of {} bytes", BT, Vp,
                        elem_bytes);
    static constexpr int64_t kForced[] = {0, 0, 16, 256, 1024, 4096};  // LLMTRAIN_LM_HEAD_ROWS's choices
    const int forced = knob_choice(Knob::kLmHeadRows);
    if (forced == 1) return BT;
    if (forced > 1) return std::min(BT, kForced[forced]);
    const auto row_bytes = static_cast<size_t>(Vp) * elem_bytes;
    const auto budget_rows = static_cast<int64_t>(std::min<size_t>(act_bytes / kLmHeadBudgetShare / row_bytes,
                                                                   static_cast<size_t>(BT)));
    const int64_t max_rows = std::max(std::min(BT, kLmHeadMinRows), budget_rows);
    const int64_t chunks = (BT + max_rows - 1) / max_rows;
    return (BT + chunks - 1) / chunks;
}

ActId add_lm_head_logits(ActLayout& a, int64_t Vp) {
    return a.add_fixed("logits", lm_head_chunk_rows(a.rows(), Vp, dtype_size(a.dtype()), a.nbytes()) * Vp);
}

Tensor lm_head_scratch(const Activations& acts, ActId logits, int64_t Vp) {
    const int64_t n = acts.arena().entry(logits).shape.at(0);  // add_fixed's one dimension
    return acts.shaped(logits, {n / Vp, Vp});
}

void lm_head_loss(const LmHeadIo& io, int V, float dloss_scale) {
    const int64_t BT = io.x.dim(0), rows = io.logits.dim(0);
    const bool train = !io.dx.empty();
    for (int64_t r0 = 0; r0 < BT; r0 += rows) {
        const int64_t n = std::min(rows, BT - r0);
        Tensor x = rows_of(io.x, r0, n), logits = rows_of(io.logits, 0, n);
        Tensor losses(rows_of(io.losses, r0, n).data, {1, n}, DType::kF32, io.losses.device);
        Tensor targets(rows_of(io.targets, r0, n).data, {1, n}, DType::kI32, io.targets.device);
        kernels::matmul_forward(logits, x, io.weight, Tensor());
        if (!train) {
            kernels::classifier_forward(losses, as_bt(logits), targets, V);
            continue;
        }
        // logits become dlogits in place; then this chunk's share of dx and dW.
        kernels::classifier_forward_backward(losses, as_bt(logits), targets, dloss_scale, V);
        kernels::matmul_backward(rows_of(io.dx, r0, n), io.dweight, Tensor(), logits, x, io.weight);
    }
}

void lm_head_logits(float* out, Tensor x, Tensor weight, Tensor logits_scratch) {
    const int64_t BT = x.dim(0), rows = logits_scratch.dim(0), Vp = weight.dim(0);
    for (int64_t r0 = 0; r0 < BT; r0 += rows) {
        const int64_t n = std::min(rows, BT - r0);
        Tensor logits = rows_of(logits_scratch, 0, n);
        kernels::matmul_forward(logits, rows_of(x, r0, n), weight, Tensor());
        const Tensor src(logits.data, {n * Vp}, logits.dtype, logits.device);
        if (logits.dtype == DType::kF32) {  // from any device
            kernels::copy(Tensor(out + r0 * Vp, {n * Vp}), src);
        } else {  // a bf16 device model's chunk, widened on the host
            std::vector<uint16_t> h(static_cast<size_t>(n * Vp));
            kernels::copy(Tensor(h.data(), {n * Vp}, DType::kBF16), src);
            for (size_t i = 0; i < h.size(); ++i) out[r0 * Vp + static_cast<int64_t>(i)] = float_from_bf16(h[i]);
        }
    }
}

}  // namespace llmt::models
