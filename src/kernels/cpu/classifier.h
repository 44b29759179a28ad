// The classifier's loss: softmax + cross-entropy over the first V of Vp logit columns (the vocabulary
// padded for GEMM speed; padding columns are never predicted: probability 0, gradient 0), fused with
// its backward so the 2 passes over the (B,T,Vp) logits happen once per row while it is in cache and no
// second logits-sized buffer exists (llm.c fused_classifier). Mean-reduction matches
// torch.nn.functional.cross_entropy when dloss_scale = 1/(number of counted positions).
// Legend: B batch, T time, V vocabulary, Vp padded vocabulary (>= V).
// Targets < 0 are ignored: loss 0 and a zero gradient row (torch's ignore_index with value -1).
#pragma once

#include <cstdint>

namespace llmt::kernels::cpu {

// losses (B,T) = logsumexp(logits[b,t,:V]) - logits[b,t,target]. logits (B,T,Vp); targets (B,T).
void classifier_forward(float* losses, const float* logits, const int32_t* targets, int B, int T, int V,
                        int Vp);

// losses (B,T) as above, and in the same pass logits (B,T,Vp) is overwritten with
// dlogits = (softmax(logits[:V]) - onehot(target)) * dloss_scale, 0 in the padding columns.
// Activation grad: =.
void classifier_forward_backward(float* losses, float* logits, const int32_t* targets, float dloss_scale,
                                 int B, int T, int V, int Vp);

// Evaluation of a batch of B rows (T = 1) after classifier_forward: preds (B) = per row the index of the
// first maximum of logits[:V] (torch.argmax, std::max_element); loss_sum (2) = the sum of `losses` over the
// rows with a target >= 0, computed in double and returned as fp32 hi + lo (hi = float(sum),
// lo = float(sum - hi): hi + lo in double recovers the sum to ~1e-14 relative).
void classifier_predict(int32_t* preds, float* loss_sum, const float* logits, const float* losses,
                        const int32_t* targets, int B, int V, int Vp);

// probs (B,T,Vp) = softmax over the first V columns of logits (B,T,Vp), 0 in the padding columns;
// probs may alias logits. For sampling and evaluation tools.
void softmax_forward(float* probs, const float* logits, int B, int T, int V, int Vp);

}  // namespace llmt::kernels::cpu
