// Tensor-level entry points of every kernel: the only kernels header models include. Each call
// validates shapes, dtypes and devices once (InternalError naming the op, the argument and what was
// expected: the callers are the engine's models, which must meet these preconditions), then dispatches on
// Tensor::device to kernels::cpu or kernels::cuda (a CUDA tensor throws DeviceError in a build without CUDA).
// Semantics and grad conventions are those of the cpu/ headers named beside each group; src/kernels/README.md has the
// conventions. CUDA ops are asynchronous on the backend's stream (copy() and sum_squares() synchronise); they do not
// read token ids or targets back to range-check them, so callers validate ids on the host before copying them to the
// device. Legend: B batch, T time, C channels, OC output channels, NH (query) heads, KV key/value heads, HS head size,
// F an MLP's hidden width, V vocab, Vp padded vocab.
// Float tensors are f32; token ids and targets are i32. An empty Tensor means "not present".
// Mixed precision (CUDA only): an op's activations and weights may all be bf16 instead (arithmetic and
// accumulation stay fp32); statistics (mean, rstd, lse), losses, parameter gradients and optimizer state
// are always f32. bf16 on the CPU throws InternalError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/adamw_params.h"
#include "kernels/sgd_params.h"
#include "kernels/conv_geom.h"
#include "kernels/image_refs.h"

namespace llmt::kernels {

// cpu/encoder.h. out (B,T,C); inp (B,T) ids in [0,V); wte (V,C); wpe (maxT>=T, C), or empty: the token
// embedding alone (LLaMA, whose positions are RoPE's).
void encoder_forward(Tensor out, Tensor inp, Tensor wte, Tensor wpe);
// dwte (V,C) +=, dwpe (maxT,C) += (or empty, as in the forward); dout (B,T,C); inp (B,T).
void encoder_backward(Tensor dwte, Tensor dwpe, Tensor dout, Tensor inp);

// cpu/layernorm.h. out (B,T,C), mean (B,T), rstd (B,T) = 1/sqrt(var + eps); inp (B,T,C); weight, bias (C);
// eps > 0 (model.norm_eps).
void layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight, Tensor bias, float eps);
// dinp (B,T,C) += (residual stream); dweight, dbias (C) +=; eps reaches it through the forward's rstd.
// dinp_colsum (C, f32, optional) += the column sums of dinp after the update: the bias gradient of the
// linear layer whose output was added to this residual stream (fused into the CUDA kernel's pass over dinp).
void layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight,
                        Tensor mean, Tensor rstd, Tensor dinp_colsum = {});

// cpu/matmul.h. out (...,OC) = inp (...,C) @ weight (OC,C)^T + bias (OC) [+ residual]; leading dims are
// flattened. bias may be empty. residual (optional, out's shape and dtype, aliasing neither out nor inp) is
// added in the same pass (on CUDA as cuBLASLt's C matrix: out is rounded once, after the add).
void matmul_forward(Tensor out, Tensor inp, Tensor weight, Tensor bias, Tensor residual = {});
// dinp (...,C) = (may be empty: not computed); dweight (OC,C) += (may be empty: a frozen weight); dbias (OC) +=
// (may be empty).
void matmul_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight);

// LoRA (Hu et al. 2021; PEFT's lora.Linear) beside a linear layer (kernels/lora_ops.cpp). A fused layer
// (LLaMA's q|k|v) adapts some of its parts: part p has r rows of `a` (its A, (r, C)), its own rows of `b`
// (its B, (rows_p, r)), and adds to the layer's output columns [col_p, col_p + rows_p).
struct LoraSpan {
    int64_t col = 0, rows = 0;
};
// u (...,P*r) = inp (...,C) @ a (P*r, C)^T (kept for backward), then for each part p
// out[..., col_p + j] += scale * u[..., p*r : (p+1)*r] @ b[row_p + j, :]^T, row_p = the earlier parts' rows.
// out (...,OC) holds the base layer's output; b (sum of rows_p, r).
void lora_forward(Tensor out, Tensor u, Tensor inp, Tensor a, Tensor b, float scale,
                  const std::vector<LoraSpan>& spans);
// Given dout (...,OC), the gradient of the layer's output: du (...,P*r) = scratch (=), da, db (f32) +=,
// dinp (...,C) += (after the base layer's dinp was written). inp, u, a, b as in the forward.
void lora_backward(Tensor dinp, Tensor da, Tensor db, Tensor du, Tensor dout, Tensor u, Tensor inp, Tensor a, Tensor b,
                   float scale, const std::vector<LoraSpan>& spans);

