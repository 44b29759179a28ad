// Linear layer on CUDA through cuBLASLt; same semantics as cpu/matmul.h (weight stored (OC, C)).
// fp32: fp32 storage with fp32 compute (CUBLAS_COMPUTE_32F, no TF32) so results track the CPU backend;
// env LLMTRAIN_CUDA_TF32=1 switches to TF32 tensor-core compute (benchmarks).
// bf16: bf16 operands on the tensor cores with fp32 accumulation; dweight and dbias accumulate in fp32.
// Legend: BT rows, C input channels, OC output channels. dinp =; dweight, dbias +=.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace llmt::kernels::cuda {

// out (BT,OC) = inp (BT,C) @ weight (OC,C)^T + bias (OC) [+ residual (BT,OC)]; bias may be null (fused as
// cuBLASLt's epilogue); residual, when given, is cuBLASLt's C matrix (beta 1; not aliasing out), so the
// residual add costs no pass of its own.
// tf32: this call's product on TF32 tensor cores whatever LLMTRAIN_CUDA_TF32 says (the classifier's
// convolutions with trainer.conv_tf32).
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int BT, int C, int OC,
                    cudaStream_t stream, const float* residual = nullptr, bool tf32 = false);
void matmul_forward(__nv_bfloat16* out, const __nv_bfloat16* inp, const __nv_bfloat16* weight,
                    const __nv_bfloat16* bias, int BT, int C, int OC, cudaStream_t stream,
                    const __nv_bfloat16* residual = nullptr);
// out = GELU-tanh(inp @ weight^T + bias) and pre_gelu = inp @ weight^T + bias (BT,OC), one cuBLASLt call
// (GELU_AUX_BIAS epilogue); bias is required.
void matmul_forward_gelu(__nv_bfloat16* out, __nv_bfloat16* pre_gelu, const __nv_bfloat16* inp,
                         const __nv_bfloat16* weight, const __nv_bfloat16* bias, int BT, int C, int OC,
                         cudaStream_t stream);
// dinp (BT,C) = dout @ weight (null: skipped); dweight (OC,C) += dout^T @ inp; dbias (OC) += column sums of
// dout (null: skipped). dout (BT,OC); inp (BT,C); weight (OC,C).
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int BT, int C, int OC, cudaStream_t stream);
// bf16; when gelu_pre (BT,C) is given, dinp = (dout @ weight) * GELU'(gelu_pre) (DGELU epilogue): the
// backward through the GELU that produced inp from gelu_pre. dweight may be null here (skipped).
void matmul_backward(__nv_bfloat16* dinp, const __nv_bfloat16* gelu_pre, float* dweight, float* dbias,
                     const __nv_bfloat16* dout, const __nv_bfloat16* inp, const __nv_bfloat16* weight, int BT, int C,
                     int OC, cudaStream_t stream);

// The general row-major product on cuBLASLt, for ops on sub-blocks of matrices (LoRA's parts):
// C (M, N; leading dimension ldc) = alpha * op(A) @ op(B) + beta * C, op(A) (M, K) being A (M, K; lda) or,
// with ta, the transpose of A (K, M; lda); likewise op(B) (K, N). AB, CD: (float, float), (bf16, bf16) or
// (bf16, float) (fp32 accumulation always).
template <typename AB, typename CD>
void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const AB* A, int lda, const AB* B, int ldb, float beta,
          CD* C, int ldc, cudaStream_t stream, bool tf32 = false);

// dst (cols) += column sums of x (rows, cols), fp32 sums: the bias gradient of a linear layer whose output
// gradient is x.
template <typename T>
void add_column_sums(float* dst, const T* x, int rows, int cols, cudaStream_t stream);

}  // namespace llmt::kernels::cuda
