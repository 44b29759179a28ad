// One table of kernel cases, in the manner of ggml's test-backend-ops: each op is defined once (its tensors, the calls
// of kernels/ops.h that run it, and its float64 reference where one exists: case_ops_*.cpp), and each case of it is
// one row of the table (case_table.cpp: shapes, the comparisons that run it, knobs). The same row runs
//   - CPU fp32 vs float64 (case_table_test, `make test`), for ops with a float64 reference;
//   - CUDA fp32 vs CPU fp32 and CUDA bf16 vs CPU fp32 on the same bf16-rounded inputs (cuda_case_table_test, label
//     gpu: skipped, saying so, without a CUDA device);
// and both binaries take `--perf` to time each case instead (median of repeated runs; never pass/fail). Inputs are
// fresh random values each run (seed printed; replay with LLMT_TEST_SEED); outputs are NaN-poisoned first on every
// backend, so an element an op forgets to write fails the comparison. Errors are max |got - want| / max |want|. Adding
// an op: one builder in case_ops_*.cpp (listed in op_defs()) and rows.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/knobs.h"
#include "core/tensor.h"

namespace llmt::kernels::cases {

// fp32 tolerances (CUDA fp32 vs CPU fp32, and CPU fp32 vs float64). Both fp32 sides accumulate in fp32 (cuBLASLt in
// CUBLAS_COMPUTE_32F, no TF32); they differ only in summation order and libm vs CUDA math (a few ulp). A sum of n
// terms in another order differs by ~ sqrt(n) * 6e-8 relative typically:
//  - element-wise ops (gelu, residual, dropout, adamw, scale, swiglu, rope): a few ulp => 1e-5 (seen <= 1.2e-6 CUDA
//    vs CPU on an H200, 2026-11-29: gelu_backward, whose tanh comes from different formulas; <= 1.3e-6 CPU vs
//    float64 and torch).
//  - reductions over C, HS, K <= 2048 or V <= 50257 (layernorm, rmsnorm, attention, matmul, classifier, encoder
//    scatter): sqrt(2048) * 6e-8 ~ 3e-6 => 2e-5 (seen <= 6.5e-7 on the H200, <= 5.9e-7 CPU vs float64 and torch).
//  - backward passes chain two or three such sums => 5e-5 (seen <= 8.1e-7 on the H200, <= 1.2e-6 CPU vs float64).
// A TF32 or bf16 path fails these by orders of magnitude (~1e-3), so they discriminate.
constexpr double kTolElementwise = 1e-5;
constexpr double kTolReduce = 2e-5;
constexpr double kTolBackward = 5e-5;
// bf16 tolerances (CUDA bf16 vs CPU fp32 on the same bf16-rounded inputs). A bf16 store rounds to 8 significant bits:
// 2^-9 = 2e-3 relative per element. Ops that round once at the output (encoder, gelu, residual, norms' outputs, matmul
// with fp32 accumulation, swiglu, rope) stay within ~4e-3 => kTolOut 1e-2. Backward ops that also round an
// intermediate to bf16 (dinp += into a bf16 buffer, dlogits, the DGELU epilogue's product) or accumulate bf16-rounded
// gradients over many rows (dweight, dbias) => kTolGrad 2e-2; attention's tensor-core kernels round the probabilities
// to bf16 before P @ V => kTolGrad too. Values that stay fp32 end to end (losses from identical logits, fp32 master
// updates, fp32 accumulators fed identical values) => kTolF32 1e-5; norm statistics in fp32 from identical bf16 inputs
// (sums of C squares in another order) => kTolStat 1e-4. Seen on an H200 (2026-11-29): <= 3.4e-3 (kTolOut), 5.1e-3
// (kTolGrad), 9.3e-8 (kTolF32), 2.0e-6 (kTolStat).
constexpr double kTolOut = 1e-2;
constexpr double kTolGrad = 2e-2;
constexpr double kTolF32 = 1e-5;
constexpr double kTolStat = 1e-4;
// A bf16 result that must equal the CPU's fp32 result rounded to bf16, bit for bit (a sum rounded once).
constexpr double kExactRounded = -1.0;
constexpr double kNotCompared = -2.0;

// Tolerance of one output: fp32 (CPU vs float64 and CUDA vs CPU) and bf16 (CUDA bf16 vs CPU fp32).
struct Tol {
    double fp32 = kNotCompared, bf16 = kNotCompared;
};

// Storage of a tensor. kAct follows the run's precision (bf16 in the bf16 run, fp32 elsewhere); kF32 stays fp32
// (statistics, fp32 gradient accumulators, master weights, tables); kBF16 is a bf16 tensor only the CUDA runs have (an
// optimizer's compute copy: an empty Tensor on the CPU); kI32 ids, targets, positions.
enum class Kind { kAct, kF32, kBF16, kI32 };
// kIn: random input (read only); kOut: written by the op (NaN first); kInOut: random start, then updated (+=, in
// place). kOut and kInOut tensors are compared where their Tol says so.
enum class Role { kIn, kOut, kInOut };

struct Arg {
    std::string name;
    std::vector<int64_t> shape;
    Kind kind = Kind::kAct;
    Role role = Role::kIn;
    Tol tol = {};
    float scale = 1.0f;                                          // randn's standard deviation
    int32_t hi = 0;                                              // kI32: uniform in [0, hi)
    std::vector<float> values = {};                              // fixed values instead of random ones (tables)
    std::vector<int32_t> ids = {};                               // fixed ids (positions)
    std::function<void(std::vector<float>&)> shape_values = {};  // applied to the random values (before rounding)
    std::function<void(std::vector<int32_t>&)> shape_ids = {};   // applied to random ids (ignored targets)
    bool unchanged = false;                                      // CUDA runs: must be bit for bit what was uploaded
    // > 0: also compare the change from the start value (kInOut), to this tolerance: an update far smaller than
    // the value it is added to would hide under the value's tolerance.
    double delta_tol = 0.0;
};

// Host values of one run, by tensor name: floats (bf16 tensors widened), ids, and scalars an op returns.
struct Values {
    std::map<std::string, std::vector<float>> f;
    std::map<std::string, std::vector<int32_t>> i;
    std::map<std::string, double> scalars;
};

// The tensors of one call on one backend (CPU host tensors or CUDA device tensors).
class Run {
public:
    Run(std::map<std::string, Tensor> tensors, bool cuda, bool bf16, uint64_t seed)
        : t_(std::move(tensors)), cuda_(cuda), bf16_(bf16), seed_(seed) {}
    Tensor operator[](const std::string& name) const;  // an empty Tensor for a kBF16 tensor on the CPU
    bool cuda() const { return cuda_; }
    // The CPU reference of a bf16 run: rounds an fp32 host tensor to bf16 values, as the CUDA run stores it. A no-op
    // on CUDA and in fp32 runs.
    void round_as_stored(const std::string& name);
    uint64_t seed() const { return seed_; }  // the same on every backend of one case (dropout masks)
    void scalar(const std::string& name, double v) { scalars_[name] = v; }
    const std::map<std::string, double>& scalars() const { return scalars_; }

private:
    std::map<std::string, Tensor> t_;
    bool cuda_, bf16_;
    uint64_t seed_;
    std::map<std::string, double> scalars_;
};

// float64 values of one reference run, by tensor name (inputs widened from the fp32 inputs; outputs zeroed).
struct Ref64 {
    std::map<std::string, std::vector<double>> f;
    std::map<std::string, std::vector<int32_t>> i;
    std::map<std::string, double> scalars;
    double* operator()(const std::string& name) { return f.at(name).data(); }
    const int32_t* ids(const std::string& name) const { return i.at(name).data(); }
};

// Shapes of a row; each op reads the ones it needs (HS = C / NH; KV 0 means KV = NH).
struct Dims {
    int B = 1, T = 1, C = 1, OC = 0, NH = 1, KV = 0, V = 0, Vp = 0, F = 0, N = 0, maxT = 0, pos0 = 0, t0 = 0;
    int reps = 1;            // how many times the op's calls repeat in one run (+= twice;
                             // optimizer steps)
    double theta = 10000.0;  // RoPE's base
    double eps = 0.1;        // norms' eps: not a model's 1e-5, so a kernel that drops or hard-codes eps fails
    bool bias = true;
};

// kTorch: CPU fp32 vs PyTorch in float64 (kernels_reference_test, tools/ref/kernels_ref.py).
enum Modes : unsigned { kF64 = 1, kCuda = 2, kBf16 = 4, kTorch = 8 };
enum Flags : unsigned {
    kTwice = 1,     // CUDA: run twice from the same inputs, both runs compared
    kSameBits = 2,  // with kTwice: the two runs' outputs equal bit for bit (but `unordered`)
};

struct Case {
    const char* op;
    Dims d;
    unsigned modes;
    std::vector<std::pair<Knob, const char*>> knobs = {};
    std::vector<std::vector<int>> packing = {};  // example lengths per batch row: positions restart at 0 per example
    const char* variant = "";                    // op-specific (SGD's kind)
    unsigned flags = 0;
    const char* unordered = "";  // with kSameBits: an output summed with atomics (bits may differ)
    double tol_floor = 0.0;      // the least tolerance (TF32 rounds the GEMM inputs)
    const char* why = "";
};

// One op: its tensors and calls for one row.
struct Call {
    std::vector<Arg> args;
    // The op's calls. More than one stage where a bf16 run's CPU reference continues from the GPU's results of the
    // first stage (`handoff`: as training feeds a backward the forward's bf16 outputs).
    std::vector<std::function<void(Run&)>> stages;
    std::vector<std::string> handoff = {};
    std::function<void(Ref64&)> f64 = {};                                     // empty: no float64 reference
    std::function<void(const Values& in, const Values& gpu)> gpu_check = {};  // invariants of a CUDA run alone
    std::vector<std::pair<std::string, Tol>> scalars = {};                    // scalars the op returns (Run::scalar)
    std::map<std::string, double> params = {};  // the op's constants, for the PyTorch reference script
};

struct OpDef {
    const char* name;
    Call (*build)(const Case&);
};

const std::vector<Case>& kernel_cases();
const std::vector<OpDef>& op_defs();
const OpDef& op_def(const std::string& name);

// The op builders of each family (case_ops_*.cpp).
void add_transformer_ops(std::vector<OpDef>& defs);
void add_llama_ops(std::vector<OpDef>& defs);
void add_update_ops(std::vector<OpDef>& defs);

// Positions (B,T) of a row's packing, or empty.
std::vector<int32_t> packed_positions(const Case& c);
// Batch rows of a case: the packing's row count where it has one, else d.B.
int batch_rows(const Case& c);

}  // namespace llmt::kernels::cases
