// Validation and device dispatch of kernels/ops.h's image ops: conv2d, maxpool2d, relu (NHWC activations).
#include <cstdint>

#include "core/check.h"
#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/maxpool.h"
#include "kernels/cpu/pixels.h"
#include "kernels/cpu/relu.h"
#include "kernels/ops.h"
#include "kernels/ops_check.h"

#if LLMT_CUDA_ENABLED
#include "kernels/cuda/conv.h"
#include "kernels/cuda/conv_pool.h"
#include "kernels/cuda/pixels.h"
#endif

namespace llmt::kernels {

using namespace ops_check;  // NOLINT(google-build-using-namespace): the shared helpers of every ops*.cpp

namespace {

// The conv's shape from inp (B,H,W,C), weight (OC,KH,KW,C) and the geometry; checks out/dout (B,OH,OW,OC)
// and cols (B*OH*OW, KH*KW*C).
ConvShape check_conv(const char* op, const Tensor& inp, const Tensor& weight, const Tensor& out,
                          const char* out_name, const Tensor& cols, const Conv2dGeom& g) {
    LLMT_INTERNAL_CHECK(g.kh >= 1 && g.kw >= 1 && g.stride >= 1 && g.pad >= 0,
                        "{}: geometry kh={} kw={} stride={} pad={} is invalid (kh, kw, stride >= 1, pad >= 0)", op,
                        g.kh, g.kw, g.stride, g.pad);
    check_shape(op, "inp", inp, {-1, -1, -1, -1});
    const int64_t B = inp.dim(0), H = inp.dim(1), W = inp.dim(2), C = inp.dim(3);
    check_shape(op, "weight", weight, {-1, g.kh, g.kw, C});
    const int64_t OC = weight.dim(0);
    const int64_t OH = conv_out_extent(H, g.kh, g.stride, g.pad), OW = conv_out_extent(W, g.kw, g.stride, g.pad);
    LLMT_INTERNAL_CHECK(OH > 0 && OW > 0, "{}: a {}x{} window with pad {} does not fit a {}x{} input", op, g.kh,
                        g.kw, g.pad, H, W);
    check_shape(op, out_name, out, {B, OH, OW, OC});
    check_shape(op, "cols", cols, {B * OH * OW, int64_t{g.kh} * g.kw * C});
    return {as_int(op, "B", B),   as_int(op, "H", H),   as_int(op, "W", W), as_int(op, "C", C),
            as_int(op, "OH", OH), as_int(op, "OW", OW), as_int(op, "OC", OC), g};
}

// inp (B,H,W,C) pooled to other (B,OH,OW,C); argmax (B,OH,OW,C) i32.
PoolShape check_pool(const char* op, const Tensor& inp, const char* inp_name, const Tensor& other,
                          const char* other_name, const Tensor& argmax, int k, int stride) {
    LLMT_INTERNAL_CHECK(k >= 1 && stride >= 1, "{}: k = {} and stride = {} must be >= 1", op, k, stride);
    check_shape(op, inp_name, inp, {-1, -1, -1, -1});
    const int64_t B = inp.dim(0), H = inp.dim(1), W = inp.dim(2), C = inp.dim(3);
    LLMT_INTERNAL_CHECK(H >= k && W >= k, "{}: a {}x{} window does not fit a {}x{} input", op, k, k, H, W);
    const int64_t OH = (H - k) / stride + 1, OW = (W - k) / stride + 1;
    check_shape(op, other_name, other, {B, OH, OW, C});
    check_shape(op, "argmax", argmax, {B, OH, OW, C});
    check_dtype(op, "argmax", argmax, DType::kI32);
    LLMT_INTERNAL_CHECK(H * W <= INT32_MAX, "{}: {}x{} positions do not fit argmax's i32", op, H, W);
    return {as_int(op, "B", B),   as_int(op, "H", H),   as_int(op, "W", W), as_int(op, "C", C),
            as_int(op, "OH", OH), as_int(op, "OW", OW), k, stride};
}

}  // namespace

void normalize_pixels(Tensor out, Tensor pixels, const float* table) {
    const char* op = "normalize_pixels";
    const Device dev = check_device(op, {{"out", out}, {"pixels", pixels}});
    check_present(op, "out", out);
    check_present(op, "pixels", pixels);
    LLMT_INTERNAL_CHECK(out.numel() == pixels.numel(), "{}: 'pixels' has {} elements, 'out' {}", op, pixels.numel(),
                        out.numel());
    check_dtype(op, "out", out, DType::kF32);
    check_dtype(op, "pixels", pixels, DType::kI32);
    LLMT_INTERNAL_CHECK(table != nullptr, "{}: the table is missing", op);
    const auto n = static_cast<size_t>(out.numel());
    LLMT_ON_CUDA(dev, normalize_pixels(f(out), ids(pixels), n, table, cuda::stream()));
    cpu::normalize_pixels(f(out), ids(pixels), n, table);
}

void conv2d_forward(Tensor out, Tensor cols, Tensor inp, Tensor weight, Tensor bias, const Conv2dGeom& g, bool tf32) {
    const char* op = "conv2d_forward";
    const Device dev =
        check_device(op, {{"out", out}, {"cols", cols}, {"inp", inp}, {"weight", weight}, {"bias", bias}});
    const ConvShape s = check_conv(op, inp, weight, out, "out", cols, g);
    if (!bias.empty()) check_shape(op, "bias", bias, {s.OC});
    const DType dt =
        check_act(op, dev, {{"out", out}, {"cols", cols}, {"inp", inp}, {"weight", weight}, {"bias", bias}});
    LLMT_ON_CUDA_T(dev, dt, cuda::conv2d_forward(p<E>(out), p<E>(cols), p<E>(inp), p<E>(weight),
                                                 bias.empty() ? nullptr : p<E>(bias), s, cuda::stream(), tf32));
    (void)tf32;
    cpu::conv2d_forward(f(out), f(cols), f(inp), f(weight), bias.empty() ? nullptr : f(bias), s);
}

void conv2d_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor cols, Tensor inp, Tensor weight,
                     const Conv2dGeom& g, bool tf32) {
    const char* op = "conv2d_backward";
    const Device dev = check_device(op, {{"dinp", dinp}, {"dweight", dweight}, {"dbias", dbias}, {"dout", dout},
                                         {"cols", cols}, {"inp", inp}, {"weight", weight}});
    const ConvShape s = check_conv(op, inp, weight, dout, "dout", cols, g);
    if (!dinp.empty()) check_shape(op, "dinp", dinp, {s.B, s.H, s.W, s.C});
    if (!dweight.empty()) check_shape(op, "dweight", dweight, {s.OC, g.kh, g.kw, s.C});
    if (!dbias.empty()) check_shape(op, "dbias", dbias, {s.OC});
    check_f32(op, {{"dweight", dweight}, {"dbias", dbias}});
    const DType dt = check_act(op, dev, {{"dinp", dinp}, {"dout", dout}, {"cols", cols}, {"inp", inp},
                                         {"weight", weight}});
    LLMT_ON_CUDA_T(dev, dt, cuda::conv2d_backward(dinp.empty() ? nullptr : p<E>(dinp),
                                                  dweight.empty() ? nullptr : f(dweight),
                                                  dbias.empty() ? nullptr : f(dbias), p<E>(dout), p<E>(cols),
                                                  p<E>(weight), s, cuda::stream(), tf32));
    (void)tf32;
    cpu::conv2d_backward(dinp.empty() ? nullptr : f(dinp), dweight.empty() ? nullptr : f(dweight),
                         dbias.empty() ? nullptr : f(dbias), f(dout), f(cols), f(weight), s);
}

