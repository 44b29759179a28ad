// Validation and device dispatch for kernels/ops.h (the attention and RoPE ops: ops_attention.cpp; the shared
// checks: ops_check.h).
#include "kernels/ops.h"

#include <omp.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

#include "core/bf16.h"
#include "core/build_info.h"
#include "core/check.h"
#include "core/knobs.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/classifier.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/encoder.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/peak_flops.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/threads.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/residual.h"
#include "kernels/cpu/head_rmsnorm.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/swiglu.h"

#include "kernels/ops_check.h"

namespace llmt::kernels {
namespace {

#if LLMT_CUDA_ENABLED
// Arena buffers on Device::kCuda allocate through cudaMalloc (core/device_memory.h). Registering only
// stores function pointers; no CUDA call happens before the first allocation.
const bool kCudaMemoryRegistered = (cuda::register_memory(), true);
#endif

}  // namespace

using namespace ops_check;  // NOLINT(google-build-using-namespace): the shared helpers of every ops*.cpp

void encoder_forward(Tensor out, Tensor inp, Tensor wte, Tensor wpe) {
    const char* op = "encoder_forward";
    check_device(op, {{"out", out}, {"inp", inp}, {"wte", wte}, {"wpe", wpe}});
    check_shape(op, "out", out, {-1, -1, -1});
    const int64_t B = out.dim(0), T = out.dim(1), C = out.dim(2);
    check_shape(op, "inp", inp, {B, T});
    check_shape(op, "wte", wte, {-1, C});
    if (!wpe.empty()) {
        check_shape(op, "wpe", wpe, {-1, C});
        LLMT_INTERNAL_CHECK(wpe.dim(0) >= T, "{}: wpe has {} positions, sequence length is {}", op, wpe.dim(0), T);
    }
    const DType dt = check_act(op, out.device, {{"out", out}, {"wte", wte}, {"wpe", wpe}});
    check_dtype(op, "inp", inp, DType::kI32);
    LLMT_ON_CUDA_T(out.device, dt, cuda::encoder_forward(p<E>(out), ids(inp), p<E>(wte), p<E>(wpe), as_int(op, "B", B),
                                                          as_int(op, "T", T), as_int(op, "C", C), cuda::stream()));
    const int32_t* p = ids(inp);
    for (int64_t i = 0; i < B * T; i++)
        LLMT_INTERNAL_CHECK(p[i] >= 0 && p[i] < wte.dim(0), "{}: token id {} at position {} is outside [0, {})", op,
                   p[i], i, wte.dim(0));
    cpu::encoder_forward(f(out), p, f(wte), f(wpe), as_int(op, "B", B), as_int(op, "T", T),
                         as_int(op, "C", C));
}

void encoder_backward(Tensor dwte, Tensor dwpe, Tensor dout, Tensor inp) {
    const char* op = "encoder_backward";
    check_device(op, {{"dwte", dwte}, {"dwpe", dwpe}, {"dout", dout}, {"inp", inp}});
    check_shape(op, "dout", dout, {-1, -1, -1});
    const int64_t B = dout.dim(0), T = dout.dim(1), C = dout.dim(2);
    check_shape(op, "inp", inp, {B, T});
    check_shape(op, "dwte", dwte, {-1, C});
    if (!dwpe.empty()) {
        check_shape(op, "dwpe", dwpe, {-1, C});
        LLMT_INTERNAL_CHECK(dwpe.dim(0) >= T, "{}: dwpe has {} positions, sequence length is {}", op, dwpe.dim(0), T);
    }
    check_f32(op, {{"dwte", dwte}});
    if (!dwpe.empty()) check_f32(op, {{"dwpe", dwpe}});
    const DType dt = check_act(op, dout.device, {{"dout", dout}});
    check_dtype(op, "inp", inp, DType::kI32);
    LLMT_ON_CUDA_T(dout.device, dt, cuda::encoder_backward(f(dwte), f(dwpe), p<E>(dout), ids(inp), as_int(op, "B", B),
                                                            as_int(op, "T", T), as_int(op, "C", C), cuda::stream()));
    const int32_t* p = ids(inp);
    for (int64_t i = 0; i < B * T; i++)
        LLMT_INTERNAL_CHECK(p[i] >= 0 && p[i] < dwte.dim(0), "{}: token id {} at position {} is outside [0, {})",
                   op, p[i], i, dwte.dim(0));
    cpu::encoder_backward(f(dwte), f(dwpe), f(dout), p, as_int(op, "B", B), as_int(op, "T", T),
                          as_int(op, "C", C));
}

void layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight, Tensor bias, float eps) {
    const char* op = "layernorm_forward";
    LLMT_INTERNAL_CHECK(eps > 0.f && std::isfinite(eps), "{}: eps must be a positive finite number, found {}", op,
                        eps);
    check_device(op, {{"out", out}, {"mean", mean}, {"rstd", rstd}, {"inp", inp}, {"weight", weight},
                      {"bias", bias}});
    check_shape(op, "inp", inp, {-1, -1, -1});
    const int64_t B = inp.dim(0), T = inp.dim(1), C = inp.dim(2);
    check_shape(op, "out", out, {B, T, C});
    check_shape(op, "mean", mean, {B, T});
    check_shape(op, "rstd", rstd, {B, T});
    check_shape(op, "weight", weight, {C});
    check_shape(op, "bias", bias, {C});
    check_f32(op, {{"mean", mean}, {"rstd", rstd}});
    const DType dt = check_act(op, inp.device, {{"out", out}, {"inp", inp}, {"weight", weight}, {"bias", bias}});
    LLMT_ON_CUDA_T(inp.device, dt, cuda::layernorm_forward(p<E>(out), f(mean), f(rstd), p<E>(inp), p<E>(weight),
                                                            p<E>(bias), eps, as_int(op, "B", B), as_int(op, "T", T),
                                                            as_int(op, "C", C), cuda::stream()));
    cpu::layernorm_forward(f(out), f(mean), f(rstd), f(inp), f(weight), f(bias), eps, as_int(op, "B", B),
                           as_int(op, "T", T), as_int(op, "C", C));
}

void layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight,
                        Tensor mean, Tensor rstd, Tensor dinp_colsum) {
    const char* op = "layernorm_backward";
    check_device(op, {{"dinp", dinp}, {"dweight", dweight}, {"dbias", dbias}, {"dout", dout}, {"inp", inp},
                      {"weight", weight}, {"mean", mean}, {"rstd", rstd}, {"dinp_colsum", dinp_colsum}});
    check_shape(op, "inp", inp, {-1, -1, -1});
    const int64_t B = inp.dim(0), T = inp.dim(1), C = inp.dim(2);
    check_shape(op, "dinp", dinp, {B, T, C});
    check_shape(op, "dout", dout, {B, T, C});
    check_shape(op, "dweight", dweight, {C});
    check_shape(op, "dbias", dbias, {C});
    check_shape(op, "weight", weight, {C});
    check_shape(op, "mean", mean, {B, T});
    check_shape(op, "rstd", rstd, {B, T});
    if (!dinp_colsum.empty()) check_shape(op, "dinp_colsum", dinp_colsum, {C});
    check_f32(op, {{"dweight", dweight}, {"dbias", dbias}, {"mean", mean}, {"rstd", rstd},
                   {"dinp_colsum", dinp_colsum}});
    const DType dt =
        check_act(op, inp.device, {{"dinp", dinp}, {"dout", dout}, {"inp", inp}, {"weight", weight}});
    float* colsum = dinp_colsum.empty() ? nullptr : f(dinp_colsum);
#if LLMT_CUDA_ENABLED
    if (inp.device == Device::kCuda && colsum && !knob_on(Knob::kFuseLnColsum)) {
        layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd);
        return add_column_sums_cuda(op, colsum, dt, dinp, B * T, "C", C);
    }
#endif
    LLMT_ON_CUDA_T(inp.device, dt, cuda::layernorm_backward(p<E>(dinp), f(dweight), f(dbias), p<E>(dout), p<E>(inp),
                                                             p<E>(weight), f(mean), f(rstd), as_int(op, "B", B),
                                                             as_int(op, "T", T), as_int(op, "C", C), cuda::stream(),
                                                             colsum));
    cpu::layernorm_backward(f(dinp), f(dweight), f(dbias), f(dout), f(inp), f(weight), f(mean), f(rstd),
                            as_int(op, "B", B), as_int(op, "T", T), as_int(op, "C", C));
    if (colsum) add_column_sums_cpu(colsum, f(dinp), B * T, C);
}

namespace {
// matmul_forward's checks; returns the storage type.
DType check_matmul_forward(const char* op, const Tensor& out, const Tensor& inp, const Tensor& weight,
                           const Tensor& bias) {
    check_device(op, {{"out", out}, {"inp", inp}, {"weight", weight}, {"bias", bias}});
    check_shape(op, "weight", weight, {-1, -1});
    const int64_t OC = weight.dim(0), C = weight.dim(1);
    check_present(op, "inp", inp);
    check_present(op, "out", out);
    LLMT_INTERNAL_CHECK(inp.ndim >= 1 && inp.dim(-1) == C, "{}: inp must end in C = {}, got {}", op, C,
               inp.describe());
    LLMT_INTERNAL_CHECK(out.ndim == inp.ndim && out.dim(-1) == OC && out.numel() / OC == inp.numel() / C,
               "{}: out must be inp's leading dims x OC = {}, got {} for inp {}", op, OC, out.describe(),
               inp.describe());
    if (!bias.empty()) check_shape(op, "bias", bias, {OC});
    return check_act(op, inp.device, {{"out", out}, {"inp", inp}, {"weight", weight}, {"bias", bias}});
}
}  // namespace

void matmul_forward(Tensor out, Tensor inp, Tensor weight, Tensor bias, Tensor residual) {
    const char* op = "matmul_forward";
    const DType dt = check_matmul_forward(op, out, inp, weight, bias);
    if (!residual.empty()) {
        check_device(op, {{"out", out}, {"residual", residual}});
        LLMT_INTERNAL_CHECK(residual.dtype == out.dtype && residual.numel() == out.numel(),
                   "{}: residual {} must have out's element count and dtype ({})", op, residual.describe(),
                   out.describe());
        LLMT_INTERNAL_CHECK(residual.data != out.data && residual.data != inp.data,
                   "{}: residual must not alias out or inp (it is read while out is written)", op);
    }
    const int64_t OC = weight.dim(0), C = weight.dim(1);
#if LLMT_CUDA_ENABLED
    if (inp.device == Device::kCuda && !residual.empty() && !knob_on(Knob::kFuseResidual)) {
        matmul_forward(out, inp, weight, bias);
        return residual_forward(out, residual, out);
    }
#endif
    LLMT_ON_CUDA_T(inp.device, dt, cuda::matmul_forward(p<E>(out), p<E>(inp), p<E>(weight),
                                                         bias.empty() ? nullptr : p<E>(bias),
                                                         as_int(op, "rows", inp.numel() / C), as_int(op, "C", C),
                                                         as_int(op, "OC", OC), cuda::stream(),
                                                         residual.empty() ? nullptr : p<E>(residual)));
    cpu::matmul_forward(f(out), f(inp), f(weight), bias.empty() ? nullptr : f(bias),
                        as_int(op, "rows", inp.numel() / C), as_int(op, "C", C), as_int(op, "OC", OC));
    if (!residual.empty()) cpu::residual_forward(f(out), f(out), f(residual), static_cast<size_t>(out.numel()));
}

