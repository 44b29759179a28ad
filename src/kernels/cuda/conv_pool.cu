// The fused CNN block forward (cuda/conv_pool.h): implicit GEMM on the tensor cores, TF32 or 3xTF32.
//
// A block owns a 32- or 64-channel slice of OC, whose weights it stages in shared memory once, and walks
// work items (one image's band of pooled rows; the grid is as many blocks as fit on the GPU at once, so
// weights are not re-read per item). Per item it stages the band's input rows plus the 1-pixel halo
// (cp.async, zero-filled outside the image; the next item's while this one computes when two tiles fit),
// then each warp computes m-tiles of 16 output pixels x 8 channels with mma.sync m16n8k8 (TF32 in, fp32
// accumulate). An m-tile is two conv rows (2 py, 2 py + 1) x 8 adjacent columns, laid out so that a
// thread's accumulator rows g and g + 8 are vertical neighbours and the lane 4 away holds the horizontal
// neighbour: each 2x2 pooling window is then one register max plus one shuffle, with no shared-memory
// round trip and no convolution output written. Bias, the window's first maximum (maxpool2d_forward's
// scan order and NaN rule) and ReLU (relu_forward's x < 0 ? 0 : x) follow in registers.
// When C % 8 == 0, each 8-wide k step is permuted (the same way for both operands, which a sum allows):
// the thread that holds fragment k indices t and t + 4 takes taps' channels 2t and 2t + 1, adjacent in
// shared memory, so each A row and each B column is one 8-byte load instead of two 4-byte ones.
// Shared-memory strides are padded so fragment loads hit distinct banks (padded_stride).
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>

#include "core/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/conv_pool.h"
#include "kernels/cuda/flash_common.cuh"  // the cp.async wrappers
#include "kernels/cuda/runtime.h"

namespace llmt::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMTiles = 2;                      // m-tiles a warp carries at once (reusing each B fragment)
constexpr size_t kSmemBudget = 110 * 1024;      // two blocks per SM on an H100 (228 KB of shared memory)

// One convolution's launch geometry.
struct Plan {
    int nt = 0;                 // n-tiles of 8 channels per block: 8 or 4 (0: the kernel does not take it)
    int pairs = 0, bands = 0;   // pooled rows per block, blocks per image
    int chunks = 0;             // 8-column chunks per conv row: ceil(2 OW / 8)
    int tw = 0, cs = 0;         // input tile: columns (chunks * 8 + the halo), floats per pixel
    int kpad = 0, ks = 0;       // K rounded up to 8; a weight row's stride in shared memory
    int buffers = 1;            // input tiles: 2 when both fit, the next item's then loading during this one
    bool vec_inp = false, vec_w = false;  // 16-byte copies: C (K) a multiple of 4 and the buffer 16-byte aligned
    size_t smem = 0;
};

__host__ __device__ size_t tile_floats(const Plan& p) { return static_cast<size_t>(2 * p.pairs + 2) * p.tw * p.cs; }

size_t smem_bytes(const Plan& p) {
    const size_t weights = static_cast<size_t>(p.nt) * 8 * p.ks;
    return (p.buffers * tile_floats(p) + weights) * sizeof(float) + static_cast<size_t>(p.kpad) * sizeof(int);
}

// The smallest multiple of 8 >= n that is 8 or 24 (mod 32) floats: eight-byte fragment loads of 4 rows x
// 4 threads (a half warp) then cover the 32 banks once.
int padded_stride(int n) {
    int v = (n + 7) / 8 * 8;
    while (v % 32 != 8 && v % 32 != 24) v += 8;
    return v;
}

