// Times our bf16 causal flash attention (kernels/cuda/flash_attention.h), forward and backward separately,
// with CUDA events: median over --iters runs after --warmup runs, on random bf16 inputs (never zeros).
// FLOPs follow FlashAttention's convention: forward 4*B*NH*T^2*hs / 2 (causal), backward 2.5x that.
// Prints one human line and, with --json FILE, {"fwd_ms", "bwd_ms", "fwd_tflops", "bwd_tflops", ...}.
// --impl cudnn times cuDNN's fused attention through our backend-API graph (kernels/cuda/cudnn_attention.h)
// the same way instead (variant "cudnn"); exit code 3 when cuDNN is missing or refuses the shape.
// --KV: key/value heads (grouped-query attention, NH % KV == 0; default NH); FLOPs count the NH query heads.
// --packed L1,L2,...: packed examples (attention that does not cross them; the flash kernels' positions): every
// row holds examples of lengths L1, L2, ... repeated until T is full (the last one cut to fit). The FLOPs are
// then those of the examples' own causal blocks (sum of len^2 instead of T^2), so TFLOP/s stays comparable;
// "packed" in the output names the lengths. cuDNN has no packed path here (--impl cudnn refuses it).
// --window W: a sliding window of W keys (Mistral's; src's flash kernels at their default tile shapes, which visit
// only the key tiles inside it). FLOPs: those of the keys inside the window (row t: min(t + 1, W) keys), so
// TFLOP/s stays comparable and the time should fall roughly as W / (T / 2).
// Usage: attention_gpu_bench [--B 16] [--T 1024] [--NH 12] [--KV NH] [--hs 64] [--iters 50] [--warmup 10]
//                            [--json F] [--impl flash|cudnn] [--packed L1,L2,...] [--window W]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "flash_attention_lab.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/runtime.h"
#if LLMT_HAVE_CUDNN_ATTENTION
#include "kernels/cuda/cudnn_attention.h"
#endif

namespace {

// The kernel lab's flash attention: src's kernels, on the tile shape LLMT_FLASH_* picks (src's by default).
using llmt::lab::flash_attention_backward;
using llmt::lab::flash_attention_forward;

uint16_t to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

__nv_bfloat16* random_device_bf16(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<uint16_t> h(n);
    for (auto& x : h) x = to_bf16(d(rng));
    void* p = nullptr;
    LLMT_CUDA_CHECK(cudaMalloc(&p, n * 2));
    LLMT_CUDA_CHECK(cudaMemcpy(p, h.data(), n * 2, cudaMemcpyHostToDevice));
    return static_cast<__nv_bfloat16*>(p);
}

template <typename F>
double median_ms(int warmup, int iters, cudaStream_t s, F&& f) {
    for (int i = 0; i < warmup; i++) f();
    std::vector<cudaEvent_t> ev(2 * iters);
    for (auto& e : ev) LLMT_CUDA_CHECK(cudaEventCreate(&e));
    for (int i = 0; i < iters; i++) {
        LLMT_CUDA_CHECK(cudaEventRecord(ev[2 * i], s));
        f();
        LLMT_CUDA_CHECK(cudaEventRecord(ev[2 * i + 1], s));
    }
    LLMT_CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<double> ms(iters);
    for (int i = 0; i < iters; i++) {
        float t = 0;
        LLMT_CUDA_CHECK(cudaEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]));
        ms[i] = t;
    }
    for (auto& e : ev) cudaEventDestroy(e);
    std::sort(ms.begin(), ms.end());
    return ms[iters / 2];
}

// Hugging Face position_ids of one row of T: examples of the given lengths, repeated, the last cut at T.
// Adds sum(len^2) over the row's examples to *sq.
std::vector<int32_t> packed_row(const std::vector<int>& lengths, int T, double* sq) {
    std::vector<int32_t> pos;
    *sq = 0;
    for (size_t i = 0; static_cast<int>(pos.size()) < T; i = (i + 1) % lengths.size()) {
        const int len = std::min(lengths[i], T - static_cast<int>(pos.size()));
        for (int p = 0; p < len; p++) pos.push_back(p);
        *sq += static_cast<double>(len) * len;
    }
    return pos;
}