void matmul_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight) {
    const char* op = "matmul_backward";
    check_device(op, {{"dinp", dinp}, {"dweight", dweight}, {"dbias", dbias}, {"dout", dout}, {"inp", inp},
                      {"weight", weight}});
    check_shape(op, "weight", weight, {-1, -1});
    const int64_t OC = weight.dim(0), C = weight.dim(1);
    if (!dweight.empty()) check_shape(op, "dweight", dweight, {OC, C});
    check_present(op, "inp", inp);
    check_present(op, "dout", dout);
    LLMT_INTERNAL_CHECK(inp.ndim >= 1 && inp.dim(-1) == C, "{}: inp must end in C = {}, got {}", op, C,
               inp.describe());
    const int64_t rows = inp.numel() / C;
    LLMT_INTERNAL_CHECK(dout.ndim == inp.ndim && dout.dim(-1) == OC && dout.numel() / OC == rows,
               "{}: dout must be inp's leading dims x OC = {}, got {}", op, OC, dout.describe());
    if (!dinp.empty())
        LLMT_INTERNAL_CHECK(dinp.ndim == inp.ndim && dinp.numel() == inp.numel() && dinp.dim(-1) == C,
                   "{}: dinp must have inp's shape {}, got {}", op, inp.describe(), dinp.describe());
    if (!dbias.empty()) check_shape(op, "dbias", dbias, {OC});
    check_f32(op, {{"dweight", dweight}, {"dbias", dbias}});
    const DType dt = check_act(op, inp.device, {{"dinp", dinp}, {"dout", dout}, {"inp", inp}, {"weight", weight}});
#if LLMT_CUDA_ENABLED
    if (inp.device == Device::kCuda && dt == DType::kBF16)
        return cuda::matmul_backward(dinp.empty() ? nullptr : p<__nv_bfloat16>(dinp), nullptr, f(dweight),
                                     dbias.empty() ? nullptr : f(dbias), p<__nv_bfloat16>(dout),
                                     p<__nv_bfloat16>(inp), p<__nv_bfloat16>(weight), as_int(op, "rows", rows),
                                     as_int(op, "C", C), as_int(op, "OC", OC), cuda::stream());
#endif
    (void)dt;
    LLMT_ON_CUDA(inp.device, matmul_backward(dinp.empty() ? nullptr : f(dinp), dweight.empty() ? nullptr : f(dweight),
                                             dbias.empty() ? nullptr : f(dbias), f(dout), f(inp), f(weight),
                                             as_int(op, "rows", rows), as_int(op, "C", C), as_int(op, "OC", OC),
                                             cuda::stream()));
    cpu::matmul_backward(dinp.empty() ? nullptr : f(dinp), dweight.empty() ? nullptr : f(dweight),
                         dbias.empty() ? nullptr : f(dbias),
                         f(dout), f(inp), f(weight), as_int(op, "rows", rows), as_int(op, "C", C),
                         as_int(op, "OC", OC));
}

void rmsnorm_forward(Tensor out, Tensor rstd, Tensor inp, Tensor weight, float eps) {
    const char* op = "rmsnorm_forward";
    LLMT_INTERNAL_CHECK(eps > 0.f && std::isfinite(eps), "{}: eps must be a positive finite number, found {}", op,
                        eps);
    check_device(op, {{"out", out}, {"rstd", rstd}, {"inp", inp}, {"weight", weight}});
    check_shape(op, "inp", inp, {-1, -1, -1});
    const int64_t B = inp.dim(0), T = inp.dim(1), C = inp.dim(2);
    check_shape(op, "out", out, {B, T, C});
    check_shape(op, "rstd", rstd, {B, T});
    check_shape(op, "weight", weight, {C});
    check_f32(op, {{"rstd", rstd}});
    const DType dt = check_act(op, inp.device, {{"out", out}, {"inp", inp}, {"weight", weight}});
    LLMT_ON_CUDA_T(inp.device, dt, cuda::rmsnorm_forward(p<E>(out), f(rstd), p<E>(inp), p<E>(weight), eps,
                                                          as_int(op, "B", B), as_int(op, "T", T), as_int(op, "C", C),
                                                          cuda::stream()));
    cpu::rmsnorm_forward(f(out), f(rstd), f(inp), f(weight), eps, as_int(op, "B", B), as_int(op, "T", T),
                         as_int(op, "C", C));
}

void rmsnorm_backward(Tensor dinp, Tensor dweight, Tensor dout, Tensor inp, Tensor weight, Tensor rstd) {
    const char* op = "rmsnorm_backward";
    check_device(op, {{"dinp", dinp}, {"dweight", dweight}, {"dout", dout}, {"inp", inp}, {"weight", weight},
                      {"rstd", rstd}});
    check_shape(op, "inp", inp, {-1, -1, -1});
    const int64_t B = inp.dim(0), T = inp.dim(1), C = inp.dim(2);
    check_shape(op, "dinp", dinp, {B, T, C});
    check_shape(op, "dout", dout, {B, T, C});
    check_shape(op, "dweight", dweight, {C});
    check_shape(op, "weight", weight, {C});
    check_shape(op, "rstd", rstd, {B, T});
    check_f32(op, {{"dweight", dweight}, {"rstd", rstd}});
    const DType dt = check_act(op, inp.device, {{"dinp", dinp}, {"dout", dout}, {"inp", inp}, {"weight", weight}});
    LLMT_ON_CUDA_T(inp.device, dt, cuda::rmsnorm_backward(p<E>(dinp), f(dweight), p<E>(dout), p<E>(inp), p<E>(weight),
                                                           f(rstd), as_int(op, "B", B), as_int(op, "T", T),
                                                           as_int(op, "C", C), cuda::stream()));
    cpu::rmsnorm_backward(f(dinp), f(dweight), f(dout), f(inp), f(weight), f(rstd), as_int(op, "B", B),
                          as_int(op, "T", T), as_int(op, "C", C));
}