// A work item is one round of the block's warps (kWarps * kMTiles m-tiles: pooled rows x column chunks),
// so small layers still spread over many blocks; fewer rows when the tile and the weight slice would not
// fit kSmemBudget. 64-channel weight slices when OC allows, else 32.
Plan plan_for(const ConvShape& s) {
    const Conv2dGeom& g = s.g;
    const int OH = s.H / 2, OW = s.W / 2;
    if (g.kh != 3 || g.kw != 3 || g.pad != 1 || g.stride != 1 || s.OH != s.H || s.OW != s.W || OH < 1 || OW < 1 ||
        s.OC % 32 != 0 || s.C < 1)
        return {};
    Plan base;
    base.chunks = (2 * OW + 7) / 8;
    base.tw = 8 * base.chunks + 2;
    base.kpad = (9 * s.C + 7) / 8 * 8;
    if (s.C % 8 == 0) {  // paired k (kernel comment): 8-byte loads, strides = 8 or 24 (mod 32) floats
        base.cs = padded_stride(s.C);
        base.ks = padded_stride(base.kpad);
    } else {  // 4-byte loads, a row per g: strides = 4 (mod 8) spread the 8 rows over the banks
        base.cs = s.C;
        base.ks = base.kpad + 4;
    }
    const int round = std::min(OH, std::max(1, kWarps * kMTiles / base.chunks));
    for (int nt : {8, 4}) {
        if (s.OC % (8 * nt) != 0) continue;
        for (int pairs = round; pairs >= 1; --pairs) {
            Plan p = base;
            p.nt = nt;
            p.pairs = pairs;
            p.bands = (OH + pairs - 1) / pairs;
            p.smem = smem_bytes(p);
            if (p.smem > kSmemBudget) continue;
            Plan two = p;
            two.buffers = 2;
            two.smem = smem_bytes(two);
            return two.smem <= kSmemBudget ? two : p;
        }
    }
    return {};
}

__device__ __forceinline__ uint32_t to_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

// x = hi + lo, both TF32 (hi keeps 10 mantissa bits, lo the next 11 of the remainder); TF32 alone (!kExact):
// hi only.
template <bool kExact>
__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
    hi = to_tf32(x);
    if constexpr (kExact) lo = to_tf32(x - __uint_as_float(hi));
}

// d += a (16x8, row) @ b (8x8, col). Not volatile: the compiler may interleave independent products.
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

using flash::cp_async16;
using flash::cp_async4;

// The weight rows n0 .. n0 + 8 NT - 1 zero-padded to kpad, and koff[k] = tap k's offset in the input tile.
template <int NT>
__device__ void stage_weights(float* ws, int* koff, const float* weight, const ConvShape& s, const Plan& p, int n0) {
    const int K = 9 * s.C;
    if (p.vec_w) {  // K % 4 == 0: a 4-float chunk is wholly inside K or wholly padding
        const int k4 = p.kpad / 4;
        for (int i = threadIdx.x; i < NT * 8 * k4; i += blockDim.x) {
            const int o = i / k4, k = 4 * (i % k4);
            cp_async16(ws + o * p.ks + k, weight + static_cast<long>(n0 + o) * K + (k < K ? k : 0), k < K);
        }
    } else {
        for (int i = threadIdx.x; i < NT * 8 * p.kpad; i += blockDim.x) {
            const int o = i / p.kpad, k = i % p.kpad;
            cp_async4(ws + o * p.ks + k, weight + static_cast<long>(n0 + o) * K + (k < K ? k : 0), k < K);
        }
    }
    for (int k = threadIdx.x; k < p.kpad; k += blockDim.x) {
        const int tap = k / s.C;
        koff[k] = k < K ? ((tap / 3) * p.tw + tap % 3) * p.cs + k % s.C : 0;  // padded k: weight 0, any input
    }
}

// The input rows y0 .. y0 + rows - 1 of one image (tile columns are image columns -1 ..), zero outside it.
__device__ void stage_tile(float* tile, const float* img, const ConvShape& s, const Plan& p, int y0, int rows) {
    const int per = p.vec_inp ? s.C / 4 : s.C, width = p.vec_inp ? 4 : 1;
    for (int i = threadIdx.x; i < rows * p.tw * per; i += blockDim.x) {
        const int c = width * (i % per), px = i / per, y = y0 + px / p.tw, x = px % p.tw - 1;
        const bool in = y >= 0 && y < s.H && x >= 0 && x < s.W;
        const float* src = in ? img + (y * s.W + x) * s.C + c : img;
        if (p.vec_inp)
            cp_async16(tile + px * p.cs + c, src, in);
        else
            cp_async4(tile + px * p.cs + c, src, in);
    }
}

