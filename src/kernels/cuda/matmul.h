// Linear layer on CUDA through cuBLASLt; same semantics as cpu/matmul.h (weight stored (OC, C)).
// fp32 storage with fp32 compute (CUBLAS_COMPUTE_32F, no TF32) so results track the CPU backend;
// env LLMTRAIN_CUDA_TF32=1 switches to TF32 tensor-core compute (benchmarks).
// Legend: BT rows, C input channels, OC output channels. dinp =; dweight, dbias +=.
#pragma once

#include <cuda_runtime_api.h>

namespace llmt::kernels::cuda {

// out (BT,OC) = inp (BT,C) @ weight (OC,C)^T + bias (OC); bias may be null (fused as cuBLASLt's epilogue).
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int BT, int C, int OC,
                    cudaStream_t stream);
// dinp (BT,C) = dout @ weight (null: skipped); dweight (OC,C) += dout^T @ inp; dbias (OC) += column sums of
// dout (null: skipped). dout (BT,OC); inp (BT,C); weight (OC,C).
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int BT, int C, int OC, cudaStream_t stream);

}  // namespace llmt::kernels::cuda