// out (BT..,OC) = GELU-tanh(inp @ weight^T + bias), pre_gelu (same shape) = the pre-activation (saved for
// backward). bf16 on CUDA: one cuBLASLt call (GELU_AUX_BIAS epilogue); otherwise matmul then gelu.
void matmul_forward_gelu(Tensor out, Tensor pre_gelu, Tensor inp, Tensor weight, Tensor bias);
// matmul_backward whose dinp continues through the GELU that produced inp: dinp = (dout @ weight) *
// GELU'(gelu_pre) (=, required); dweight, dbias += as matmul_backward. bf16 on CUDA: DGELU epilogue.
void matmul_backward_gelu(Tensor dinp, Tensor gelu_pre, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp,
                          Tensor weight);

// cpu/attention.h: causal attention with grouped-query heads (Hugging Face's repeat_kv): query head h reads
// key/value head h / (NH / KV); KV == NH is multi-head attention (GPT-2), no head mapping.
// out (B,T,C) with C = NH*HS, lse (B,NH,T); qkv (B,T,C3) with C3 = C + 2*KV*HS: q at channel 0 (NH*HS wide),
// k at C and v at C + KV*HS (KV*HS wide each). C divisible by NH, NH by KV.
// positions (B,T) i32 (optional; packed examples, Hugging Face's position_ids): each row of the batch holds
// examples one after another and positions restart at 0 at each one; query t of row b attends keys
// t - positions[b,t] .. t (causal inside its own example), so no example sees another. Contract:
// positions[b,0] = 0, and positions[b,t] is 0 or positions[b,t-1] + 1. The CPU checks it (InternalError naming
// the element); CUDA does not read device values back, so callers validate on the host before copying (the
// CUDA kernels choose which key/query tiles to visit from it). Empty: plain causal attention, the same bits
// as a row that is one example. bf16 with positions runs our flash kernels (cuDNN's graph has no per-row
// bounds), else the simple kernels.
// window (> 0; Mistral's sliding_window): query t attends only keys j with t - window < j <= t as well
// (transformers' rule); 0 = none; a window >= T hides nothing (plain causal attention, the same bits). CUDA: the
// flash kernels (bf16; cuDNN's graph has no window) and the simple kernels visit only the key tiles inside the
// window, O(T * window) work.
void attention_forward(Tensor out, Tensor lse, Tensor qkv, int NH, int KV, Tensor positions = {}, int window = 0);
// dqkv (B,T,C3) =, dk/dv summed over the NH/KV query heads sharing each kv head; dout (B,T,C); qkv, out, lse
// from the forward. dqkv_colsum (C3, f32, optional) += the column sums of dqkv: the bias gradient of the qkv
// projection (fused into the CUDA flash kernels). positions as in the forward (the same tensor).
void attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse, int NH, int KV,
                        Tensor dqkv_colsum = {}, Tensor positions = {}, int window = 0);

// Inference with a KV cache (cpu/attention.h): out (B,Tq,C) for query positions t0..t0+Tq-1 of
// qkv (B,Tmax,C3), t0 + Tq <= Tmax.
void attention_forward_cached(Tensor out, Tensor qkv, int t0, int NH, int KV, int window = 0);

// cpu/rmsnorm.h (Hugging Face's LlamaRMSNorm: fp32 statistics, the normalised row times weight). out (B,T,C),
// rstd (B,T) f32 = 1/sqrt(mean(inp^2) + eps); inp (B,T,C); weight (C); eps > 0 (model.norm_eps).
void rmsnorm_forward(Tensor out, Tensor rstd, Tensor inp, Tensor weight, float eps);
// dinp (B,T,C) += (residual stream); dweight (C, f32) +=; dout, inp (B,T,C); weight (C); rstd from the forward.
void rmsnorm_backward(Tensor dinp, Tensor dweight, Tensor dout, Tensor inp, Tensor weight, Tensor rstd);
// cpu/head_rmsnorm.h (Qwen3's q_norm / k_norm): each query and key head of a fused qkv row (B,T,C3),
// C3 = (NH + 2*KV) * HS, RMS-normalised over its HS channels times q_weight or k_weight (HS); the value heads
// copied. rstd (B,T,NH+KV) f32. out must not alias inp. f32, or bf16 on CUDA (HS even, <= 256 there).
void head_rmsnorm_forward(Tensor out, Tensor rstd, Tensor inp, Tensor q_weight, Tensor k_weight, int NH, int KV,
                          float eps);