namespace {
// head_rmsnorm's shapes: qkv (B,T,C3) with C3 = (NH + 2*KV) * HS, weights (HS), rstd (B,T,NH+KV). Returns HS.
int64_t check_head_norm(const char* op, const Tensor& qkv, const Tensor& rstd, const Tensor& q_weight,
                        const Tensor& k_weight, int NH, int KV) {
    check_shape(op, "qkv", qkv, {-1, -1, -1});
    LLMT_INTERNAL_CHECK(NH > 0 && KV > 0 && qkv.dim(2) % (NH + 2 * KV) == 0,
                        "{}: a row of {} channels is not NH + 2 KV = {} heads", op, qkv.dim(2), NH + 2 * KV);
    const int64_t HS = qkv.dim(2) / (NH + 2 * KV);
    check_shape(op, "rstd", rstd, {qkv.dim(0), qkv.dim(1), NH + KV});
    check_shape(op, "q_weight", q_weight, {HS});
    check_shape(op, "k_weight", k_weight, {HS});
    return HS;
}
}  // namespace

void head_rmsnorm_forward(Tensor out, Tensor rstd, Tensor inp, Tensor q_weight, Tensor k_weight, int NH, int KV,
                          float eps) {
    const char* op = "head_rmsnorm_forward";
    LLMT_INTERNAL_CHECK(eps > 0.f && std::isfinite(eps), "{}: eps must be a positive finite number, found {}", op,
                        eps);
    check_device(op, {{"out", out}, {"rstd", rstd}, {"inp", inp}, {"q_weight", q_weight}, {"k_weight", k_weight}});
    const int64_t HS = check_head_norm(op, inp, rstd, q_weight, k_weight, NH, KV);
    check_shape(op, "out", out, {inp.dim(0), inp.dim(1), inp.dim(2)});
    LLMT_INTERNAL_CHECK(out.data != inp.data, "{}: out must not alias inp", op);
    check_f32(op, {{"rstd", rstd}});
    const DType dt = check_act(op, inp.device, {{"out", out}, {"inp", inp}, {"q_weight", q_weight},
                                                 {"k_weight", k_weight}});
    LLMT_ON_CUDA_T(inp.device, dt, cuda::head_rmsnorm_forward(p<E>(out), f(rstd), p<E>(inp), p<E>(q_weight),
                                                               p<E>(k_weight), eps, inp.dim(0) * inp.dim(1), NH, KV,
                                                               as_int(op, "HS", HS), cuda::stream()));
    cpu::head_rmsnorm_forward(f(out), f(rstd), f(inp), f(q_weight), f(k_weight), eps, inp.dim(0) * inp.dim(1), NH, KV,
                              as_int(op, "HS", HS));
}

void head_rmsnorm_backward(Tensor dinp, Tensor dq_weight, Tensor dk_weight, Tensor dout, Tensor inp, Tensor q_weight,
                           Tensor k_weight, Tensor rstd, int NH, int KV) {
    const char* op = "head_rmsnorm_backward";
    check_device(op, {{"dinp", dinp}, {"dq_weight", dq_weight}, {"dk_weight", dk_weight}, {"dout", dout},
                      {"inp", inp}, {"q_weight", q_weight}, {"k_weight", k_weight}, {"rstd", rstd}});
    const int64_t HS = check_head_norm(op, inp, rstd, q_weight, k_weight, NH, KV);
    check_shape(op, "dinp", dinp, {inp.dim(0), inp.dim(1), inp.dim(2)});
    check_shape(op, "dout", dout, {inp.dim(0), inp.dim(1), inp.dim(2)});
    check_shape(op, "dq_weight", dq_weight, {HS});
    check_shape(op, "dk_weight", dk_weight, {HS});
    check_f32(op, {{"dq_weight", dq_weight}, {"dk_weight", dk_weight}, {"rstd", rstd}});
    const DType dt = check_act(op, inp.device, {{"dinp", dinp}, {"dout", dout}, {"inp", inp}, {"q_weight", q_weight},
                                                 {"k_weight", k_weight}});
    LLMT_ON_CUDA_T(inp.device, dt, cuda::head_rmsnorm_backward(p<E>(dinp), f(dq_weight), f(dk_weight), p<E>(dout),
                                                                p<E>(inp), p<E>(q_weight), p<E>(k_weight), f(rstd),
                                                                inp.dim(0) * inp.dim(1), NH, KV, as_int(op, "HS", HS),
                                                                cuda::stream()));
    cpu::head_rmsnorm_backward(f(dinp), f(dq_weight), f(dk_weight), f(dout), f(inp), f(q_weight), f(k_weight), f(rstd),
                               inp.dim(0) * inp.dim(1), NH, KV, as_int(op, "HS", HS));
}

void residual_rmsnorm_forward(Tensor residual_out, Tensor out, Tensor rstd, Tensor inp1, Tensor inp2, Tensor weight,
                              float eps) {
    const char* op = "residual_rmsnorm_forward";
    LLMT_INTERNAL_CHECK(eps > 0.f && std::isfinite(eps), "{}: eps must be a positive finite number, found {}", op,
                        eps);
    check_device(op, {{"residual_out", residual_out}, {"out", out}, {"rstd", rstd}, {"inp1", inp1}, {"inp2", inp2},
                      {"weight", weight}});
    check_shape(op, "inp1", inp1, {-1, -1, -1});
    const int64_t B = inp1.dim(0), T = inp1.dim(1), C = inp1.dim(2);
    check_shape(op, "inp2", inp2, {B, T, C});
    check_shape(op, "residual_out", residual_out, {B, T, C});
    check_shape(op, "out", out, {B, T, C});
    check_shape(op, "rstd", rstd, {B, T});
    check_shape(op, "weight", weight, {C});
    LLMT_INTERNAL_CHECK(out.data != residual_out.data && out.data != inp1.data && out.data != inp2.data,
                        "{}: out must not alias residual_out, inp1 or inp2", op);
    check_f32(op, {{"rstd", rstd}});
    const DType dt = check_act(op, inp1.device, {{"residual_out", residual_out}, {"out", out}, {"inp1", inp1},
                                                 {"inp2", inp2}, {"weight", weight}});
    LLMT_ON_CUDA_T(inp1.device, dt,
                   cuda::residual_rmsnorm_forward(p<E>(residual_out), p<E>(out), f(rstd), p<E>(inp1), p<E>(inp2),
                                                  p<E>(weight), eps, as_int(op, "B", B), as_int(op, "T", T),
                                                  as_int(op, "C", C), cuda::stream()));
    cpu::residual_rmsnorm_forward(f(residual_out), f(out), f(rstd), f(inp1), f(inp2), f(weight), eps,
                                  as_int(op, "B", B), as_int(op, "T", T), as_int(op, "C", C));
}