// The fp32 fragments of the k step at k0: A rows g and g + 8 of each m-tile (a[m]: rows g, g + 8 at k index
// t, then at t + 4), B columns g of each n-tile (b[j]: k index t, t + 4), in mma.sync m16n8k8's layout; with
// kPairs the step's k order is permuted so each pair is one 8-byte load (kernel comment).
template <int NT, bool kPairs>
__device__ __forceinline__ void load_fragments(float (&a)[kMTiles][4], float (&b)[NT][2], const float* tile,
                                               const float* ws, const int* koff, const int (&row0)[kMTiles],
                                               const int (&row1)[kMTiles], int ks, int k0, int g, int t) {
    if constexpr (kPairs) {
        const int ka = koff[k0 + 2 * t];
#pragma unroll
        for (int m = 0; m < kMTiles; ++m) {
            const float2 top = *reinterpret_cast<const float2*>(tile + row0[m] + ka);
            const float2 low = *reinterpret_cast<const float2*>(tile + row1[m] + ka);
            a[m][0] = top.x, a[m][1] = low.x, a[m][2] = top.y, a[m][3] = low.y;
        }
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const float2 w = *reinterpret_cast<const float2*>(ws + (8 * j + g) * ks + k0 + 2 * t);
            b[j][0] = w.x, b[j][1] = w.y;
        }
    } else {
        const int ka = koff[k0 + t], kb = koff[k0 + t + 4];
#pragma unroll
        for (int m = 0; m < kMTiles; ++m) {
            a[m][0] = tile[row0[m] + ka], a[m][1] = tile[row1[m] + ka];
            a[m][2] = tile[row0[m] + kb], a[m][3] = tile[row1[m] + kb];
        }
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const float* col = ws + (8 * j + g) * ks + k0;
            b[j][0] = col[t], b[j][1] = col[t + 4];
        }
    }
}

// One work item's m-tiles (this warp's share): the products (TF32, or 3xTF32 when kExact), then bias,
// pooling and ReLU.
template <int NT, bool kArgmax, bool kPairs, bool kExact>
__device__ void compute_item(float* pooled, int32_t* argmax, const float* tile, const float* ws, const int* koff,
                             const float* bias, const ConvShape& s, const Plan& p, int b, int pr0, int npairs,
                             int n0) {
    const int OH = s.H / 2, OW = s.W / 2;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int mtiles = npairs * p.chunks;
    for (int m0 = warp * kMTiles; m0 < mtiles; m0 += kWarps * kMTiles) {
        // This thread's rows of each m-tile: g (conv row 2 pair, column 8 q + g) and g + 8 (the row below).
        int row0[kMTiles], row1[kMTiles];
#pragma unroll
        for (int m = 0; m < kMTiles; ++m) {
            const int mt = min(m0 + m, mtiles - 1);  // a missing last tile repeats one (computed, not stored)
            const int pair = mt / p.chunks, col = 8 * (mt % p.chunks) + g;
            row0[m] = (2 * pair * p.tw + col) * p.cs;
            row1[m] = row0[m] + p.tw * p.cs;
        }
        float acc[kMTiles][NT][4] = {};
        float ra[kMTiles][4], rb[NT][2];  // one k step's fragments as loaded (fp32)
        load_fragments<NT, kPairs>(ra, rb, tile, ws, koff, row0, row1, p.ks, 0, g, t);
        for (int k0 = 0; k0 < p.kpad; k0 += 8) {
            uint32_t ahi[kMTiles][4], alo[kMTiles][4], bhi[NT][2], blo[NT][2];
#pragma unroll
            for (int m = 0; m < kMTiles; ++m)
#pragma unroll
                for (int i = 0; i < 4; ++i) split_tf32<kExact>(ra[m][i], ahi[m][i], alo[m][i]);
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int i = 0; i < 2; ++i) split_tf32<kExact>(rb[j][i], bhi[j][i], blo[j][i]);
            // The next step's loads are in flight while this step's products run.
            if (k0 + 8 < p.kpad) load_fragments<NT, kPairs>(ra, rb, tile, ws, koff, row0, row1, p.ks, k0 + 8, g, t);
            // 3xTF32: the small terms first; each pass runs kMTiles * NT independent products, so no product
            // waits for the one before it on the same accumulator. TF32: the last pass alone.
            if constexpr (kExact) {
#pragma unroll
                for (int j = 0; j < NT; ++j)
#pragma unroll
                    for (int m = 0; m < kMTiles; ++m) mma_tf32(acc[m][j], alo[m], bhi[j][0], bhi[j][1]);
#pragma unroll
                for (int j = 0; j < NT; ++j)
#pragma unroll
                    for (int m = 0; m < kMTiles; ++m) mma_tf32(acc[m][j], ahi[m], blo[j][0], blo[j][1]);
            }
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int m = 0; m < kMTiles; ++m) mma_tf32(acc[m][j], ahi[m], bhi[j][0], bhi[j][1]);
        }
