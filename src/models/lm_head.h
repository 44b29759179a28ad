// The output layer and the loss, fused and chunked over rows: logits = x @ W^T for one chunk of rows at a
// time, the cross-entropy and its gradient in place (kernels' fused classifier), and when training the
// chunk's backward at once (dx rows =, dW +=). Neither the whole batch's logits nor their gradient ever
// exist: Llama 3's 128,256-column vocabulary at B*T = 8192 rows would be 2 GiB in bf16 (4 GiB in fp32).
// Every architecture's forward ends here; its backward then starts from dx.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "models/activations.h"

namespace llmt::models {

// Rows per chunk for B*T rows over Vp columns of `elem_bytes` each, given the bytes of the other
// activations (`act_bytes`). The chunk's logits get a budget of 1/kLmHeadBudgetShare of those, and at least
// kLmHeadMinRows rows: every chunk re-reads W (Vp x C, bf16) for its logits and dx and, when W is trained,
// reads and writes its fp32 gradient, 12 C Vp bytes against the chunk's 6 rows C Vp FLOPs: rows / 2 FLOP
// per byte, 1024 at 2048 rows, well above the ~210 (H200) to ~300 (H100) where their GEMMs turn
// compute-bound; larger chunks measured no faster on the 1B shape (docs/benchmarks.md: 2^28 logits, 2048
// rows there, against 2^29 and 2^30). The chunks are equal (the last one no shorter than needed).
// LLMTRAIN_LM_HEAD_ROWS (core/knobs.h) forces the rows: all of them (one chunk, the unfused reference) or a
// fixed count; the result is always in [1, BT].
inline constexpr int64_t kLmHeadMinRows = 2048;
inline constexpr int64_t kLmHeadBudgetShare = 16;
int64_t lm_head_chunk_rows(int64_t BT, int64_t Vp, size_t elem_bytes, size_t act_bytes);

// The logits buffer of an activation layout, sized by lm_head_chunk_rows from what `a` holds so far (add it
// after the per-layer buffers, so the budget is the activations that grow with B*T), and that buffer as the
// (rows, Vp) scratch LmHeadIo takes.
ActId add_lm_head_logits(ActLayout& a, int64_t Vp);
Tensor lm_head_scratch(const Activations& acts, ActId logits, int64_t Vp);

struct LmHeadIo {
    Tensor x;        // (BT, C): the final norm's output, compute dtype
    Tensor weight;   // (Vp, C): the head (or the tied embedding), compute dtype
    Tensor logits;   // (rows, Vp) scratch, rows in [1, BT] (lm_head_chunk_rows), compute dtype
    Tensor losses;   // (BT) f32: per-row loss out
    Tensor targets;  // (BT) i32, on the model's device: in [0, V) or < 0 (ignored)
    // Training only (else empty): dx (BT, C) = the loss gradient w.r.t. x; dweight (Vp, C) f32 +=.
    Tensor dx, dweight;
};

// losses = cross-entropy per row; with dx/dweight given, their gradients of loss_i * dloss_scale.
void lm_head_loss(const LmHeadIo& io, int V, float dloss_scale);

// The logits of every row (BT x Vp floats, host memory) without targets, from a model on any device.
void lm_head_logits(float* out, Tensor x, Tensor weight, Tensor logits_scratch);

}  // namespace llmt::models
