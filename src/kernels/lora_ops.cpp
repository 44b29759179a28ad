// kernels/ops.h's LoRA ops: validation, then the products on the row-major GEMM of each backend (the CPU's
// sgemm, CUDA's cuBLASLt gemm), addressing the fused layer's parts as column blocks through the leading
// dimensions, so no part is copied out. Per part p with A_p = rows p*r.. of a, B_p = its rows of b,
// u_p = columns p*r.. of u, out_p / dout_p = columns col_p.. of out / dout:
//   forward:  u = inp a^T;  out_p += scale u_p B_p^T
//   backward: du_p = scale dout_p B_p;  db_p += scale dout_p^T u_p;  da += du^T inp;  dinp += du a.
#include <fmt/format.h>

#include <type_traits>

#include "core/build_info.h"
#include "core/check.h"
#include "core/error.h"
#include "kernels/cpu/gemm.h"
#include "kernels/ops.h"

#if LLMT_CUDA_ENABLED
#include <cuda_bf16.h>

#include "kernels/cuda/matmul.h"
#include "kernels/cuda/runtime.h"
#endif

namespace llmt::kernels {
namespace {

struct LoraDims {
    int64_t rows = 0, C = 0, OC = 0, r = 0, P = 0;
};

// The shapes every LoRA op shares; returns them. out_like is out (forward) or dout (backward).
LoraDims check_lora(const char* op, const Tensor& out_like, const Tensor& u, const Tensor& inp, const Tensor& a,
                    const Tensor& b, const std::vector<LoraSpan>& spans) {
    for (const Tensor* t : {&out_like, &u, &inp, &a, &b})
        LLMT_INTERNAL_CHECK(!t->empty(), "{}: a tensor argument is missing", op);
    LLMT_INTERNAL_CHECK(a.ndim == 2 && b.ndim == 2, "{}: a and b must be matrices, got {} and {}", op, a.describe(),
                        b.describe());
    LoraDims d;
    d.P = static_cast<int64_t>(spans.size());
    LLMT_INTERNAL_CHECK(d.P > 0 && a.dim(0) % d.P == 0, "{}: a {} does not hold {} parts of equal rank", op,
                        a.describe(), d.P);
    d.r = a.dim(0) / d.P;
    d.C = a.dim(1);
    d.OC = out_like.dim(-1);
    d.rows = inp.numel() / d.C;
    LLMT_INTERNAL_CHECK(inp.dim(-1) == d.C && out_like.numel() == d.rows * d.OC && u.numel() == d.rows * d.P * d.r &&
                            u.dim(-1) == d.P * d.r,
                        "{}: inp {}, out {} and u {} do not match a {} ({} parts)", op, inp.describe(),
                        out_like.describe(), u.describe(), a.describe(), d.P);
    int64_t brows = 0;
    for (const LoraSpan& s : spans) {
        LLMT_INTERNAL_CHECK(s.col >= 0 && s.rows > 0 && s.col + s.rows <= d.OC, "{}: part at column {} of {} rows is "
                            "outside the output's {} columns", op, s.col, s.rows, d.OC);
        brows += s.rows;
    }
    LLMT_INTERNAL_CHECK(b.dim(0) == brows && b.dim(1) == d.r, "{}: b must be ({}, {}), got {}", op, brows, d.r,
                        b.describe());
    for (const Tensor* t : {&out_like, &u, &inp, &a, &b}) {
        LLMT_INTERNAL_CHECK(t->device == inp.device, "{}: tensors on different devices", op);
        LLMT_INTERNAL_CHECK(t->dtype == inp.dtype, "{}: {} is not {} like inp", op, t->describe(),
                            dtype_name(inp.dtype));
    }
    LLMT_INTERNAL_CHECK(inp.dtype == DType::kF32 || (inp.dtype == DType::kBF16 && inp.device == Device::kCuda),
                        "{}: f32 tensors, or bf16 on CUDA, expected; got {}", op, inp.describe());
    if (inp.device == Device::kCuda && !LLMT_CUDA_ENABLED)
        throw DeviceError(fmt::format("{}: built without CUDA", op));
    for (int64_t v : {d.rows, d.C, d.OC, d.P * d.r})
        LLMT_INTERNAL_CHECK(v <= INT32_MAX, "{}: extent {} beyond the GEMM's int range", op, v);
    return d;
}

// Row-major C (M, N; ldc) = alpha op(A) op(B) + beta C on `dev`, element types AB for A and B and CD for C.
template <typename AB, typename CD>
void gemm(Device dev, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const void* A, int64_t lda,
          const void* B, int64_t ldb, float beta, void* C, int64_t ldc) {
#if LLMT_CUDA_ENABLED
    if (dev == Device::kCuda) {
        cuda::gemm<AB, CD>(ta, tb, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha,
                           static_cast<const AB*>(A), static_cast<int>(lda), static_cast<const AB*>(B),
                           static_cast<int>(ldb), beta, static_cast<CD*>(C), static_cast<int>(ldc), cuda::stream());
        return;
    }
#endif
    if constexpr (std::is_same_v<AB, float> && std::is_same_v<CD, float>) {
        cpu::sgemm(ta, tb, M, N, K, alpha, static_cast<const float*>(A), lda, static_cast<const float*>(B), ldb, beta,
                   static_cast<float*>(C), ldc);
    } else {
        (void)dev;
        throw InternalError("lora: bf16 GEMMs run on CUDA only");
    }
}

size_t elem_size(const Tensor& t) { return t.dtype == DType::kF32 ? 4 : 2; }
const char* at(const Tensor& t, int64_t elems) { return static_cast<const char*>(t.data) + elems * elem_size(t); }
char* at_mut(const Tensor& t, int64_t elems) { return static_cast<char*>(t.data) + elems * elem_size(t); }

template <typename E>
void forward_t(const Tensor& out, const Tensor& u, const Tensor& inp, const Tensor& a, const Tensor& b, float scale,
               const std::vector<LoraSpan>& spans, const LoraDims& d) {
    const Device dev = inp.device;
    const int64_t PR = d.P * d.r;
    gemm<E, E>(dev, false, true, d.rows, PR, d.C, 1.f, inp.data, d.C, a.data, d.C, 0.f, u.data, PR);
    int64_t brow = 0;
    for (size_t p = 0; p < spans.size(); ++p) {
        const LoraSpan& s = spans[p];
        gemm<E, E>(dev, false, true, d.rows, s.rows, d.r, scale, at(u, static_cast<int64_t>(p) * d.r), PR,
                   at(b, brow * d.r), d.r, 1.f, at_mut(out, s.col), d.OC);
        brow += s.rows;
    }
}

template <typename E>
void backward_t(const Tensor& dinp, const Tensor& da, const Tensor& db, const Tensor& du, const Tensor& dout,
                const Tensor& u, const Tensor& inp, const Tensor& a, const Tensor& b, float scale,
                const std::vector<LoraSpan>& spans, const LoraDims& d) {
    const Device dev = inp.device;
    const int64_t PR = d.P * d.r;
    int64_t brow = 0;
    for (size_t p = 0; p < spans.size(); ++p) {
        const LoraSpan& s = spans[p];
        const int64_t ucol = static_cast<int64_t>(p) * d.r;
        // du_p (rows, r) = scale dout_p (rows, rows_p) B_p (rows_p, r)
        gemm<E, E>(dev, false, false, d.rows, d.r, s.rows, scale, at(dout, s.col), d.OC, at(b, brow * d.r), d.r, 0.f,
                   at_mut(du, ucol), PR);
        // db_p (rows_p, r) += scale dout_p^T u_p
        gemm<E, float>(dev, true, false, s.rows, d.r, d.rows, scale, at(dout, s.col), d.OC, at(u, ucol), PR, 1.f,
                       static_cast<float*>(db.data) + brow * d.r, d.r);
        brow += s.rows;
    }
    // da (P*r, C) += du^T inp;  dinp (rows, C) += du a
    gemm<E, float>(dev, true, false, PR, d.C, d.rows, 1.f, du.data, PR, inp.data, d.C, 1.f, da.data, d.C);
    gemm<E, E>(dev, false, false, d.rows, d.C, PR, 1.f, du.data, PR, a.data, d.C, 1.f, dinp.data, d.C);
}

}  // namespace

void lora_forward(Tensor out, Tensor u, Tensor inp, Tensor a, Tensor b, float scale,
                  const std::vector<LoraSpan>& spans) {
    const LoraDims d = check_lora("lora_forward", out, u, inp, a, b, spans);
#if LLMT_CUDA_ENABLED
    if (inp.dtype == DType::kBF16) return forward_t<__nv_bfloat16>(out, u, inp, a, b, scale, spans, d);
#endif
    forward_t<float>(out, u, inp, a, b, scale, spans, d);
}

void lora_backward(Tensor dinp, Tensor da, Tensor db, Tensor du, Tensor dout, Tensor u, Tensor inp, Tensor a, Tensor b,
                   float scale, const std::vector<LoraSpan>& spans) {
    const char* op = "lora_backward";
    const LoraDims d = check_lora(op, dout, u, inp, a, b, spans);
    LLMT_INTERNAL_CHECK(!dinp.empty() && dinp.numel() == inp.numel() && dinp.dtype == inp.dtype &&
                            du.numel() == u.numel() && du.dtype == u.dtype,
                        "{}: dinp {} / du {} must match inp {} / u {}", op, dinp.describe(), du.describe(),
                        inp.describe(), u.describe());
    LLMT_INTERNAL_CHECK(da.numel() == a.numel() && db.numel() == b.numel() && da.dtype == DType::kF32 &&
                            db.dtype == DType::kF32,
                        "{}: da {} and db {} must be f32 like a {} and b {}", op, da.describe(), db.describe(),
                        a.describe(), b.describe());
    for (const Tensor* t : {&dinp, &da, &db, &du})
        LLMT_INTERNAL_CHECK(t->device == inp.device, "{}: tensors on different devices", op);
#if LLMT_CUDA_ENABLED
    if (inp.dtype == DType::kBF16)
        return backward_t<__nv_bfloat16>(dinp, da, db, du, dout, u, inp, a, b, scale, spans, d);
#endif
    backward_t<float>(dinp, da, db, du, dout, u, inp, a, b, scale, spans, d);
}

}  // namespace llmt::kernels