namespace {
// swiglu's shapes: inp (...,2F) and out (...,F) with the same leading dims. Returns {rows, F} and the dtype.
std::pair<int64_t, int> check_swiglu(const char* op, const Tensor& half, const char* half_name, const Tensor& full,
                                     const char* full_name) {
    check_present(op, full_name, full);
    check_present(op, half_name, half);
    LLMT_INTERNAL_CHECK(full.ndim >= 1 && full.dim(-1) > 0 && full.dim(-1) % 2 == 0,
                        "{}: argument '{}' must end in an even width 2F, got {}", op, full_name, full.describe());
    const int64_t F = full.dim(-1) / 2;
    bool same_lead = half.ndim == full.ndim && half.dim(-1) == F;
    for (int i = 0; same_lead && i + 1 < full.ndim; i++) same_lead = half.dim(i) == full.dim(i);
    LLMT_INTERNAL_CHECK(same_lead, "{}: argument '{}' must be {}'s leading dims x F = {}, got {} for {}", op,
                        half_name, full_name, F, half.describe(), full.describe());
    return {full.numel() / (2 * F), as_int(op, "F", F)};
}
}  // namespace

void swiglu_forward(Tensor out, Tensor inp) {
    const char* op = "swiglu_forward";
    const Device dev = check_device(op, {{"out", out}, {"inp", inp}});
    const auto [rows, F] = check_swiglu(op, out, "out", inp, "inp");
    LLMT_INTERNAL_CHECK(out.data != inp.data, "{}: out must not alias inp", op);
    const DType dt = check_act(op, dev, {{"out", out}, {"inp", inp}});
    LLMT_ON_CUDA_T(dev, dt, cuda::swiglu_forward(p<E>(out), p<E>(inp), static_cast<size_t>(rows), F, cuda::stream()));
    cpu::swiglu_forward(f(out), f(inp), static_cast<size_t>(rows), F);
}

void swiglu_backward(Tensor dinp, Tensor dout, Tensor inp) {
    const char* op = "swiglu_backward";
    const Device dev = check_device(op, {{"dinp", dinp}, {"dout", dout}, {"inp", inp}});
    const auto [rows, F] = check_swiglu(op, dout, "dout", inp, "inp");
    check_swiglu(op, dout, "dout", dinp, "dinp");
    LLMT_INTERNAL_CHECK(dinp.numel() == inp.numel(), "{}: dinp {} must have inp's shape {}", op, dinp.describe(),
                        inp.describe());
    const DType dt = check_act(op, dev, {{"dinp", dinp}, {"dout", dout}, {"inp", inp}});
    LLMT_ON_CUDA_T(dev, dt, cuda::swiglu_backward(p<E>(dinp), p<E>(dout), p<E>(inp), static_cast<size_t>(rows), F,
                                                  cuda::stream()));
    cpu::swiglu_backward(f(dinp), f(dout), f(inp), static_cast<size_t>(rows), F);
}

namespace {
size_t n_of(const Tensor& t) { return static_cast<size_t>(t.numel()); }
}  // namespace

void gelu_forward(Tensor out, Tensor inp) {
    const Device dev = check_device("gelu_forward", {{"out", out}, {"inp", inp}});
    const DType dt = check_same_numel("gelu_forward", {{"out", out}, {"inp", inp}});
    LLMT_ON_CUDA_T(dev, dt, cuda::gelu_forward(p<E>(out), p<E>(inp), n_of(inp), cuda::stream()));
    cpu::gelu_forward(f(out), f(inp), n_of(inp));
}

void gelu_backward(Tensor dinp, Tensor inp, Tensor dout) {
    const Device dev = check_device("gelu_backward", {{"dinp", dinp}, {"inp", inp}, {"dout", dout}});
    const DType dt = check_same_numel("gelu_backward", {{"dinp", dinp}, {"inp", inp}, {"dout", dout}});
    LLMT_ON_CUDA_T(dev, dt, cuda::gelu_backward(p<E>(dinp), p<E>(inp), p<E>(dout), n_of(inp), cuda::stream()));
    cpu::gelu_backward(f(dinp), f(inp), f(dout), n_of(inp));
}

void residual_forward(Tensor out, Tensor inp1, Tensor inp2) {
    const Device dev = check_device("residual_forward", {{"out", out}, {"inp1", inp1}, {"inp2", inp2}});
    const DType dt = check_same_numel("residual_forward", {{"out", out}, {"inp1", inp1}, {"inp2", inp2}});
    LLMT_ON_CUDA_T(dev, dt, cuda::residual_forward(p<E>(out), p<E>(inp1), p<E>(inp2), n_of(out), cuda::stream()));
    cpu::residual_forward(f(out), f(inp1), f(inp2), n_of(out));
}

void residual_backward(Tensor dinp1, Tensor dinp2, Tensor dout) {
    const Device dev = check_device("residual_backward", {{"dinp1", dinp1}, {"dinp2", dinp2}, {"dout", dout}});
    const DType dt = check_same_numel("residual_backward", {{"dinp1", dinp1}, {"dinp2", dinp2}, {"dout", dout}});
    LLMT_ON_CUDA_T(dev, dt, cuda::residual_backward(p<E>(dinp1), p<E>(dinp2), p<E>(dout), n_of(dout), cuda::stream()));
    cpu::residual_backward(f(dinp1), f(dinp2), f(dout), n_of(dout));
}

