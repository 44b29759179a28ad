// Linear layer out = inp @ weight^T + bias with weight stored (OC, C) as torch.nn.Linear does; forward
// and backward on the GEMM backend of gemm.h (llm.c train_gpt2.c matmul_*).
// Legend: B batch, T time, C input channels, OC output channels; BT = B*T rows.
// Grad convention (src/kernels/README.md): dinp = (activation grad, overwritten); dweight, dbias +=.
#pragma once

#include <cstdint>

namespace llmt::kernels::cpu {

// The GEMMs' input precision (trainer.precision on the CPU): fp32, or bf16 operands with fp32 accumulation
// (gemm_bf16.h) while weights, gradients and activations stay fp32 in memory, as torch's CPU autocast does.
// Process-wide; the trainer sets it before the first step. Without AVX512_BF16, bf16 is emulated (gemm_bf16.h).
enum class MatmulPrecision : uint8_t { kF32, kBF16 };
void set_matmul_precision(MatmulPrecision p);
MatmulPrecision matmul_precision();

// out (BT,OC) = inp (BT,C) @ weight (OC,C)^T + bias (OC); bias may be null. `precision`: the process's
// unless a caller knows better for its shape (cpu/conv2d.cpp keeps K < 16 GEMMs in fp32).
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int BT, int C,
                    int OC, MatmulPrecision precision = matmul_precision());

// dinp (BT,C) = dout @ weight; dweight (OC,C) += dout^T @ inp; dbias (OC) += column sums of dout.
// dout (BT,OC); inp (BT,C); weight (OC,C). dinp, dweight and dbias may be null (not computed).
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int BT, int C, int OC, MatmulPrecision precision = matmul_precision());

}  // namespace llmt::kernels::cpu