std::vector<int> parse_lengths(const std::string& s) {
    std::vector<int> v;
    size_t i = 0;
    while (i <= s.size()) {
        const size_t j = std::min(s.find(',', i), s.size());
        const int len = std::atoi(s.substr(i, j - i).c_str());
        if (len < 1) throw std::runtime_error("--packed: lengths must be positive integers, got '" + s + "'");
        v.push_back(len);
        i = j + 1;
    }
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    int B = 16, T = 1024, NH = 12, KV = 0, hs = 64, iters = 50, warmup = 10, window = 0;
    std::string json, impl = "flash", packed;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        const char* v = argv[i + 1];
        if (a == "--B") B = std::atoi(v);
        else if (a == "--T") T = std::atoi(v);
        else if (a == "--NH") NH = std::atoi(v);
        else if (a == "--KV") KV = std::atoi(v);
        else if (a == "--hs") hs = std::atoi(v);
        else if (a == "--iters") iters = std::max(1, std::atoi(v));
        else if (a == "--warmup") warmup = std::atoi(v);
        else if (a == "--json") json = v;
        else if (a == "--impl") impl = v;
        else if (a == "--packed") packed = v;
        else if (a == "--window") window = std::atoi(v);
        else {
            std::fprintf(stderr, "unknown argument %s\n", a.c_str());
            return 2;
        }
    }
    if (KV <= 0) KV = NH;
    try {
        const int C = NH * hs;
        const size_t n_qkv = static_cast<size_t>(B) * T * (C + 2 * KV * hs), n_out = static_cast<size_t>(B) * T * C;
        cudaStream_t s = llmt::kernels::cuda::stream();
        __nv_bfloat16* qkv = random_device_bf16(n_qkv, 1);
        __nv_bfloat16* dout = random_device_bf16(n_out, 2);
        __nv_bfloat16 *out = nullptr, *dqkv = nullptr;
        float* lse = nullptr;
        LLMT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&out), n_out * 2));
        LLMT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dqkv), n_qkv * 2));
        LLMT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&lse), static_cast<size_t>(B) * NH * T * 4));
        int32_t* pos = nullptr;  // packed examples' positions (B,T), or null
        double causal_sq = static_cast<double>(T) * T;  // sum of the examples' len^2 per row
        if (!packed.empty()) {
            const std::vector<int32_t> row = packed_row(parse_lengths(packed), T, &causal_sq);
            std::vector<int32_t> all;
            for (int b = 0; b < B; b++) all.insert(all.end(), row.begin(), row.end());
            LLMT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&pos), all.size() * 4));
            LLMT_CUDA_CHECK(cudaMemcpy(pos, all.data(), all.size() * 4, cudaMemcpyHostToDevice));
        }

        if (window > 0) {
            if (pos || impl != "flash") {
                std::fprintf(stderr, "attention_gpu_bench: --window runs the flash kernels alone (no --packed)\n");
                return 3;
            }
            causal_sq = 0;  // twice the keys inside the windows, as T^2 is twice the causal triangle
            for (int t = 0; t < T; t++) causal_sq += 2.0 * std::min(t + 1, window);
        }

        double fwd = 0, bwd = 0;
        std::string variant;
        if (window > 0) {
            using llmt::kernels::cuda::flash_attention_backward;
            using llmt::kernels::cuda::flash_attention_forward;
            fwd = median_ms(warmup, iters, s, [&] {
                flash_attention_forward(out, lse, qkv, B, T, C, NH, KV, s, nullptr, window);
            });
            bwd = median_ms(warmup, iters, s, [&] {
                flash_attention_backward(dqkv, dout, qkv, out, lse, B, T, C, NH, KV, s, nullptr, nullptr, window);
            });
            variant = "src window " + std::to_string(window);
        } else if (impl == "cudnn" && pos) {
            std::fprintf(
                stderr,
                "attention_gpu_bench: --packed runs the flash kernels only (cuDNN has no per-row bounds here)\n");
            return 3;
        } else if (impl == "cudnn") {
#if LLMT_HAVE_CUDNN_ATTENTION
            // One untimed call each first: it builds and caches the plan (cuDNN compiles its kernel then).
            const bool ok =
                llmt::kernels::cuda::cudnn_attention_forward(out, lse, qkv, B, T, C, NH, KV, s) &&
                llmt::kernels::cuda::cudnn_attention_backward(dqkv, dout, qkv, out, lse, B, T, C, NH, KV, s);
            if (!ok) {
                std::fprintf(stderr, "attention_gpu_bench: cuDNN attention not available for this shape\n");
                return 3;
            }
            using llmt::kernels::cuda::cudnn_attention_backward;
            using llmt::kernels::cuda::cudnn_attention_forward;
            fwd = median_ms(warmup, iters, s, [&] { cudnn_attention_forward(out, lse, qkv, B, T, C, NH, KV, s); });
            bwd = median_ms(warmup, iters, s,
                            [&] { cudnn_attention_backward(dqkv, dout, qkv, out, lse, B, T, C, NH, KV, s); });
            variant = "cudnn";
#else
            std::fprintf(stderr, "attention_gpu_bench: built without cuDNN attention (no cudnn_graph.h)\n");
            return 3;
#endif
        } else if (impl == "flash") {
            fwd = median_ms(warmup, iters, s,
                            [&] { flash_attention_forward(out, lse, qkv, B, T, C, NH, KV, s, pos); });
            bwd = median_ms(warmup, iters, s, [&] {
                flash_attention_backward(dqkv, dout, qkv, out, lse, B, T, C, NH, KV, s, nullptr, pos);
            });
        } else {
            std::fprintf(stderr, "unknown --impl %s (flash or cudnn)\n", impl.c_str());
            return 2;
        }
        const double fwd_flop = 4.0 * B * NH * causal_sq * hs / 2.0, bwd_flop = 2.5 * fwd_flop;
        const double fwd_tf = fwd_flop / (fwd * 1e-3) / 1e12, bwd_tf = bwd_flop / (bwd * 1e-3) / 1e12;
        // Tile-shape variant under test (bench/kernels/flash_attention_lab.h; unset = src's shapes).
        const char* fv = std::getenv("LLMT_FLASH_FWD_VARIANT");
        const char* bv = std::getenv("LLMT_FLASH_BWD_VARIANT");
        const char* gv = std::getenv("LLMT_FLASH_GROUP");
        const char* hv = std::getenv("LLMT_FLASH_HPB");
        if (variant.empty())
            variant = std::string("f") + (fv ? fv : "d") + "b" + (bv ? bv : "d") + "g" + (gv ? gv : "d") +
                      (hv ? std::string("h") + hv : std::string());
        if (pos) variant += " packed " + packed;
        cudaDeviceProp prop{};
        LLMT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
        std::printf("ours (llmt %s bf16, variant %s) on %s: B=%d T=%d NH=%d KV=%d hs=%d  fwd %.3f ms "
                    "%.1f TFLOP/s  bwd %.3f ms %.1f TFLOP/s\n",
                    impl == "cudnn" ? "cudnn_attention" : "flash_attention", variant.c_str(), prop.name, B, T, NH, KV,
                    hs, fwd, fwd_tf, bwd, bwd_tf);
        if (!json.empty()) {
            FILE* f = std::fopen(json.c_str(), "w");
            if (!f) {
                std::fprintf(stderr, "cannot write %s\n", json.c_str());
                return 1;
            }
            std::fprintf(
                f,
                "{\"variant\": \"%s\", \"device\": \"%s\", \"B\": %d, \"T\": %d, \"NH\": %d, \"KV\": %d, "
                "\"hs\": %d, \"fwd_ms\": %.5f, \"bwd_ms\": %.5f, \"fwd_tflops\": %.2f, \"bwd_tflops\": %.2f}\n",
                variant.c_str(), prop.name, B, T, NH, KV, hs, fwd, bwd, fwd_tf, bwd_tf);
            std::fclose(f);
        }
        cudaFree(qkv);
        cudaFree(dout);
        cudaFree(out);
        cudaFree(dqkv);
        cudaFree(lse);
        cudaFree(pos);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "attention_gpu_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