void dropout_forward(Tensor out, Tensor inp, float p_drop, uint64_t seed) {
    const Device dev = check_device("dropout_forward", {{"out", out}, {"inp", inp}});
    const DType dt = check_same_numel("dropout_forward", {{"out", out}, {"inp", inp}});
    LLMT_INTERNAL_CHECK(p_drop >= 0.0f && p_drop < 1.0f, "dropout_forward: p = {} must be in [0, 1)", p_drop);
    LLMT_ON_CUDA_T(dev, dt, cuda::dropout_forward(p<E>(out), p<E>(inp), p_drop, seed, n_of(inp), cuda::stream()));
    cpu::dropout_forward(f(out), f(inp), p_drop, seed, n_of(inp));
}

void dropout_backward(Tensor dinp, Tensor dout, float p_drop, uint64_t seed) {
    const Device dev = check_device("dropout_backward", {{"dinp", dinp}, {"dout", dout}});
    const DType dt = check_same_numel("dropout_backward", {{"dinp", dinp}, {"dout", dout}});
    LLMT_INTERNAL_CHECK(p_drop >= 0.0f && p_drop < 1.0f, "dropout_backward: p = {} must be in [0, 1)", p_drop);
    LLMT_ON_CUDA_T(dev, dt, cuda::dropout_backward(p<E>(dinp), p<E>(dout), p_drop, seed, n_of(dout), cuda::stream()));
    cpu::dropout_backward(f(dinp), f(dout), p_drop, seed, n_of(dout));
}

namespace {
// Shared checks of the classifier ops; returns {B, T, Vp}.
std::array<int, 3> check_classifier(const char* op, const Tensor& losses, const Tensor& logits,
                                    const Tensor& targets, int V, DType* dt) {
    check_device(op, {{"losses", losses}, {"logits", logits}, {"targets", targets}});
    check_shape(op, "logits", logits, {-1, -1, -1});
    const int64_t B = logits.dim(0), T = logits.dim(1), Vp = logits.dim(2);
    LLMT_INTERNAL_CHECK(V > 0 && V <= Vp, "{}: V = {} must be in [1, Vp = {}]", op, V, Vp);
    check_shape(op, "losses", losses, {B, T});
    check_shape(op, "targets", targets, {B, T});
    check_f32(op, {{"losses", losses}});
    *dt = check_act(op, logits.device, {{"logits", logits}});
    check_dtype(op, "targets", targets, DType::kI32);
    if (logits.device == Device::kCpu) {  // device targets are not read back; the caller validated them
        const int32_t* y = ids(targets);
        for (int64_t i = 0; i < B * T; i++)
            LLMT_INTERNAL_CHECK(y[i] < V, "{}: target {} at position {} is >= V = {}", op, y[i], i, V);
    }
    return {as_int(op, "B", B), as_int(op, "T", T), as_int(op, "Vp", Vp)};
}
}  // namespace

void classifier_forward(Tensor losses, Tensor logits, Tensor targets, int V) {
    DType dt;
    const auto [B, T, Vp] = check_classifier("classifier_forward", losses, logits, targets, V, &dt);
    LLMT_ON_CUDA_T(logits.device, dt,
                   cuda::classifier_forward(f(losses), p<E>(logits), ids(targets), B, T, V, Vp, cuda::stream()));
    cpu::classifier_forward(f(losses), f(logits), ids(targets), B, T, V, Vp);
}

void classifier_forward_backward(Tensor losses, Tensor logits, Tensor targets, float dloss_scale, int V) {
    DType dt;
    const auto [B, T, Vp] = check_classifier("classifier_forward_backward", losses, logits, targets, V, &dt);
    LLMT_ON_CUDA_T(logits.device, dt,
                   cuda::classifier_forward_backward(f(losses), p<E>(logits), ids(targets), dloss_scale, B, T, V, Vp,
                                                     cuda::stream()));
    cpu::classifier_forward_backward(f(losses), f(logits), ids(targets), dloss_scale, B, T, V, Vp);
}

void classifier_predict(Tensor preds, Tensor loss_sum, Tensor logits, Tensor losses, Tensor targets, int V) {
    const char* op = "classifier_predict";
    const Device dev = check_device(
        op, {{"preds", preds}, {"loss_sum", loss_sum}, {"logits", logits}, {"losses", losses}, {"targets", targets}});
    check_shape(op, "logits", logits, {-1, -1});
    const int B = as_int(op, "B", logits.dim(0)), Vp = as_int(op, "Vp", logits.dim(1));
    LLMT_INTERNAL_CHECK(V > 0 && V <= Vp, "{}: V = {} must be in [1, Vp = {}]", op, V, Vp);
    check_shape(op, "preds", preds, {B});
    check_shape(op, "loss_sum", loss_sum, {2});
    check_shape(op, "losses", losses, {B});
    check_shape(op, "targets", targets, {B});
    check_f32(op, {{"loss_sum", loss_sum}, {"logits", logits}, {"losses", losses}});
    check_dtype(op, "preds", preds, DType::kI32);
    check_dtype(op, "targets", targets, DType::kI32);
    auto* out = static_cast<int32_t*>(preds.data);
    LLMT_ON_CUDA(dev,
                 classifier_predict(out, f(loss_sum), f(logits), f(losses), ids(targets), B, V, Vp, cuda::stream()));
    cpu::classifier_predict(out, f(loss_sum), f(logits), f(losses), ids(targets), B, V, Vp);
}

void softmax_forward(Tensor probs, Tensor logits, int V) {
    const char* op = "softmax_forward";
    check_device(op, {{"probs", probs}, {"logits", logits}});
    check_shape(op, "logits", logits, {-1, -1, -1});
    const int64_t B = logits.dim(0), T = logits.dim(1), Vp = logits.dim(2);
    LLMT_INTERNAL_CHECK(V > 0 && V <= Vp, "{}: V = {} must be in [1, Vp = {}]", op, V, Vp);
    check_shape(op, "probs", probs, {B, T, Vp});
    const DType dt = check_act(op, logits.device, {{"probs", probs}, {"logits", logits}});
    LLMT_ON_CUDA_T(logits.device, dt,
                   cuda::softmax_forward(p<E>(probs), p<E>(logits), as_int(op, "B", B), as_int(op, "T", T), V,
                                         as_int(op, "Vp", Vp), cuda::stream()));
    cpu::softmax_forward(f(probs), f(logits), as_int(op, "B", B), as_int(op, "T", T), V,
                         as_int(op, "Vp", Vp));
}

