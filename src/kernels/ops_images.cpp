// Validation and device dispatch of kernels/ops.h's gather_images and upload_bytes.
#include <climits>
#include <cstring>

#include "core/check.h"
#include "kernels/cpu/image_gather.h"
#include "kernels/ops.h"
#include "kernels/ops_check.h"

#if LLMT_CUDA_ENABLED
#include "kernels/cuda/image_gather.h"
#include "kernels/cuda/runtime.h"
#endif

namespace llmt::kernels {

using namespace ops_check;  // NOLINT(google-build-using-namespace): the shared helpers of every ops*.cpp

void gather_images(Tensor out, const ImageTable& table, Tensor refs, const float* lut) {
    const char* op = "gather_images";
    const Device dev = check_device(op, {{"out", out}, {"refs", refs}});
    check_shape(op, "out", out, {-1, table.H, table.W, table.C});
    check_dtype(op, "out", out, DType::kF32);
    const int64_t B = out.dim(0);
    check_shape(op, "refs", refs, {B, 4});
    check_dtype(op, "refs", refs, DType::kI32);
    LLMT_INTERNAL_CHECK(table.pixels && table.images > 0 && lut, "{}: no image table or lookup table", op);
    LLMT_INTERNAL_CHECK(out.numel() <= INT_MAX, "{}: {} values exceed the kernels' int indices", op, out.numel());
    const auto* r = static_cast<const ImageRef*>(refs.data);
    LLMT_ON_CUDA(dev, gather_images(static_cast<float*>(out.data), table, r, as_int(op, "B", B), lut, cuda::stream()));
    cpu::gather_images(static_cast<float*>(out.data), table, r, as_int(op, "B", B), lut);
}

void upload_bytes(Device device, void* dst, const void* src, size_t bytes) {
    if (bytes == 0) return;
    if (device == Device::kCpu) {
        std::memcpy(dst, src, bytes);
        return;
    }
#if LLMT_CUDA_ENABLED
    cuda::copy(dst, src, bytes);
#else
    throw DeviceError("upload_bytes: built without CUDA");
#endif
}

}  // namespace llmt::kernels