#pragma unroll
        for (int m = 0; m < kMTiles; ++m) {
            const int mt = m0 + m;
            if (mt >= mtiles) break;  // warp-uniform
            const int pair = mt / p.chunks, xc = 8 * (mt % p.chunks) + g, py = pr0 + pair, px = xc / 2;
            const int yc = 2 * py;  // the window's top row in the convolution's output
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const int ch = n0 + 8 * j + 2 * t;
                const float b0 = bias ? bias[ch] : 0.0f, b1 = bias ? bias[ch + 1] : 0.0f;
                // Accumulator c0, c1: row g (conv row yc), channels ch, ch + 1; c2, c3: row g + 8 (yc + 1).
                const float v[4] = {acc[m][j][0] + b0, acc[m][j][1] + b1, acc[m][j][2] + b0, acc[m][j][3] + b1};
                float o[4];  // the same from the lane holding column xc ^ 1
#pragma unroll
                for (int i = 0; i < 4; ++i) o[i] = __shfl_xor_sync(0xffffffffu, v[i], 4);
                if (g % 2 != 0 || px >= OW) continue;
                float best[2];
                int32_t arg[2];
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    best[c] = 0.0f;
                    arg[c] = -1;
                    pool_take(v[c], yc * s.W + xc, best[c], arg[c]);
                    pool_take(o[c], yc * s.W + xc + 1, best[c], arg[c]);
                    pool_take(v[2 + c], (yc + 1) * s.W + xc, best[c], arg[c]);
                    pool_take(o[2 + c], (yc + 1) * s.W + xc + 1, best[c], arg[c]);
                }
                const long at = ((static_cast<long>(b) * OH + py) * OW + px) * s.OC + ch;
                *reinterpret_cast<float2*>(pooled + at) =
                    make_float2(best[0] < 0.0f ? 0.0f : best[0], best[1] < 0.0f ? 0.0f : best[1]);
                if (kArgmax) *reinterpret_cast<int2*>(argmax + at) = make_int2(arg[0], arg[1]);
            }
        }
    }
}

template <int NT, bool kArgmax, bool kPairs, bool kExact>
__global__ void __launch_bounds__(kWarps * 32)
    conv_pool_relu_kernel(float* pooled, int32_t* argmax, const float* inp, const float* weight, const float* bias,
                          ConvShape s, Plan p) {
    extern __shared__ float smem[];
    float* ws = smem;  // 16-byte aligned, as is the tile after it (ks % 4 == 0)
    float* tiles = ws + NT * 8 * p.ks;
    const int tile_size = static_cast<int>(tile_floats(p));
    int* koff = reinterpret_cast<int*>(tiles + p.buffers * tile_size);
    const int n0 = blockIdx.y * NT * 8, OH = s.H / 2, items = s.B * p.bands;
    auto stage_item = [&](int item, int buf) {
        const int b = item / p.bands, pr0 = (item % p.bands) * p.pairs, npairs = min(p.pairs, OH - pr0);
        stage_tile(tiles + buf * tile_size, inp + static_cast<long>(b) * s.H * s.W * s.C, s, p, 2 * pr0 - 1,
                   2 * npairs + 2);
    };
    stage_weights<NT>(ws, koff, weight, s, p, n0);
    if (p.buffers == 2) stage_item(blockIdx.x, 0);  // blockIdx.x < items (launch)
    flash::cp_async_commit();
    int buf = 0;
    for (int item = blockIdx.x; item < items; item += gridDim.x) {
        if (p.buffers == 2) {  // the next item's tile loads while this one is computed
            if (item + static_cast<int>(gridDim.x) < items) stage_item(item + gridDim.x, buf ^ 1);
            flash::cp_async_commit();
            flash::cp_async_wait<1>();  // every group but the newest: this item's tile (and the weights)
        } else {
            stage_item(item, 0);
            flash::cp_async_commit();
            flash::cp_async_wait<0>();
        }
        __syncthreads();
        const int b = item / p.bands, pr0 = (item % p.bands) * p.pairs;
        compute_item<NT, kArgmax, kPairs, kExact>(pooled, argmax, tiles + buf * tile_size, ws, koff, bias, s, p, b,
                                                  pr0, min(p.pairs, OH - pr0), n0);
        __syncthreads();  // this buffer is restaged next (one buffer) or after the next item (two)
        buf ^= p.buffers - 1;
    }
}

