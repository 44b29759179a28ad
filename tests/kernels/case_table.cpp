// The kernel case table (case_table.h): one row per case. modes: kF64 = CPU fp32 vs float64 (ops with a float64
// reference), kCuda = CUDA fp32 vs CPU, kBf16 = CUDA bf16 vs CPU on bf16-rounded inputs. Shapes are chosen to take
// each kernel path: odd extents, partial tiles and blocks, 16-byte groups and their scalar fallbacks, the widths of
// GPT-2 and Llama-3.2-1B.
#include "kernels/case_table.h"

#include <stdexcept>

#include "kernels/packed_positions.h"

namespace llmt::kernels::cases {
namespace {

using K = std::vector<std::pair<Knob, const char*>>;
constexpr unsigned kAllFp32 = kF64 | kCuda;

// Attention paths of the bf16 run: cuDNN's engine (where libcudnn loads; else the flash kernels again), our flash
// kernels, the simple kernels.
const K kCudnn = {{Knob::kCudnnAttention, "1"}, {Knob::kFlashAttention, "1"}};
const K kFlash = {{Knob::kCudnnAttention, "0"}, {Knob::kFlashAttention, "1"}};
const K kSimple = {{Knob::kCudnnAttention, "0"}, {Knob::kFlashAttention, "0"}};
// The fusions GPT-2's step uses without dropout, on and off, and on with cuDNN's attention.
const K kFused = {{Knob::kFuseResidual, "1"},
                  {Knob::kFuseLnColsum, "1"},
                  {Knob::kFuseAttnColsum, "1"},
                  {Knob::kCudnnAttention, "0"}};
const K kUnfused = {{Knob::kFuseResidual, "0"},
                    {Knob::kFuseLnColsum, "0"},
                    {Knob::kFuseAttnColsum, "0"},
                    {Knob::kCudnnAttention, "0"}};
const K kFusedCudnn = {{Knob::kFuseResidual, "1"},
                       {Knob::kFuseLnColsum, "1"},
                       {Knob::kFuseAttnColsum, "1"},
                       {Knob::kCudnnAttention, "1"}};

// Packed examples: one-token examples, examples crossing the 32-key warp chunks and 64-row tiles, a row that is one
// example.
const std::vector<std::vector<int>> kMix = {{1, 40, 1, 1, 33, 24}, {100}, {60, 39, 1}};
const std::vector<std::vector<int>> kMix2 = {{1, 70, 1, 1, 27}, {100}};
const std::vector<std::vector<int>> kOnes = {std::vector<int>(70, 1), {35, 35}};
const std::vector<std::vector<int>> kRopeMix = {{1, 20, 16}, {37}};
const std::vector<std::vector<int>> kPacked37 = {{5, 1, 20, 1, 10}, {1, 36}};

// Attention's bf16 paths on one set of shapes: multi-head, grouped-query, multi-query, and two rows of packed
// examples.
std::vector<Case> attention_paths(const K& knobs, const char* packed_why = "") {
    return {
        {.op = "attention", .d = {.B = 2, .T = 100, .C = 256, .NH = 4}, .modes = kBf16, .knobs = knobs},
        {.op = "attention", .d = {.B = 2, .T = 100, .C = 512, .NH = 8, .KV = 2}, .modes = kBf16, .knobs = knobs},
        {.op = "attention", .d = {.B = 2, .T = 100, .C = 256, .NH = 4, .KV = 1}, .modes = kBf16, .knobs = knobs},
        {.op = "attention",
         .d = {.T = 100, .C = 256, .NH = 4},
         .modes = kBf16,
         .knobs = knobs,
         .packing = kMix2,
         .why = packed_why},
        {.op = "attention",
         .d = {.T = 100, .C = 512, .NH = 8, .KV = 2},
         .modes = kBf16,
         .knobs = knobs,
         .packing = kMix2},
    };
}

void append(std::vector<Case>& rows, const std::vector<Case>& more) {
    rows.insert(rows.end(), more.begin(), more.end());
}

// The column-sum rows' shapes, each fusion knob on, off and with cuDNN: multi-head; grouped-query with a kv head's
// query heads split over blocks, and at 4 x 1100 x 16/8 (288 key blocks of 128 per head pair on 132 SMs) walked by
// one block each.
const Dims kColsumShapes[] = {
    {.B = 2, .T = 150, .C = 192, .NH = 3},
    {.B = 2, .T = 150, .C = 384, .NH = 3},
    {.B = 2, .T = 150, .C = 256, .NH = 4, .KV = 2},
    {.B = 1, .T = 150, .C = 512, .NH = 4, .KV = 1},
    {.B = 4, .T = 1100, .C = 1024, .NH = 16, .KV = 8},
};

// rmsnorm_backward's paths, each row run twice (the same bits both times): 1, 2 or 4 groups per thread, 16-byte or
// one-element groups, partly idle last warps, row counts of 1, a few and thousands (no multiple of the 4 rows a
// step takes), and rows wider than a block holds (the scalar kernel with atomics: dweight's bits may differ between
// runs, `unordered`).
struct TwiceRow {
    Dims d;
    unsigned modes;
    const char* unordered;
};
const TwiceRow kRmsnormTwice[] = {
    {{.B = 2, .T = 41, .C = 999}, kAllFp32, ""},
    {{.B = 1, .T = 5, .C = 1999}, kAllFp32, ""},
    {{.B = 2, .T = 41, .C = 2051}, kAllFp32, "dweight"},
    {{.B = 1, .T = 1, .C = 2048}, kAllFp32, ""},
    {{.B = 3, .T = 1367, .C = 2048}, kAllFp32, ""},
    {{.B = 1, .T = 37, .C = 4000}, kAllFp32, ""},
    {{.B = 2, .T = 9, .C = 8192}, kAllFp32, ""},
    {{.B = 1, .T = 3, .C = 67}, kAllFp32, ""},
    {{.B = 1, .T = 1, .C = 2048}, kBf16, ""},
    {{.B = 1, .T = 7, .C = 2048}, kBf16, ""},
    {{.B = 2, .T = 4099, .C = 2048}, kBf16, ""},
    {{.B = 3, .T = 5, .C = 2056}, kBf16, ""},
    {{.B = 1, .T = 9, .C = 8192}, kBf16, ""},
    {{.B = 1, .T = 5, .C = 16384}, kBf16, ""},
    {{.B = 2, .T = 37, .C = 1001}, kBf16, ""},
    {{.B = 1, .T = 41, .C = 2047}, kBf16, ""},
    {{.B = 2, .T = 37, .C = 2049}, kBf16, "dweight"},
};

std::vector<Case> build() {
    std::vector<Case> rows = {
        // GPT-2 ops.
        {.op = "encoder", .d = {.B = 3, .T = 37, .C = 96, .V = 101, .maxT = 64}, .modes = kAllFp32 | kBf16},
        {.op = "layernorm", .d = {.B = 2, .T = 41, .C = 200}, .modes = kAllFp32},
        {.op = "layernorm", .d = {.B = 3, .T = 37, .C = 96}, .modes = kF64 | kBf16},
        {.op = "layernorm", .d = {.B = 2, .T = 33, .C = 768}, .modes = kF64 | kBf16, .why = "vectorised kernels"},
        {.op = "layernorm", .d = {.B = 2, .T = 33, .C = 1024}, .modes = kF64 | kBf16, .why = "vectorised kernels"},
        {.op = "matmul", .d = {.B = 74, .C = 96, .OC = 200}, .modes = kAllFp32},
        {.op = "matmul", .d = {.B = 300, .C = 64, .OC = 33, .bias = false}, .modes = kAllFp32},
        {.op = "matmul",
         .d = {.B = 74, .C = 96, .OC = 200},
         .modes = kCuda,
         .knobs = {{Knob::kCudaTf32, "1"}},
         .tol_floor = 1e-2,
         .why = "TF32 inputs (2^-11 each): products ~1e-3 => 1e-2; a wrong output is O(1)"},
        {.op = "matmul",
         .d = {.B = 74, .C = 96, .OC = 200},
         .modes = kCuda,
         .knobs = {{Knob::kCublasLtTune, "0"}},
         .why = "the heuristic's first algorithm"},
        {.op = "matmul",
         .d = {.B = 300, .C = 64, .OC = 33, .bias = false},
         .modes = kCuda,
         .knobs = {{Knob::kCudaSync, "1"}},
         .why = "a synchronise after each launch"},
        {.op = "matmul",
         .d = {.B = 520, .C = 768, .OC = 3072, .reps = 2},
         .modes = kBf16,
         .why = "GPT-2's MLP: the tuned algorithm on the second call, the bias kernel's 8-row tail; += twice"},
        {.op = "matmul_gelu",
         .d = {.B = 96, .C = 64, .OC = 256},
         .modes = kBf16,
         .knobs = {{Knob::kGeluFusion, "1"}},
         .why = "cuBLASLt's bias, GELU and DGELU epilogues"},
        {.op = "matmul_gelu",
         .d = {.B = 96, .C = 64, .OC = 256},
         .modes = kBf16,
         .knobs = {{Knob::kGeluFusion, "0"}},
         .why = "the GELU as separate kernels"},
        {.op = "attention", .d = {.B = 2, .T = 67, .C = 192, .NH = 3, .t0 = 22}, .modes = kAllFp32},
        {.op = "attention", .d = {.B = 3, .T = 33, .C = 40, .NH = 2, .t0 = 11}, .modes = kAllFp32},
        {.op = "attention", .d = {.B = 1, .T = 130, .C = 256, .NH = 2, .t0 = 43}, .modes = kAllFp32},
        {.op = "attention", .d = {.B = 2, .T = 67, .C = 256, .NH = 4, .KV = 2, .t0 = 22}, .modes = kAllFp32},
        {.op = "attention", .d = {.B = 3, .T = 33, .C = 80, .NH = 4, .KV = 1, .t0 = 11}, .modes = kAllFp32},
        {.op = "attention", .d = {.B = 1, .T = 130, .C = 1024, .NH = 8, .KV = 2, .t0 = 43}, .modes = kAllFp32},
        {.op = "attention",
         .d = {.B = 1, .T = 97, .C = 2048, .NH = 32, .KV = 8, .t0 = 32},
         .modes = kAllFp32,
         .why = "Llama-3.2-1B's heads"},
        {.op = "attention", .d = {.T = 100, .C = 192, .NH = 3}, .modes = kCuda, .packing = kMix},
        {.op = "attention", .d = {.T = 100, .C = 256, .NH = 4, .KV = 2}, .modes = kCuda, .packing = kMix},
        {.op = "attention", .d = {.T = 100, .C = 80, .NH = 4, .KV = 1}, .modes = kCuda, .packing = kMix},
        {.op = "attention", .d = {.T = 70, .C = 1024, .NH = 8, .KV = 2}, .modes = kCuda, .packing = kOnes},
    };
    append(rows, attention_paths(kCudnn, "cuDNN is not used with positions: the flash kernels"));
    append(rows, attention_paths(kFlash));
    append(rows, attention_paths(kSimple));
    rows.insert(rows.end(), {
        {.op = "gelu", .d = {.N = 100003}, .modes = kAllFp32, .why = "not a multiple of any block size"},
        {.op = "gelu", .d = {.N = 5000}, .modes = kBf16},
        {.op = "residual_forward", .d = {.N = 100003}, .modes = kAllFp32},
        {.op = "residual_forward", .d = {.N = 5000}, .modes = kBf16},
        {.op = "residual_backward", .d = {.N = 100003}, .modes = kAllFp32},
        {.op = "dropout", .d = {.N = 100003}, .modes = kCuda},
        {.op = "scale", .d = {.N = 100003}, .modes = kAllFp32},
        {.op = "sum_squares", .d = {.N = 100003}, .modes = kAllFp32},
        {.op = "classifier_forward", .d = {.B = 3, .T = 19, .V = 1000, .Vp = 1024}, .modes = kAllFp32},
        {.op = "classifier", .d = {.B = 3, .T = 19, .V = 1000, .Vp = 1024}, .modes = kAllFp32},
        {.op = "classifier", .d = {.T = 6, .V = 1000, .Vp = 1024}, .modes = kF64 | kBf16},
        {.op = "classifier",
         .d = {.T = 5, .V = 50257, .Vp = 50304},
         .modes = kF64 | kBf16,
         .why = "GPT-2's vocabulary: a padded tail inside the last 16-byte vector of real columns"},
        // The fused residual add and bias column sums of GPT-2's step, each fusion knob on, off, and with cuDNN.
        {.op = "matmul_residual",
         .d = {.B = 200, .C = 256, .OC = 768},
         .modes = kF64 | kBf16,
         .knobs = kFused,
         .flags = kTwice,
         .why = "the first call times cuBLASLt's candidates, the second not"},
        {.op = "matmul_residual",
         .d = {.B = 200, .C = 256, .OC = 768},
         .modes = kBf16,
         .knobs = kUnfused,
         .flags = kTwice},
        {.op = "matmul_residual",
         .d = {.B = 200, .C = 256, .OC = 768},
         .modes = kBf16,
         .knobs = kFusedCudnn,
         .flags = kTwice},
        {.op = "layernorm_colsum",
         .d = {.B = 3, .T = 37, .C = 768},
         .modes = kBf16,
         .knobs = kFused,
         .why = "the vectorised kernel's third partial row"},
        {.op = "layernorm_colsum",
         .d = {.B = 3, .T = 37, .C = 320},
         .modes = kBf16,
         .knobs = kFused,
         .why = "the generic kernel, then the column-sum kernel"},
        {.op = "layernorm_colsum", .d = {.B = 3, .T = 37, .C = 768}, .modes = kBf16, .knobs = kUnfused},
        {.op = "layernorm_colsum", .d = {.B = 3, .T = 37, .C = 320}, .modes = kBf16, .knobs = kUnfused},
        {.op = "layernorm_colsum", .d = {.B = 3, .T = 37, .C = 768}, .modes = kBf16, .knobs = kFusedCudnn},
        {.op = "layernorm_colsum", .d = {.B = 3, .T = 37, .C = 320}, .modes = kBf16, .knobs = kFusedCudnn},
    });
    for (const K* knobs : {&kFused, &kUnfused, &kFusedCudnn}) {
        for (const Dims& d : kColsumShapes)
            rows.push_back({.op = "attention_colsum", .d = d, .modes = kBf16, .knobs = *knobs});
    }
    rows.insert(rows.end(), {
        // LLaMA ops. RMSNorm C = 67 and 100 (no multiple of 4 floats / 8 bf16: scalar forward, one-element backward
        // groups), 200 and 768 (16-byte groups; 768 in bf16: a partial last group per warp), 2048 (Llama-3.2-1B: the
        // forward in registers, the backward's 512-thread block).
        {.op = "rmsnorm", .d = {.B = 2, .T = 41, .C = 67}, .modes = kAllFp32},
        {.op = "rmsnorm", .d = {.B = 2, .T = 41, .C = 200}, .modes = kAllFp32},
        {.op = "rmsnorm", .d = {.B = 2, .T = 41, .C = 768}, .modes = kAllFp32},
        {.op = "rmsnorm", .d = {.B = 2, .T = 41, .C = 2048}, .modes = kAllFp32},
        {.op = "rmsnorm", .d = {.B = 2, .T = 37, .C = 2048}, .modes = kF64 | kBf16},
        {.op = "rmsnorm", .d = {.B = 2, .T = 37, .C = 768}, .modes = kF64 | kBf16},
        {.op = "rmsnorm", .d = {.B = 2, .T = 37, .C = 100}, .modes = kF64 | kBf16},
        {.op = "residual_rmsnorm", .d = {.B = 2, .T = 41, .C = 67}, .modes = kAllFp32},
        {.op = "residual_rmsnorm", .d = {.B = 2, .T = 41, .C = 200}, .modes = kAllFp32},
        {.op = "residual_rmsnorm", .d = {.B = 2, .T = 41, .C = 768}, .modes = kAllFp32},
        {.op = "residual_rmsnorm", .d = {.B = 2, .T = 41, .C = 2048}, .modes = kAllFp32},
        {.op = "residual_rmsnorm", .d = {.B = 2, .T = 37, .C = 2048}, .modes = kBf16},
        {.op = "residual_rmsnorm", .d = {.B = 2, .T = 37, .C = 768}, .modes = kBf16},
        {.op = "residual_rmsnorm", .d = {.B = 2, .T = 37, .C = 100}, .modes = kBf16},
        {.op = "residual_rmsnorm_inplace", .d = {.B = 2, .T = 41, .C = 67}, .modes = kAllFp32},
        {.op = "residual_rmsnorm_inplace", .d = {.B = 2, .T = 41, .C = 200}, .modes = kAllFp32},
        {.op = "residual_rmsnorm_inplace", .d = {.B = 2, .T = 41, .C = 768}, .modes = kAllFp32},
        {.op = "residual_rmsnorm_inplace", .d = {.B = 2, .T = 41, .C = 2048}, .modes = kAllFp32},
    });
    for (const auto& [d, modes, unordered] : kRmsnormTwice)
        rows.push_back({.op = "rmsnorm", .d = d, .modes = modes, .flags = kTwice | kSameBits, .unordered = unordered});
    rows.insert(rows.end(), {
        // SwiGLU: F a multiple of 16 bytes (16-byte chunks) or not (one element per thread).
        {.op = "swiglu", .d = {.F = 100, .N = 66}, .modes = kAllFp32},
        {.op = "swiglu", .d = {.F = 37, .N = 66}, .modes = kAllFp32},
        {.op = "swiglu", .d = {.F = 256, .N = 37}, .modes = kF64 | kBf16},
        {.op = "swiglu", .d = {.F = 100, .N = 37}, .modes = kF64 | kBf16},
        {.op = "swiglu_inplace", .d = {.F = 100, .N = 66}, .modes = kAllFp32},
        {.op = "swiglu_inplace", .d = {.F = 37, .N = 66}, .modes = kAllFp32},
        // RoPE: HS = 64 (4 fp32 / 8 bf16 pairs per thread), 20 (one pair); Llama-3.2-1B's 32 query / 8 kv heads.
        {.op = "rope", .d = {.B = 2, .T = 37, .C = 256, .NH = 4, .KV = 2, .maxT = 53, .pos0 = 11}, .modes = kAllFp32},
        {.op = "rope", .d = {.B = 2, .T = 37, .C = 80, .NH = 4, .KV = 2, .maxT = 53, .pos0 = 11}, .modes = kAllFp32},
        {.op = "rope", .d = {.T = 37, .C = 256, .NH = 4, .KV = 2, .maxT = 53}, .modes = kCuda, .packing = kRopeMix},
        {.op = "rope", .d = {.T = 37, .C = 80, .NH = 4, .KV = 2, .maxT = 53}, .modes = kCuda, .packing = kRopeMix},
        {.op = "rope",
         .d = {.B = 2, .T = 33, .C = 2048, .NH = 32, .KV = 8, .maxT = 40, .pos0 = 7, .theta = 500000.0},
         .modes = kF64 | kBf16},
        {.op = "rope",
         .d = {.B = 2, .T = 33, .C = 80, .NH = 4, .KV = 2, .maxT = 40, .pos0 = 7, .theta = 500000.0},
         .modes = kF64 | kBf16},

        // Optimizer updates (fp32 master state; the CUDA runs also write the bf16 compute copy).
        {.op = "adamw", .d = {.N = 70001, .reps = 3}, .modes = kCuda},
        {.op = "adamw", .d = {.N = 3000}, .modes = kBf16},
        {.op = "adamw_runs", .d = {}, .modes = kBf16, .knobs = {{Knob::kAdamwRuns, "1"}}, .why = "one launch"},
        {.op = "adamw_runs", .d = {}, .modes = kBf16, .knobs = {{Knob::kAdamwRuns, "0"}}, .why = "a launch per run"},
        {.op = "sgd", .d = {.N = 70001, .reps = 3}, .modes = kCuda, .variant = "momentum"},
        {.op = "sgd", .d = {.N = 70001, .reps = 3}, .modes = kCuda, .variant = "nesterov"},
        {.op = "sgd", .d = {.N = 70001, .reps = 3}, .modes = kCuda, .variant = "dampening"},
        {.op = "sgd", .d = {.N = 70001, .reps = 3}, .modes = kCuda, .variant = "plain"},

        // Against PyTorch (kernels_reference_test): GPT-2-like sizes with odd T = 37 and the real GPT-2 vocabulary
        // (V = 50257 padded to 50304); the LLaMA ops at grouped-query heads (6 query on 2 kv), RoPE with Llama 3's
        // theta from position 5; packed rows of examples of lengths 5,1,20,1,10 and 1,36 (position_ids restarting at
        // 0 per example). LayerNorm at eps 1e-5 and 0.1 (inputs of variance ~4: rstd moves by ~1.2%, so an eps that
        // does not reach the kernel fails one of the two by far); the packed rows only match torch's block-diagonal
        // mask (plain causal attention differs from it by O(1) on these lengths).
        {.op = "encoder", .d = {.B = 2, .T = 37, .C = 48, .V = 50257, .maxT = 40}, .modes = kF64 | kTorch},
        {.op = "layernorm", .d = {.B = 2, .T = 37, .C = 48, .eps = 1e-5}, .modes = kF64 | kTorch},
        {.op = "layernorm", .d = {.B = 2, .T = 37, .C = 48}, .modes = kF64 | kTorch},
        {.op = "matmul", .d = {.B = 2, .T = 37, .C = 48, .OC = 192}, .modes = kF64 | kTorch},
        {.op = "attention", .d = {.B = 2, .T = 37, .C = 48, .NH = 4, .t0 = 12}, .modes = kF64 | kTorch},
        {.op = "attention", .d = {.B = 2, .T = 37, .C = 96, .NH = 6, .KV = 2, .t0 = 12}, .modes = kF64 | kTorch},
        {.op = "attention", .d = {.T = 37, .C = 64, .NH = 4, .KV = 2}, .modes = kTorch, .packing = kPacked37},
        {.op = "attention", .d = {.T = 37, .C = 48, .NH = 4}, .modes = kTorch, .packing = kPacked37},
        {.op = "gelu", .d = {.N = 2 * 37 * 192}, .modes = kF64 | kTorch},
        {.op = "classifier_forward", .d = {.B = 2, .T = 37, .V = 50257, .Vp = 50304}, .modes = kF64 | kTorch},
        {.op = "classifier", .d = {.B = 2, .T = 37, .V = 50257, .Vp = 50304}, .modes = kF64 | kTorch},
        {.op = "adamw", .d = {.N = 1000}, .modes = kTorch},
        {.op = "sum_squares", .d = {.N = 2 * 37 * 48 + 192}, .modes = kF64 | kTorch},
        {.op = "rmsnorm", .d = {.B = 2, .T = 37, .C = 48, .eps = 1e-5}, .modes = kF64 | kTorch},
        {.op = "residual_rmsnorm", .d = {.B = 2, .T = 37, .C = 48, .eps = 1e-5}, .modes = kF64 | kTorch},
        {.op = "swiglu", .d = {.F = 40, .N = 2 * 37}, .modes = kF64 | kTorch},
        {.op = "rope", .d = {.B = 2, .T = 37, .C = 96, .NH = 6, .KV = 2, .maxT = 45, .pos0 = 5, .theta = 500000.0},
         .modes = kF64 | kTorch},
        {.op = "rope", .d = {.T = 37, .C = 96, .NH = 6, .KV = 2, .maxT = 45, .theta = 500000.0}, .modes = kTorch,
         .packing = kPacked37},
    });
    return rows;
}

}  // namespace

const std::vector<Case>& kernel_cases() {
    static const std::vector<Case> rows = build();
    return rows;
}

const std::vector<OpDef>& op_defs() {
    static const std::vector<OpDef> defs = [] {
        std::vector<OpDef> d;
        add_transformer_ops(d);
        add_llama_ops(d);
        add_update_ops(d);
        return d;
    }();
    return defs;
}

const OpDef& op_def(const std::string& name) {
    for (const OpDef& d : op_defs())
        if (name == d.name) return d;
    throw std::invalid_argument("case table: no op named '" + name + "' (case_ops_*.cpp list the ops)");
}

std::vector<int32_t> packed_positions(const Case& c) {
    return c.packing.empty() ? std::vector<int32_t>{} : test::pack_rows(c.packing, c.d.T).positions;
}

int batch_rows(const Case& c) {
    return c.packing.empty() ? c.d.B : static_cast<int>(c.packing.size());
}

}  // namespace llmt::kernels::cases