// dinp (B,T,C3) = (may alias dout); dq_weight, dk_weight (HS, f32) +=.
void head_rmsnorm_backward(Tensor dinp, Tensor dq_weight, Tensor dk_weight, Tensor dout, Tensor inp, Tensor q_weight,
                           Tensor k_weight, Tensor rstd, int NH, int KV);
// residual_out (B,T,C) = inp1 + inp2, then rmsnorm_forward(out, rstd, residual_out, weight, eps) in the same
// pass (bf16: the RMSNorm reads the rounded residual_out, as the two ops in turn would). residual_out may
// alias inp1 or inp2; out aliases none of them.
void residual_rmsnorm_forward(Tensor residual_out, Tensor out, Tensor rstd, Tensor inp1, Tensor inp2, Tensor weight,
                              float eps);

// cpu/swiglu.h. out (...,F) = silu(gate) * up with inp (...,2F) holding gate in columns [0,F) and up in
// [F,2F) (the fused gate_up projection's output); out does not alias inp.
void swiglu_forward(Tensor out, Tensor inp);
// dinp (...,2F) = (d gate, d up); dout (...,F); inp (...,2F) from the forward. dinp may alias inp.
void swiglu_backward(Tensor dinp, Tensor dout, Tensor inp);

// cpu/rope.h: rotary position embedding, Hugging Face's rotate-half convention (apply_rotary_pos_emb), in
// place on the NH q heads and KV k heads of qkv (B,T,(NH+2KV)*HS) (v untouched). rope (Tmax,HS) f32: row p
// holds cos(a_0..a_{HS/2-1}) then sin(a_0..a_{HS/2-1}) of position p (the model computes it); row t of qkv
// uses table row pos0 + t (pos0 > 0 for KV-cache decoding), pos0 + T <= Tmax. HS even.
// positions (B,T) i32 (optional, attention_forward's packed-example contract, T <= Tmax): row (b,t) uses table
// row positions[b,t] instead, and pos0 must be 0.
void rope_forward(Tensor qkv, Tensor rope, int NH, int KV, int pos0 = 0, Tensor positions = {});
// In place: the transpose (rotation by -a) on the dq and dk heads of dqkv (B,T,(NH+2KV)*HS), row t with table
// row t (or positions[b,t], as in the forward); dv untouched.
void rope_backward(Tensor dqkv, Tensor rope, int NH, int KV, Tensor positions = {});

// cpu/gelu.h. Same-shape tensors; out may alias inp, dinp may alias dout. dinp =.
void gelu_forward(Tensor out, Tensor inp);
void gelu_backward(Tensor dinp, Tensor inp, Tensor dout);

// cpu/residual.h. Same-shape tensors. Backward accumulates: dinp1 +=, dinp2 += (residual stream).
void residual_forward(Tensor out, Tensor inp1, Tensor inp2);
void residual_backward(Tensor dinp1, Tensor dinp2, Tensor dout);

// cpu/dropout.h. Same-shape tensors; p in [0, 1); the backward takes the forward's (p, seed). dinp =.
void dropout_forward(Tensor out, Tensor inp, float p, uint64_t seed);
void dropout_backward(Tensor dinp, Tensor dout, float p, uint64_t seed);

// cpu/classifier.h. losses (B,T); logits (B,T,Vp); targets (B,T) in [0,V) or < 0 (ignored); V <= Vp.
void classifier_forward(Tensor losses, Tensor logits, Tensor targets, int V);
// As above, and overwrites logits with dlogits = (softmax - onehot) * dloss_scale (0 in padding).
void classifier_forward_backward(Tensor losses, Tensor logits, Tensor targets, float dloss_scale, int V);
// probs (B,T,Vp) = softmax over the first V columns; probs may alias logits.
void softmax_forward(Tensor probs, Tensor logits, int V);
// Evaluation after classifier_forward (T = 1): preds (B) i32 = argmax of logits[:V] per row (the first maximum);
// loss_sum (2) f32 = the sum of losses (B) over rows whose target (B) is >= 0, as a double's fp32 hi + lo.
void classifier_predict(Tensor preds, Tensor loss_sum, Tensor logits, Tensor losses, Tensor targets, int V);