namespace {
// The argument checks adamw_update and adamw_update_runs share.
void check_adamw(const char* op, const Tensor& params, const Tensor& m, const Tensor& v, const Tensor& grads,
                 const AdamWParams& hp, const Tensor& params_lp) {
    check_device(op, {{"params", params}, {"m", m}, {"v", v}, {"grads", grads}, {"params_lp", params_lp}});
    check_same_numel(op, {{"params", params}, {"m", m}, {"v", v}, {"grads", grads}});
    check_f32(op, {{"params", params}, {"m", m}, {"v", v}, {"grads", grads}});
    LLMT_INTERNAL_CHECK(hp.step >= 1, "{}: step must be >= 1, got {}", op, hp.step);
    if (!params_lp.empty()) {
        check_dtype(op, "params_lp", params_lp, DType::kBF16);
        LLMT_INTERNAL_CHECK(params_lp.numel() == params.numel(), "{}: params_lp has {} elements, params {}", op,
                   params_lp.numel(), params.numel());
    }
}
}  // namespace

void adamw_update(Tensor params, Tensor m, Tensor v, Tensor grads, const AdamWParams& hp, Tensor params_lp) {
    check_adamw("adamw_update", params, m, v, grads, hp, params_lp);
    LLMT_ON_CUDA(params.device,
                 adamw_update(f(params), params_lp.empty() ? nullptr : p<__nv_bfloat16>(params_lp), f(m), f(v),
                              f(grads), static_cast<size_t>(params.numel()), hp, cuda::stream()));
    cpu::adamw_update(f(params), f(m), f(v), f(grads), static_cast<size_t>(params.numel()), hp);
}

void adamw_update_runs(Tensor params, Tensor m, Tensor v, Tensor grads, const AdamWParams& hp,
                       const std::vector<AdamWRun>& runs, Tensor params_lp) {
    const char* op = "adamw_update_runs";
    check_adamw(op, params, m, v, grads, hp, params_lp);
    for (size_t r = 0; r < runs.size(); r++)
        LLMT_INTERNAL_CHECK(runs[r].begin < runs[r].end && runs[r].end <= params.numel() &&
                       (r == 0 ? runs[r].begin >= 0 : runs[r].begin >= runs[r - 1].end),
                   "{}: run {} [{}, {}) is empty, outside the {} elements or not after the previous run", op, r,
                   runs[r].begin, runs[r].end, params.numel());
    LLMT_ON_CUDA(params.device,
                 adamw_update_runs(f(params), params_lp.empty() ? nullptr : p<__nv_bfloat16>(params_lp), f(m), f(v),
                                   f(grads), runs.data(), static_cast<int>(runs.size()), hp, cuda::stream()));
    for (const AdamWRun& r : runs) {
        AdamWParams h = hp;
        if (!r.decay) h.weight_decay = 0.0f;
        cpu::adamw_update(f(params) + r.begin, f(m) + r.begin, f(v) + r.begin, f(grads) + r.begin,
                          static_cast<size_t>(r.end - r.begin), h);
        if (!params_lp.empty())  // the compute copy, as the CUDA kernel writes it in the same pass
            for (int64_t i = r.begin; i < r.end; ++i) p<uint16_t>(params_lp)[i] = bf16_from_float(f(params)[i]);
    }
}

void matmul_forward_gelu(Tensor out, Tensor pre_gelu, Tensor inp, Tensor weight, Tensor bias) {
    const char* op = "matmul_forward_gelu";
    check_device(op, {{"out", out}, {"pre_gelu", pre_gelu}, {"inp", inp}, {"weight", weight}, {"bias", bias}});
    check_present(op, "pre_gelu", pre_gelu);
    LLMT_INTERNAL_CHECK(pre_gelu.numel() == out.numel(), "{}: pre_gelu {} must have out's shape {}", op,
                        pre_gelu.describe(), out.describe());
    const DType dt = check_act(op, inp.device, {{"out", out}, {"pre_gelu", pre_gelu}});
#if LLMT_CUDA_ENABLED
    if (inp.device == Device::kCuda && dt == DType::kBF16 && !bias.empty() && gelu_fusion()) {
        check_matmul_forward(op, pre_gelu, inp, weight, bias);
        return cuda::matmul_forward_gelu(p<__nv_bfloat16>(out), p<__nv_bfloat16>(pre_gelu), p<__nv_bfloat16>(inp),
                                         p<__nv_bfloat16>(weight), p<__nv_bfloat16>(bias),
                                         as_int(op, "rows", inp.numel() / weight.dim(1)),
                                         as_int(op, "C", weight.dim(1)), as_int(op, "OC", weight.dim(0)),
                                         cuda::stream());
    }
#endif
    (void)dt;
    matmul_forward(pre_gelu, inp, weight, bias);
    gelu_forward(out, pre_gelu);
}

