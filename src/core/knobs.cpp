// The knob table and its one reader of the environment (knobs.h).
#include "core/knobs.h"

#include <fmt/format.h>

#include <array>
#include <cstdlib>

#include "core/check.h"
#include "core/error.h"

namespace llmt {
namespace {

constexpr const char* kReadme = "src/kernels/README.md#knobs";
constexpr const char* kSwitch = "0|1";

// Defaults are the paths docs/benchmarks.md measured fastest; every "0" of a switch below runs code that
// stays in src/ for another reason (a fallback, or the unfused ops composed), so the knob costs no code.
constexpr std::array<KnobInfo, kKnobCount> kTable{{
    {Knob::kCpuIsa, "LLMTRAIN_CPU_ISA", "auto|scalar|avx2|avx512", "auto",
     "caps the ISA of the hand-written CPU kernels (auto: the widest this CPU has)", kReadme},
    {Knob::kGemm, "LLMTRAIN_GEMM", "auto|onednn|openblas", "auto",
     "CPU GEMM library (auto: oneDNN where built, else OpenBLAS)", kReadme},
    {Knob::kCudaSync, "LLMTRAIN_CUDA_SYNC", kSwitch, "0",
     "1: synchronise after every CUDA launch so an asynchronous fault names its kernel (slow; debugging)",
     kReadme},
    {Knob::kCudaTf32, "LLMTRAIN_CUDA_TF32", kSwitch, "0",
     "1: fp32 GEMMs on TF32 tensor cores (~3e-4 relative error)", kReadme},
    {Knob::kCublasLtTune, "LLMTRAIN_CUBLASLT_TUNE", kSwitch, "1",
     "0: take cuBLASLt's first heuristic pick instead of timing its top candidates (same algorithm every run)",
     kReadme},
    {Knob::kCudnnAttention, "LLMTRAIN_CUDNN_ATTENTION", kSwitch, "1",
     "0: bf16 attention skips cuDNN's fused engine and runs our flash kernels", kReadme},
    {Knob::kFlashAttention, "LLMTRAIN_FLASH_ATTENTION", kSwitch, "1",
     "0: bf16 attention skips our tensor-core flash kernels and runs the simple kernels", kReadme},
    {Knob::kGeluFusion, "LLMTRAIN_GELU_FUSION", kSwitch, "1",
     "0: bf16 GELU as separate kernels instead of cuBLASLt's GELU epilogues", kReadme},
    {Knob::kFuseResidual, "LLMTRAIN_FUSE_RESIDUAL", kSwitch, "1",
     "0: the residual add as its own kernel instead of cuBLASLt's C matrix", kReadme},
    {Knob::kFuseLnColsum, "LLMTRAIN_FUSE_LN_COLSUM", kSwitch, "1",
     "0: bias-gradient column sums as a separate pass instead of inside LayerNorm backward", kReadme},
    {Knob::kFuseAttnColsum, "LLMTRAIN_FUSE_ATTN_COLSUM", kSwitch, "1",
     "0: qkv bias-gradient column sums as a separate pass instead of inside flash attention backward",
     kReadme},
    {Knob::kAdamwRuns, "LLMTRAIN_ADAMW_RUNS", kSwitch, "1",
     "0: one AdamW launch per parameter run instead of one for all runs", kReadme},
    {Knob::kLmHeadRows, "LLMTRAIN_LM_HEAD_ROWS", "auto|all|16|256|1024|4096", "auto",
     "rows per chunk of the LM head's logits (auto: from the activation memory; all: one chunk, the whole "
     "batch's logits at once, the unfused reference)",
     kReadme},
}};

constexpr std::array<LocationInfo, kLocationCount> kLocations{{
    {Location::kHome, "LLMTRAIN_HOME",
     "where gpt2.tiktoken is looked for first (<home>/tokenizers/), before the installed share directory",
     "src/data/tokenizer/tokenizer.h"},
    {Location::kThroughputFile, "LLMTRAIN_THROUGHPUT_FILE",
     "the measured throughput table estimates read, instead of the configs/throughput.jsonl shipped",
     "docs/server.md"},
    {Location::kOutputDir, "LLMTRAIN_OUTPUT_DIR",
     "a command job's run directory, set by the server and k8s render for the program they start",
     "docs/command_jobs.md"},
    {Location::kMetricsFile, "LLMTRAIN_METRICS_FILE",
     "a command job's metrics.jsonl, set beside LLMTRAIN_OUTPUT_DIR", "docs/command_jobs.md"},
    {Location::kPodIndex, "LLMTRAIN_POD_INDEX",
     "a StatefulSet pod's ordinal (the downward API's pod-index label), read as the node rank by launch",
     "docs/kubernetes.md"},
}};

size_t location_slot(Location l) {
    LLMT_ASSERT(l >= Location{} && l < Location::kCount);
    return static_cast<size_t>(l);
}

// The index of `value` among the '|'-separated `choices`, or -1.
int choice_index(std::string_view choices, std::string_view value) {
    int i = 0;
    for (size_t start = 0;; ++i) {
        const size_t bar = choices.find('|', start);
        if (choices.substr(start, bar - start) == value) return i;
        if (bar == std::string_view::npos) return -1;
        start = bar + 1;
    }
}

std::string bad_value_message(const KnobInfo& info, std::string_view value) {
    return fmt::format("environment variable {}='{}': expected one of {} (default {}; see {})", info.name, value,
                       info.choices, info.dflt, info.doc);
}

int default_choice(const KnobInfo& info) { return choice_index(info.choices, info.dflt); }

// One slot per knob: the choice in effect, whether it was set, and the raw text of an invalid value.
struct Values {
    std::array<int, kKnobCount> choice{};
    std::array<bool, kKnobCount> set{};
    std::array<std::string, kKnobCount> bad;
};

Values read_environment() {
    Values v;
    for (const KnobInfo& info : kTable) {
        const auto k = static_cast<size_t>(info.knob);
        const char* env = std::getenv(info.name);  // the one reader of the LLMTRAIN_* knobs
        v.set[k] = env && *env;
        const int c = v.set[k] ? choice_index(info.choices, env) : default_choice(info);
        v.choice[k] = c >= 0 ? c : default_choice(info);
        if (c < 0) v.bad[k] = env;
    }
    return v;
}

Values& values() {
    static Values v = read_environment();
    return v;
}

size_t slot(Knob k) {
    LLMT_ASSERT(k >= Knob{} && k < Knob::kCount);
    return static_cast<size_t>(k);
}

}  // namespace

const std::array<KnobInfo, kKnobCount>& knob_table() { return kTable; }

const KnobInfo& knob_info(Knob k) { return kTable[slot(k)]; }

int knob_choice(Knob k) { return values().choice[slot(k)]; }

std::string knob_text(Knob k) {
    std::string_view choices = knob_info(k).choices;
    for (int i = 0; i < knob_choice(k); ++i) choices.remove_prefix(choices.find('|') + 1);
    return std::string(choices.substr(0, choices.find('|')));
}

bool knob_is_set(Knob k) { return values().set[slot(k)]; }

void check_knobs() {
    std::string msg;
    for (const KnobInfo& info : kTable) {
        const std::string& bad = values().bad[slot(info.knob)];
        if (!bad.empty()) msg += (msg.empty() ? "" : "\n") + bad_value_message(info, bad);
    }
    if (!msg.empty()) throw InputError(msg);
}

const std::array<LocationInfo, kLocationCount>& location_table() { return kLocations; }

const char* location_name(Location l) { return kLocations[location_slot(l)].name; }

std::string location_value(Location l) {
    const char* v = std::getenv(location_name(l));  // the one reader of the LLMTRAIN_* locations
    return v ? std::string(v) : std::string();
}

ScopedKnob::ScopedKnob(Knob k, std::string_view value) : knob_(k), saved_(values().choice[slot(k)]) {
    const int c = choice_index(knob_info(k).choices, value);
    if (c < 0) throw InputError(bad_value_message(knob_info(k), value));
    values().choice[slot(k)] = c;
    saved_set_ = values().set[slot(k)];
    values().set[slot(k)] = true;
}

ScopedKnob::~ScopedKnob() {
    values().choice[slot(knob_)] = saved_;
    values().set[slot(knob_)] = saved_set_;
}

}  // namespace llmt
