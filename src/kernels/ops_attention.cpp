// Validation and device dispatch of the attention and RoPE ops of kernels/ops.h (moved from ops.cpp).
#include "kernels/ops.h"

#include <array>
#include <cstdint>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/rope.h"
#include "kernels/ops_check.h"

namespace llmt::kernels {

using namespace ops_check;  // NOLINT(google-build-using-namespace): the shared helpers of every ops*.cpp

namespace {
// The attention ops' head checks: NH, KV > 0, NH % KV == 0 and C (out's width) % NH == 0. Returns HS.
int64_t check_heads(const char* op, int64_t C, int NH, int KV) {
    LLMT_INTERNAL_CHECK(NH > 0 && KV > 0 && NH % KV == 0, "{}: NH = {} query heads must be a positive multiple of "
                        "KV = {} key/value heads", op, NH, KV);
    LLMT_INTERNAL_CHECK(C % NH == 0, "{}: C = {} is not divisible by NH = {}", op, C, NH);
    return C / NH;
}

// Packed examples' positions (B,T) i32 (attention and RoPE; the caller checked the device). On the CPU the
// values too: each row starts at 0 and every position is 0 (an example starts) or the previous one + 1, so
// 0 <= positions[b,t] <= t. Device values are not read back (ops.h: callers validate them on the host).
// Returns the data pointer, or null when positions is empty.
const int32_t* check_positions(const char* op, const Tensor& positions, int64_t B, int64_t T) {
    if (positions.empty()) return nullptr;
    check_shape(op, "positions", positions, {B, T});
    check_dtype(op, "positions", positions, DType::kI32);
    const int32_t* p = ids(positions);
    if (positions.device != Device::kCpu) return p;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            const int32_t v = p[b * T + t], prev = t > 0 ? p[b * T + t - 1] : -1;
            LLMT_INTERNAL_CHECK(v == 0 || v == prev + 1, "{}: positions[{}, {}] = {}, expected 0 (an example "
                                "starts) or positions[{}, {}] + 1 = {} (packed examples count up from 0)", op, b, t,
                                v, b, t - 1, prev + 1);
        }
    return p;
}
}  // namespace

namespace {
// A sliding window of `window` keys (0: none) over sequences of T: whether it hides any key (a window >= T runs
// as plain causal attention, the same bits).
bool windowed(const char* op, int window, int64_t T) {
    LLMT_INTERNAL_CHECK(window >= 0, "{}: window {} < 0", op, window);
    return window > 0 && window < T;
}
}  // namespace

void attention_forward(Tensor out, Tensor lse, Tensor qkv, int NH, int KV, Tensor positions, int window) {
    const char* op = "attention_forward";
    check_device(op, {{"out", out}, {"lse", lse}, {"qkv", qkv}, {"positions", positions}});
    check_shape(op, "out", out, {-1, -1, -1});
    const int64_t B = out.dim(0), T = out.dim(1), C = out.dim(2);
    const int64_t C3 = C + 2 * KV * check_heads(op, C, NH, KV);
    check_shape(op, "lse", lse, {B, NH, T});
    check_shape(op, "qkv", qkv, {B, T, C3});
    check_f32(op, {{"lse", lse}});
    const DType dt = check_act(op, qkv.device, {{"out", out}, {"qkv", qkv}});
    const int32_t* pos = check_positions(op, positions, B, T);
    const int win = windowed(op, window, T) ? window : 0;
#if LLMT_CUDA_ENABLED && LLMT_CUDNN_ATTENTION
    // cuDNN's graph has no per-row key bounds: packed examples and sliding windows go to the flash kernels.
    if (qkv.device == Device::kCuda && dt == DType::kBF16 && !pos && !win && use_cudnn_attention() &&
        cuda::cudnn_attention_forward(p<__nv_bfloat16>(out), f(lse), p<__nv_bfloat16>(qkv), as_int(op, "B", B),
                                      as_int(op, "T", T), as_int(op, "C", C), NH, KV, cuda::stream()))
        return;
#endif
#if LLMT_CUDA_ENABLED && LLMT_FLASH_ATTENTION
    if (qkv.device == Device::kCuda && dt == DType::kBF16 && use_flash_attention(C / NH))
        return cuda::flash_attention_forward(p<__nv_bfloat16>(out), f(lse), p<__nv_bfloat16>(qkv), as_int(op, "B", B),
                                             as_int(op, "T", T), as_int(op, "C", C), NH, KV, cuda::stream(), pos,
                                             win);
#endif
    LLMT_ON_CUDA_T(qkv.device, dt, cuda::attention_forward(p<E>(out), f(lse), p<E>(qkv), as_int(op, "B", B),
                                                            as_int(op, "T", T), as_int(op, "C", C), NH, KV,
                                                            cuda::stream(), pos, win));
    cpu::attention_forward(f(out), f(lse), f(qkv), as_int(op, "B", B), as_int(op, "T", T),
                           as_int(op, "C", C), NH, KV, pos, win);
}

void attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse, int NH, int KV,
                        Tensor dqkv_colsum, Tensor positions, int window) {
    const char* op = "attention_backward";
    check_device(op, {{"dqkv", dqkv}, {"dout", dout}, {"qkv", qkv}, {"out", out}, {"lse", lse},
                      {"dqkv_colsum", dqkv_colsum}, {"positions", positions}});
    check_shape(op, "out", out, {-1, -1, -1});
    const int64_t B = out.dim(0), T = out.dim(1), C = out.dim(2);
    const int64_t C3 = C + 2 * KV * check_heads(op, C, NH, KV);
    check_shape(op, "dout", dout, {B, T, C});
    check_shape(op, "lse", lse, {B, NH, T});
    check_shape(op, "qkv", qkv, {B, T, C3});
    check_shape(op, "dqkv", dqkv, {B, T, C3});
    if (!dqkv_colsum.empty()) check_shape(op, "dqkv_colsum", dqkv_colsum, {C3});
    check_f32(op, {{"lse", lse}, {"dqkv_colsum", dqkv_colsum}});
    const DType dt = check_act(op, qkv.device, {{"dqkv", dqkv}, {"dout", dout}, {"qkv", qkv}, {"out", out}});
    float* colsum = dqkv_colsum.empty() ? nullptr : f(dqkv_colsum);
    const int32_t* pos = check_positions(op, positions, B, T);
    const int win = windowed(op, window, T) ? window : 0;
#if LLMT_CUDA_ENABLED
#if LLMT_CUDNN_ATTENTION
    if (qkv.device == Device::kCuda && dt == DType::kBF16 && !pos && !win && use_cudnn_attention() &&
        cuda::cudnn_attention_backward(p<__nv_bfloat16>(dqkv), p<__nv_bfloat16>(dout), p<__nv_bfloat16>(qkv),
                                       p<__nv_bfloat16>(out), f(lse), as_int(op, "B", B), as_int(op, "T", T),
                                       as_int(op, "C", C), NH, KV, cuda::stream())) {
        if (colsum)  // cuDNN has no column sums: the separate pass over dqkv
            cuda::add_column_sums(colsum, p<__nv_bfloat16>(dqkv), as_int(op, "rows", B * T), as_int(op, "C3", C3),
                                  cuda::stream());
        return;
    }
#endif
#if LLMT_FLASH_ATTENTION
    if (qkv.device == Device::kCuda && dt == DType::kBF16 && use_flash_attention(C / NH) &&
        (!colsum || knob_on(Knob::kFuseAttnColsum)))
        return cuda::flash_attention_backward(p<__nv_bfloat16>(dqkv), p<__nv_bfloat16>(dout), p<__nv_bfloat16>(qkv),
                                              p<__nv_bfloat16>(out), f(lse), as_int(op, "B", B), as_int(op, "T", T),
                                              as_int(op, "C", C), NH, KV, cuda::stream(), colsum, pos, win);
#endif
    if (qkv.device == Device::kCuda && colsum) {  // the unfused path: backward, then the column sums
        attention_backward(dqkv, dout, qkv, out, lse, NH, KV, {}, positions, window);
        return add_column_sums_cuda(op, colsum, dt, dqkv, B * T, "C3", C3);
    }
#endif
    LLMT_ON_CUDA_T(qkv.device, dt, cuda::attention_backward(p<E>(dqkv), p<E>(dout), p<E>(qkv), p<E>(out), f(lse),
                                                             as_int(op, "B", B), as_int(op, "T", T),
                                                             as_int(op, "C", C), NH, KV, cuda::stream(), pos,
                                                             win));
    cpu::attention_backward(f(dqkv), f(dout), f(qkv), f(out), f(lse), as_int(op, "B", B),
                            as_int(op, "T", T), as_int(op, "C", C), NH, KV, pos, win);
    if (colsum) add_column_sums_cpu(colsum, f(dqkv), B * T, C3);
}

