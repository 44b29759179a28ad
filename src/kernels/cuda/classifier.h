// Fused softmax + cross-entropy (+ its gradient) on CUDA; same semantics as cpu/classifier.h: one block
// per row, an online max/sum pass and a write pass, so the (B,T,Vp) logits are read twice and written
// once and no second logits-sized buffer exists. Legend: B batch, T time, V vocab, Vp padded vocab.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace llmt::kernels::cuda {

// losses (B,T) = logsumexp(logits[:V]) - logits[target] (0 where target < 0).
void classifier_forward(float* losses, const float* logits, const int32_t* targets, int B, int T, int V, int Vp,
                        cudaStream_t stream);
// As above, and logits := (softmax - onehot) * dloss_scale, 0 in padding columns and ignored rows.
void classifier_forward_backward(float* losses, float* logits, const int32_t* targets, float dloss_scale, int B,
                                 int T, int V, int Vp, cudaStream_t stream);
// Evaluation of B rows (cpu/classifier.h classifier_predict): preds (B) = the first maximum of logits[:V]
// per row; loss_sum (2) = the labelled rows' summed loss as fp32 hi + lo of a double. One block: a fixed
// assignment of rows to threads and a fixed reduction tree, so the sum is deterministic.
void classifier_predict(int32_t* preds, float* loss_sum, const float* logits, const float* losses,
                        const int32_t* targets, int B, int V, int Vp, cudaStream_t stream);
// probs (B,T,Vp) = softmax over the first V columns, 0 in padding; may alias logits.
void softmax_forward(float* probs, const float* logits, int B, int T, int V, int Vp, cudaStream_t stream);
// bf16 logits (fp32 losses and arithmetic; dlogits rounded to bf16 in place).
void classifier_forward(float* losses, const __nv_bfloat16* logits, const int32_t* targets, int B, int T, int V,
                        int Vp, cudaStream_t stream);
void classifier_forward_backward(float* losses, __nv_bfloat16* logits, const int32_t* targets, float dloss_scale,
                                 int B, int T, int V, int Vp, cudaStream_t stream);
void softmax_forward(__nv_bfloat16* probs, const __nv_bfloat16* logits, int B, int T, int V, int Vp,
                     cudaStream_t stream);

}  // namespace llmt::kernels::cuda
