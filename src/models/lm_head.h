// The output layer and the loss, fused and chunked over rows: logits = x @ W^T for one chunk of rows at a
// time, the cross-entropy and its gradient in place (kernels' fused classifier), and when training the
// chunk's backward at once (dx rows =, dW +=). Neither the whole batch's logits nor their gradient ever
// exist: Llama 3's 128,256-column vocabulary at B*T = 8192 rows would be 2 GiB in bf16 (4 GiB in fp32).
// Every architecture's forward ends here; its backward then starts from dx.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace llmt::models {

// Rows per chunk for B*T rows over Vp columns: all of them when the logits fit kLmHeadChunkElems,
// else equal chunks that do.
inline constexpr int64_t kLmHeadChunkElems = int64_t{1} << 28;
int64_t lm_head_chunk_rows(int64_t BT, int64_t Vp);

struct LmHeadIo {
    Tensor x;        // (BT, C): the final norm's output, compute dtype
    Tensor weight;   // (Vp, C): the head (or the tied embedding), compute dtype
    Tensor logits;   // (rows, Vp) scratch, rows = lm_head_chunk_rows(BT, Vp), compute dtype
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