// Blocks of this kernel resident per SM at this shared-memory size, times the SMs: the persistent grid.
int resident_blocks(const void* kernel, size_t smem) {
    static std::mutex mu;
    static std::map<std::pair<const void*, size_t>, int>* known = new std::map<std::pair<const void*, size_t>, int>;
    std::lock_guard<std::mutex> lock(mu);
    auto it = known->find({kernel, smem});
    if (it != known->end()) return it->second;
    int dev = 0, sms = 0, per_sm = 0;
    LLMT_CUDA_CHECK(cudaGetDevice(&dev));
    LLMT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    LLMT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kWarps * 32, smem));
    return known->emplace(std::make_pair(kernel, smem), std::max(1, per_sm) * sms).first->second;
}

template <int NT, bool kArgmax, bool kPairs, bool kExact>
void launch(float* pooled, int32_t* argmax, const float* inp, const float* weight, const float* bias,
            const ConvShape& s, const Plan& p, cudaStream_t stream) {
    auto* kernel = conv_pool_relu_kernel<NT, kArgmax, kPairs, kExact>;
    static const cudaError_t opted_in =  // once per process (one device per process)
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemBudget));
    LLMT_CUDA_CHECK(opted_in);
    const int items = s.B * p.bands, slices = s.OC / (8 * NT);
    // Every slice's blocks together fill the GPU once; each walks its share of the items.
    const int per_slice = std::max(1, resident_blocks(reinterpret_cast<const void*>(kernel), p.smem) / slices);
    const dim3 grid(static_cast<unsigned>(std::min(items, per_slice)), static_cast<unsigned>(slices));
    kernel<<<grid, kWarps * 32, p.smem, stream>>>(pooled, argmax, inp, weight, bias, s, p);
    LLMT_CUDA_CHECK_LAUNCH("conv_pool_relu_kernel");
}

}  // namespace

bool conv_pool_relu_fits(const ConvShape& s) { return plan_for(s).nt > 0; }

void conv_pool_relu_forward(float* pooled, int32_t* argmax, const float* inp, const float* weight, const float* bias,
                            const ConvShape& s, bool tf32, cudaStream_t stream) {
    Plan p = plan_for(s);
    p.vec_inp = s.C % 4 == 0 && reinterpret_cast<uintptr_t>(inp) % 16 == 0;
    p.vec_w = 9 * s.C % 4 == 0 && reinterpret_cast<uintptr_t>(weight) % 16 == 0;
    LLMT_INTERNAL_CHECK(p.nt > 0, "conv_pool_relu_forward: a {}x{}x{} -> {} convolution does not fit the fused kernel",
                        s.H, s.W, s.C, s.OC);
    const bool arg = argmax != nullptr, pairs = s.C % 8 == 0;
    auto go = [&](auto nt, auto keep, auto paired, auto exact) {
        launch<decltype(nt)::value, decltype(keep)::value, decltype(paired)::value, decltype(exact)::value>(
            pooled, argmax, inp, weight, bias, s, p, stream);
    };
    auto with_exact = [&](auto nt, auto keep, auto paired) {
        tf32 ? go(nt, keep, paired, std::false_type{}) : go(nt, keep, paired, std::true_type{});
    };
    auto with_pairs = [&](auto nt, auto keep) {
        pairs ? with_exact(nt, keep, std::true_type{}) : with_exact(nt, keep, std::false_type{});
    };
    auto with_argmax = [&](auto nt) {
        arg ? with_pairs(nt, std::true_type{}) : with_pairs(nt, std::false_type{});
    };
    p.nt == 8 ? with_argmax(std::integral_constant<int, 8>{}) : with_argmax(std::integral_constant<int, 4>{});
}

}  // namespace llmt::kernels::cuda