void matmul_backward_gelu(Tensor dinp, Tensor gelu_pre, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp,
                          Tensor weight) {
    const char* op = "matmul_backward_gelu";
    check_present(op, "dinp", dinp);
    check_present(op, "gelu_pre", gelu_pre);
    LLMT_INTERNAL_CHECK(
        gelu_pre.numel() == dinp.numel() && gelu_pre.dtype == dinp.dtype && gelu_pre.device == dinp.device,
        "{}: gelu_pre {} must match dinp {}", op, gelu_pre.describe(), dinp.describe());
#if LLMT_CUDA_ENABLED
    if (inp.device == Device::kCuda && inp.dtype == DType::kBF16 && gelu_fusion()) {
        matmul_backward(Tensor(), dweight, dbias, dout, inp, weight);  // validates; the weight/bias grads
        const int64_t OC = weight.dim(0), C = weight.dim(1);
        return cuda::matmul_backward(p<__nv_bfloat16>(dinp), p<__nv_bfloat16>(gelu_pre), nullptr, nullptr,
                                     p<__nv_bfloat16>(dout), p<__nv_bfloat16>(inp), p<__nv_bfloat16>(weight),
                                     as_int(op, "rows", inp.numel() / C), as_int(op, "C", C), as_int(op, "OC", OC),
                                     cuda::stream());
    }
#endif
    matmul_backward(dinp, dweight, dbias, dout, inp, weight);
    gelu_backward(dinp, gelu_pre, dinp);
}

void convert(Tensor dst, Tensor src) {
    const char* op = "convert";
    const Device dev = check_device(op, {{"dst", dst}, {"src", src}});
    check_present(op, "dst", dst);
    check_present(op, "src", src);
    LLMT_INTERNAL_CHECK(dst.numel() == src.numel(), "{}: dst {} and src {} differ in element count", op,
                        dst.describe(), src.describe());
    const bool down = dst.dtype == DType::kBF16 && src.dtype == DType::kF32;
    const bool up = dst.dtype == DType::kF32 && src.dtype == DType::kBF16;
    if (!down && !up) return copy(dst, src);
    const size_t n = n_of(src);
#if LLMT_CUDA_ENABLED
    if (dev == Device::kCuda) {
        if (down) return cuda::convert(p<__nv_bfloat16>(dst), f(src), n, cuda::stream());
        return cuda::convert(f(dst), p<__nv_bfloat16>(src), n, cuda::stream());
    }
#endif
    (void)dev;
    if (down) {
        for (size_t i = 0; i < n; ++i) p<uint16_t>(dst)[i] = bf16_from_float(f(src)[i]);
    } else {
        for (size_t i = 0; i < n; ++i) f(dst)[i] = float_from_bf16(p<uint16_t>(src)[i]);
    }
}

double sum_squares(Tensor x) {
    const Device dev = check_device("sum_squares", {{"x", x}});
    check_same_numel("sum_squares", {{"x", x}});
    check_f32("sum_squares", {{"x", x}});
    LLMT_ON_CUDA(dev, sum_squares(f(x), static_cast<size_t>(x.numel()), cuda::stream()));
    return cpu::sum_squares(f(x), static_cast<size_t>(x.numel()));
}

void scale_inplace(Tensor x, float s) {
    const Device dev = check_device("scale_inplace", {{"x", x}});
    check_same_numel("scale_inplace", {{"x", x}});
    check_f32("scale_inplace", {{"x", x}});
    LLMT_ON_CUDA(dev, scale_inplace(f(x), static_cast<size_t>(x.numel()), s, cuda::stream()));
    cpu::scale_inplace(f(x), static_cast<size_t>(x.numel()), s);
}

const char* gemm_backend_name() { return cpu::gemm_backend_name(); }

int device_count(Device device) {
    if (device == Device::kCpu) return 1;
#if LLMT_CUDA_ENABLED
    return cuda::device_count();
#else
    return 0;
#endif
}

void copy(Tensor dst, Tensor src) {
    const char* op = "copy";
    check_present(op, "dst", dst);
    check_present(op, "src", src);
    LLMT_INTERNAL_CHECK(dst.dtype == src.dtype && dst.numel() == src.numel(),
               "{}: dst {} and src {} differ in dtype or element count", op, dst.describe(), src.describe());
    if (dst.device == Device::kCpu && src.device == Device::kCpu) {
        if (dst.data != src.data) std::memmove(dst.data, src.data, src.nbytes());
        return;
    }
#if LLMT_CUDA_ENABLED
    cuda::copy(dst.data, src.data, src.nbytes());
#else
    throw DeviceError(fmt::format("{}: built without CUDA ({} -> {})", op, src.describe(), dst.describe()));
#endif
}

void zero(Tensor t) {
    if (t.empty()) return;
    if (t.device == Device::kCpu) {
        std::memset(t.data, 0, t.nbytes());
        return;
    }
#if LLMT_CUDA_ENABLED
    cuda::zero_async(t.data, t.nbytes());
#else
    throw DeviceError(fmt::format("zero: built without CUDA ({})", t.describe()));
#endif
}

void synchronize(Device device) {
#if LLMT_CUDA_ENABLED
    if (device == Device::kCuda) cuda::synchronize();
#else
    (void)device;
#endif
}

double cpu_peak_flops() { return cpu::measured_peak_flops(); }

int set_cpu_threads(int configured) { return cpu::apply_cpu_threads(configured); }

CpuThreadsForWork::CpuThreadsForWork(double flops)
    : saved_(omp_get_max_threads()), threads_(cpu::threads_for_work(flops, saved_)) {
    if (threads_ != saved_) omp_set_num_threads(threads_);
}

CpuThreadsForWork::~CpuThreadsForWork() {
    if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
}

std::string set_cpu_gemm_precision(DType dtype) {
    LLMT_INTERNAL_CHECK(dtype == DType::kF32 || dtype == DType::kBF16, "set_cpu_gemm_precision: {} is not a GEMM "
                        "precision", dtype_name(dtype));
    const bool bf16 = dtype == DType::kBF16;
    cpu::set_matmul_precision(bf16 ? cpu::MatmulPrecision::kBF16 : cpu::MatmulPrecision::kF32);
    return bf16 ? cpu::gemm_bf16_describe() : "fp32";
}

DeviceMemoryInfo device_memory_info(Device device) {
    DeviceMemoryInfo m;
#if LLMT_CUDA_ENABLED
    if (device == Device::kCuda) cuda::memory_info(&m.free, &m.total);
#else
    (void)device;
#endif
    return m;
}

}  // namespace llmt::kernels