void attention_forward_cached(Tensor out, Tensor qkv, int t0, int NH, int KV, int window) {
    const char* op = "attention_forward_cached";
    check_device(op, {{"out", out}, {"qkv", qkv}});
    check_shape(op, "out", out, {-1, -1, -1});
    const int64_t B = out.dim(0), Tq = out.dim(1), C = out.dim(2);
    const int64_t C3 = C + 2 * KV * check_heads(op, C, NH, KV);
    check_shape(op, "qkv", qkv, {B, -1, C3});
    const int64_t Tmax = qkv.dim(1);
    LLMT_INTERNAL_CHECK(t0 >= 0 && t0 + Tq <= Tmax, "{}: positions {}..{} exceed the cache of {} positions", op, t0,
               t0 + Tq - 1, Tmax);
    check_f32(op, {{"out", out}, {"qkv", qkv}});
    const int win = windowed(op, window, t0 + Tq) ? window : 0;
    LLMT_ON_CUDA(qkv.device, attention_forward_cached(f(out), f(qkv), as_int(op, "B", B), t0, as_int(op, "Tq", Tq),
                                                      as_int(op, "Tmax", Tmax), as_int(op, "C", C), NH, KV,
                                                      cuda::stream(), win));
    cpu::attention_forward_cached(f(out), f(qkv), as_int(op, "B", B), t0, as_int(op, "Tq", Tq),
                                  as_int(op, "Tmax", Tmax), as_int(op, "C", C), NH, KV, win);
}

namespace {
// rope's checks: qkv (B,T,(NH+2KV)*HS) with HS = rope's width (even), rows pos0..pos0+T-1 in the table
// (with positions, whose values are <= t < T, pos0 is 0). Returns {B, T, HS}.
std::array<int, 3> check_rope(const char* op, const Tensor& qkv, const char* qkv_name, const Tensor& rope, int NH,
                              int KV, int pos0, const Tensor& positions) {
    check_device(op, {{qkv_name, qkv}, {"rope", rope}, {"positions", positions}});
    check_shape(op, "rope", rope, {-1, -1});
    check_f32(op, {{"rope", rope}});
    const int64_t Tmax = rope.dim(0), HS = rope.dim(1);
    LLMT_INTERNAL_CHECK(HS > 0 && HS % 2 == 0, "{}: the table's head size {} must be even", op, HS);
    LLMT_INTERNAL_CHECK(NH > 0 && KV > 0 && NH % KV == 0, "{}: NH = {} query heads must be a positive multiple of "
                        "KV = {} key/value heads", op, NH, KV);
    check_shape(op, qkv_name, qkv, {-1, -1, (NH + 2 * static_cast<int64_t>(KV)) * HS});
    const int64_t B = qkv.dim(0), T = qkv.dim(1);
    LLMT_INTERNAL_CHECK(pos0 >= 0 && pos0 + T <= Tmax, "{}: positions {}..{} exceed the table's {} rows", op, pos0,
                        pos0 + T - 1, Tmax);
    LLMT_INTERNAL_CHECK(positions.empty() || pos0 == 0, "{}: pos0 = {} with positions; expected 0 (the positions "
                        "tensor gives every row's table row)", op, pos0);
    check_positions(op, positions, B, T);
    return {as_int(op, "B", B), as_int(op, "T", T), as_int(op, "HS", HS)};
}
}  // namespace

void rope_forward(Tensor qkv, Tensor rope, int NH, int KV, int pos0, Tensor positions) {
    const char* op = "rope_forward";
    const auto [B, T, HS] = check_rope(op, qkv, "qkv", rope, NH, KV, pos0, positions);
    const DType dt = check_act(op, qkv.device, {{"qkv", qkv}});
    const int32_t* pos = positions.empty() ? nullptr : ids(positions);
    LLMT_ON_CUDA_T(qkv.device, dt,
                   cuda::rope_forward(p<E>(qkv), f(rope), B, T, NH, KV, HS, pos0, cuda::stream(), pos));
    cpu::rope_forward(f(qkv), f(rope), B, T, NH, KV, HS, pos0, pos);
}

void rope_backward(Tensor dqkv, Tensor rope, int NH, int KV, Tensor positions) {
    const char* op = "rope_backward";
    const auto [B, T, HS] = check_rope(op, dqkv, "dqkv", rope, NH, KV, 0, positions);
    const DType dt = check_act(op, dqkv.device, {{"dqkv", dqkv}});
    const int32_t* pos = positions.empty() ? nullptr : ids(positions);
    LLMT_ON_CUDA_T(dqkv.device, dt, cuda::rope_backward(p<E>(dqkv), f(rope), B, T, NH, KV, HS, cuda::stream(), pos));
    cpu::rope_backward(f(dqkv), f(rope), B, T, NH, KV, HS, pos);
}

}  // namespace llmt::kernels