// Image ops (ops_conv.cpp) on channels-last (NHWC) activations: B batch, H/W height/width, C channels,
// OH/OW output height/width, OC output channels. torch's NCHW tensors are ours permuted by (0, 3, 1, 2).
// cpu/conv2d.h: im2col + GEMM. out (B,OH,OW,OC) with OH = conv_out_extent(H, g.kh, g.stride, g.pad) (likewise
// OW); cols (B*OH*OW, KH*KW*C) = the im2col of inp (written; the backward reuses it, so the model keeps it
// between the two like a saved activation; on the CPU a Winograd layer, cpu/conv2d_winograd.h, keeps its
// transformed input tiles there instead);
// inp (B,H,W,C); weight (OC,KH,KW,C), i.e. torch's Conv2d weight (OC,C,KH,KW) permuted by (0, 2, 3, 1), so
// out = cols @ weight^T + bias; bias (OC) or empty.
// tf32 (here and below): on CUDA with fp32 storage, the products on TF32 tensor cores (trainer.conv_tf32);
// the CPU computes in fp32 either way.
void conv2d_forward(Tensor out, Tensor cols, Tensor inp, Tensor weight, Tensor bias, const Conv2dGeom& g,
                    bool tf32 = false);
// dinp (B,H,W,C) = (may be empty: the first layer); dweight (OC,KH,KW,C) += (f32); dbias (OC) += (f32, may be
// empty); dout (B,OH,OW,OC); cols as the forward left it (overwritten: scratch after this call when dinp is
// present); inp, weight, g as in the forward.
void conv2d_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor cols, Tensor inp, Tensor weight,
                     const Conv2dGeom& g, bool tf32 = false);
// cols = the im2col of inp, what CUDA's conv2d_forward leaves there: for the backward after
// conv_pool_relu_forward's fused kernel, which leaves none (below; CUDA's conv2d_backward reads im2col).
void conv2d_im2col(Tensor cols, Tensor inp, const Conv2dGeom& g);
// A CNN block's forward: pooled (B,OH/2,OW/2,OC) = relu_forward(maxpool2d_forward(conv2d_forward(inp))),
// with argmax as maxpool2d_forward's. On CUDA with fp32 storage, when cuda/conv_pool.h's fused kernel takes
// the shape (3x3, pad 1, stride 1, OC % 32 == 0), one kernel writes pooled (and argmax when keep_argmax)
// and neither conv_out nor cols: returns false, and a backward must call conv2d_im2col first. Otherwise
// the three ops run in turn through conv_out and cols (argmax always written; cols then holds what
// conv2d_forward leaves for conv2d_backward) and it returns true. Without
// tf32 the fused kernel keeps fp32-level accuracy (3xTF32, cuda/conv_pool.h).
// conv_out (B,OH,OW,OC) and cols as conv2d_forward's.
bool conv_pool_relu_forward(Tensor pooled, Tensor argmax, Tensor conv_out, Tensor cols, Tensor inp, Tensor weight,
                            Tensor bias, const Conv2dGeom& g, bool keep_argmax, bool tf32 = false);
// cpu/maxpool.h: torch.nn.MaxPool2d(k, stride), no padding, floor mode. out (B,OH,OW,C) with
// OH = floor((H - k) / stride) + 1; argmax (B,OH,OW,C) i32 = the flat index ih*W + iw of each max in its image;
// inp (B,H,W,C).
void maxpool2d_forward(Tensor out, Tensor argmax, Tensor inp, int k = 2, int stride = 2);
// dinp (B,H,W,C) =: dout (B,OH,OW,C) scattered to the argmax positions, 0 elsewhere.
void maxpool2d_backward(Tensor dinp, Tensor dout, Tensor argmax, int k = 2, int stride = 2);
// cpu/pixels.h: out (any shape) f32 = table[pixels] element-wise; pixels i32 in 0..255, the same element count
// (on the device of out; the caller validates the range); table: 256 floats in host memory.
void normalize_pixels(Tensor out, Tensor pixels, const float* table);
// cpu/relu.h. Same-shape tensors of any rank. out may alias inp; dinp (=) may alias dout; the backward reads
// the forward's output (dinp = dout where out > 0).
void relu_forward(Tensor out, Tensor inp);
void relu_backward(Tensor dinp, Tensor dout, Tensor out);
// cpu/image_gather.h: out (B,H,W,C) f32 = lut[byte] of the images refs (B,4) i32 name in `table` (each an
// ImageRef: index, crop dy/dx, flip; kernels/image_refs.h), blank rows and pixels outside a crop lut[0].
// out, refs and table.pixels on one device; lut: 256 floats on the host. Indices must be < table.images
// (the caller checks them: the device kernel reads what it is given).
void gather_images(Tensor out, const ImageTable& table, Tensor refs, const float* lut);
// `bytes` from host memory to dst on `device` (a plain copy on the CPU); synchronous.
void upload_bytes(Device device, void* dst, const void* src, size_t bytes);