void conv2d_im2col(Tensor cols, Tensor inp, const Conv2dGeom& g) {
    const char* op = "conv2d_im2col";
    const Device dev = check_device(op, {{"cols", cols}, {"inp", inp}});
    check_shape(op, "inp", inp, {-1, -1, -1, -1});
    const int64_t B = inp.dim(0), H = inp.dim(1), W = inp.dim(2), C = inp.dim(3);
    const int64_t OH = conv_out_extent(H, g.kh, g.stride, g.pad), OW = conv_out_extent(W, g.kw, g.stride, g.pad);
    LLMT_INTERNAL_CHECK(OH > 0 && OW > 0, "{}: a {}x{} window with pad {} does not fit a {}x{} input", op, g.kh,
                        g.kw, g.pad, H, W);
    check_shape(op, "cols", cols, {B * OH * OW, int64_t{g.kh} * g.kw * C});
    const ConvShape s{as_int(op, "B", B),   as_int(op, "H", H),   as_int(op, "W", W), as_int(op, "C", C),
                      as_int(op, "OH", OH), as_int(op, "OW", OW), 1,                  g};
    const DType dt = check_act(op, dev, {{"cols", cols}, {"inp", inp}});
    LLMT_ON_CUDA_T(dev, dt, cuda::conv2d_im2col(p<E>(cols), p<E>(inp), s, cuda::stream()));
    cpu::im2col(f(cols), f(inp), s);
}

