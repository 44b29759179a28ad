// The normalisation before each block and the head, whichever the family uses (BlockConfig::norm): one
// forward and one backward over kernels::layernorm_* or kernels::rmsnorm_*.
#pragma once

#include "core/tensor.h"
#include "models/block_config.h"

namespace llmt::models {

// The forward's statistics: mean (B,T) f32 (LayerNorm only, else empty) and rstd (B,T) f32.
struct NormStats {
    Tensor mean, rstd;
};

// out (B,T,C) = norm(x) with weight w and bias b (C; LayerNorm only).
void norm_forward(NormKind kind, Tensor out, NormStats stats, Tensor x, Tensor w, Tensor b, float eps);
// dx (B,T,C) += (the residual stream); dw, db (C) +=; dout (B,T,C); x, w, stats as in the forward.
// dx_colsum (C, optional, LayerNorm only) += the column sums of dx after the update: the bias gradient of
// the projection whose output was added to this residual stream.
void norm_backward(NormKind kind, Tensor dx, Tensor dw, Tensor db, Tensor dout, Tensor x, Tensor w, NormStats stats,
                   Tensor dx_colsum = {});

}  // namespace llmt::models