// cpu/adamw.h. params, m, v, grads: f32, same element count (any shape). params_lp (optional): the
// bf16 compute copy of params, rewritten from the updated values (in the same pass on CUDA; adamw_update
// writes it on CUDA only, adamw_update_runs and sgd_update_runs on every device).
void adamw_update(Tensor params, Tensor m, Tensor v, Tensor grads, const AdamWParams& hp, Tensor params_lp = {});
// The same over runs of one flat buffer (sorted, disjoint [begin, end) element ranges inside it): a run with
// decay false uses weight decay 0. Elements outside every run are untouched. One launch on CUDA (per 128
// runs) instead of one per run.
void adamw_update_runs(Tensor params, Tensor m, Tensor v, Tensor grads, const AdamWParams& hp,
                       const std::vector<AdamWRun>& runs, Tensor params_lp = {});

// cpu/sgd.h (torch.optim.SGD). params, grads (and buf, the momentum buffer: present exactly when
// hp.momentum != 0): f32, same element count; the runs as adamw_update_runs takes them (decay false: weight
// decay 0; elements outside every run untouched). params_lp (optional, every device): the bf16 compute copy.
void sgd_update_runs(Tensor params, Tensor buf, Tensor grads, const SgdParams& hp, const std::vector<AdamWRun>& runs,
                     Tensor params_lp = {});

// cpu/reduce.h. Sum of squares in fp64 (global grad norm = sqrt of the sum over tensors); scale.
double sum_squares(Tensor x);
void scale_inplace(Tensor x, float s);

// fp32 FMA FLOP/s of this process's CPU threads, measured once (cpu/peak_flops.h): the MFU peak.
double cpu_peak_flops();

// Device plumbing. device_count: usable devices of that kind (CPU: 1; CUDA: 0 without a driver/GPU).
int device_count(Device device);
// dst = src (same dtype and element count; any pair of devices; synchronous).
void copy(Tensor dst, Tensor src);
// dst = src on one device, f32 -> bf16 (round to nearest even) or bf16 -> f32 (same dtypes: copy).
void convert(Tensor dst, Tensor src);
// Free and total bytes of the device's memory (zeros for the CPU).
struct DeviceMemoryInfo {
    size_t free = 0, total = 0;
};
DeviceMemoryInfo device_memory_info(Device device);
// Every byte of t = 0 (ordered with the device's kernels).
void zero(Tensor t);
// Waits for the device's queued kernels (no-op on the CPU); DeviceError on an asynchronous fault.
void synchronize(Device device);

// The process's CPU thread count from run.threads (0: OMP_NUM_THREADS, else the affinity mask and cgroup CPU
// quota; cpu/threads.h). Returns the count in effect.
int set_cpu_threads(int configured);

// While alive, the calling thread's CPU ops run on the threads an op of `flops` work pays for (cpu/threads.h:
// one per ~8 MFLOP, up to the count in effect), then the count in effect comes back; GEMMs inside still pick
// their own count up to it. For a stretch of small ops, such as a decode step's layers (models/kv_decoder.cpp):
// their element-wise kernels would otherwise fork the whole team for one row each, and
// on shared cores every fork waits for a descheduled thread. No effect on other devices' kernels.
class CpuThreadsForWork {
public:
    explicit CpuThreadsForWork(double flops);
    ~CpuThreadsForWork();
    CpuThreadsForWork(const CpuThreadsForWork&) = delete;
    CpuThreadsForWork& operator=(const CpuThreadsForWork&) = delete;
    int threads() const { return threads_; }

private:
    int saved_ = 1, threads_ = 1;
};

// The CPU linear layers' GEMM precision (cpu/matmul.h): bf16 operands with fp32 accumulation (trainer.precision:
// bf16) or fp32; tensors stay fp32. Returns how bf16 runs ("oneDNN brg:avx512_core_bf16", or emulated and why),
// "fp32" for kF32, for the log.
std::string set_cpu_gemm_precision(DType dtype);

// Name of the CPU GEMM backend in use ("onednn" / "openblas"), for `llmtrain version` and logs.
const char* gemm_backend_name();

}  // namespace llmt::kernels