bool conv_pool_relu_forward(Tensor pooled, Tensor argmax, Tensor conv_out, Tensor cols, Tensor inp, Tensor weight,
                            Tensor bias, const Conv2dGeom& g, bool keep_argmax, bool tf32) {
    const char* op = "conv_pool_relu_forward";
    const Device dev = check_device(op, {{"pooled", pooled}, {"argmax", argmax}, {"conv_out", conv_out},
                                         {"cols", cols}, {"inp", inp}, {"weight", weight}, {"bias", bias}});
#if LLMT_CUDA_ENABLED
    if (dev == Device::kCuda && inp.dtype == DType::kF32) {
        const ConvShape s = check_conv(op, inp, weight, conv_out, "conv_out", cols, g);
        if (cuda::conv_pool_relu_fits(s)) {
            check_pool(op, conv_out, "conv_out", pooled, "pooled", argmax, 2, 2);
            if (!bias.empty()) check_shape(op, "bias", bias, {s.OC});
            check_act(op, dev, {{"pooled", pooled}, {"inp", inp}, {"weight", weight}, {"bias", bias}});
            cuda::conv_pool_relu_forward(f(pooled), keep_argmax ? p<int32_t>(argmax) : nullptr, f(inp), f(weight),
                                         bias.empty() ? nullptr : f(bias), s, tf32, cuda::stream());
            return false;
        }
    }
#endif
    (void)keep_argmax;
    conv2d_forward(conv_out, cols, inp, weight, bias, g, tf32);
    maxpool2d_forward(pooled, argmax, conv_out, 2, 2);
    relu_forward(pooled, pooled);
    return true;
}

void maxpool2d_forward(Tensor out, Tensor argmax, Tensor inp, int k, int stride) {
    const char* op = "maxpool2d_forward";
    const Device dev = check_device(op, {{"out", out}, {"argmax", argmax}, {"inp", inp}});
    const PoolShape s = check_pool(op, inp, "inp", out, "out", argmax, k, stride);
    const DType dt = check_act(op, dev, {{"out", out}, {"inp", inp}});
    LLMT_ON_CUDA_T(dev, dt, cuda::maxpool2d_forward(p<E>(out), p<int32_t>(argmax), p<E>(inp), s, cuda::stream()));
    cpu::maxpool2d_forward(f(out), p<int32_t>(argmax), f(inp), s);
}

void maxpool2d_backward(Tensor dinp, Tensor dout, Tensor argmax, int k, int stride) {
    const char* op = "maxpool2d_backward";
    const Device dev = check_device(op, {{"dinp", dinp}, {"dout", dout}, {"argmax", argmax}});
    const PoolShape s = check_pool(op, dinp, "dinp", dout, "dout", argmax, k, stride);
    const DType dt = check_act(op, dev, {{"dinp", dinp}, {"dout", dout}});
    LLMT_ON_CUDA_T(dev, dt, cuda::maxpool2d_backward(p<E>(dinp), p<E>(dout), p<int32_t>(argmax), s, cuda::stream()));
    cpu::maxpool2d_backward(f(dinp), f(dout), p<int32_t>(argmax), s);
}

void relu_forward(Tensor out, Tensor inp) {
    const char* op = "relu_forward";
    const Device dev = check_device(op, {{"out", out}, {"inp", inp}});
    const DType dt = check_same_numel(op, {{"out", out}, {"inp", inp}});
    LLMT_ON_CUDA_T(dev, dt,
                   cuda::relu_forward(p<E>(out), p<E>(inp), static_cast<size_t>(inp.numel()), cuda::stream()));
    cpu::relu_forward(f(out), f(inp), static_cast<size_t>(inp.numel()));
}

void relu_backward(Tensor dinp, Tensor dout, Tensor out) {
    const char* op = "relu_backward";
    const Device dev = check_device(op, {{"dinp", dinp}, {"dout", dout}, {"out", out}});
    const DType dt = check_same_numel(op, {{"dinp", dinp}, {"dout", dout}, {"out", out}});
    LLMT_ON_CUDA_T(dev, dt, cuda::relu_backward(p<E>(dinp), p<E>(dout), p<E>(out), static_cast<size_t>(out.numel()),
                                                cuda::stream()));
    cpu::relu_backward(f(dinp), f(dout), f(out), static_cast<size_t>(out.numel()));
}

}  // namespace llmt::kernels
