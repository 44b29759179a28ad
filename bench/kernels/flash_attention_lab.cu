// Kernel lab: every tile shape of the flash attention kernels (flash_attention_lab.h).
#include "flash_attention_lab.h"

#include <cstdlib>

#include "kernels/cuda/flash_attention_kernels.cuh"

namespace llmt::lab {
namespace {

using kernels::cuda::flash::bf16;
namespace flash = kernels::cuda::flash;

int env_digit(const char* name, int dflt) {
    const char* e = std::getenv(name);
    if (!e || *e < '0' || *e > '3') return dflt;
    return *e - '0';
}

int group_for(const FlashShape& shape, int n_heads) {
    return shape.group > 0 ? shape.group : flash::default_group_heads(n_heads);
}

}  // namespace

FlashShape flash_shape_from_env() {
    FlashShape s;
    s.fwd = env_digit("LLMT_FLASH_FWD_VARIANT", s.fwd);
    s.bwd = env_digit("LLMT_FLASH_BWD_VARIANT", s.bwd);
    if (const char* g = std::getenv("LLMT_FLASH_GROUP")) s.group = std::atoi(g);
    if (const char* h = std::getenv("LLMT_FLASH_HPB")) s.hpb = std::atoi(h);
    return s;
}

void flash_attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH, int KV,
                             cudaStream_t s, const int32_t* pos) {
    const void* ptrs[] = {out, lse, qkv};
    const int hs = flash::check_args("flash_attention_forward", ptrs, 3, B, T, C, NH, KV);
    const FlashShape shape = flash_shape_from_env();
    const int v = shape.fwd, g = group_for(shape, B * NH);
    if (hs == 64) {
        if (v == 0) flash::launch_forward<64, 4, 64>(out, lse, qkv, B, T, C, NH, KV, s, g, pos);
        else if (v == 1) flash::launch_forward<64, 4, 128>(out, lse, qkv, B, T, C, NH, KV, s, g, pos);
        else if (v == 2) flash::launch_forward<64, 8, 64>(out, lse, qkv, B, T, C, NH, KV, s, g, pos);
        else flash::launch_forward<64, 8, 128>(out, lse, qkv, B, T, C, NH, KV, s, g, pos);
    } else {
        if (v == 2) flash::launch_forward<128, 8, 64>(out, lse, qkv, B, T, C, NH, KV, s, g, pos);
        else flash::launch_forward<128, 4, 64>(out, lse, qkv, B, T, C, NH, KV, s, g, pos);
    }
}

void flash_attention_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse, int B,
                              int T, int C, int NH, int KV, cudaStream_t s, float* dcol, const int32_t* pos) {
    const void* ptrs[] = {dqkv, dout, qkv, out, lse};
    const int hs = flash::check_args("flash_attention_backward", ptrs, 5, B, T, C, NH, KV);
    const FlashShape shape = flash_shape_from_env();
    const int v = shape.bwd, g = shape.group, hpb = shape.hpb;  // 0: src's rules (launch_backward)
    if (hs == 64) {
        if (v == 0)
            flash::launch_backward<64, 4, 64>(dqkv, dout, qkv, out, lse, B, T, C, NH, KV, s, dcol, g, hpb, pos);
        else if (v == 1)
            flash::launch_backward<64, 8, 64>(dqkv, dout, qkv, out, lse, B, T, C, NH, KV, s, dcol, g, hpb, pos);
        else if (v == 2)
            flash::launch_backward<64, 8, 32>(dqkv, dout, qkv, out, lse, B, T, C, NH, KV, s, dcol, g, hpb, pos);
        else flash::launch_backward<64, 4, 32>(dqkv, dout, qkv, out, lse, B, T, C, NH, KV, s, dcol, g, hpb, pos);
    } else {
        if (v == 1)
            flash::launch_backward<128, 8, 32>(dqkv, dout, qkv, out, lse, B, T, C, NH, KV, s, dcol, g, hpb, pos);
        else flash::launch_backward<128, 4, 32>(dqkv, dout, qkv, out, lse, B, T, C, NH, KV, s, dcol, g, hpb, pos);
    }
}

}  // namespace llmt::lab
