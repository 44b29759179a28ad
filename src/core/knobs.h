// Every LLMTRAIN_* environment variable, in two typed tables (knobs.cpp):
// - the engine's tuning knobs, which choose between code paths that compute the same thing (an ISA, a GEMM
//   library, a fused or unfused kernel, a debugging sync): each with its choices, default, what it changes
//   and where it is documented; the environment is read once, by knob_values();
// - the locations, which name where a file or an identity is (the tokenizer home, the throughput table, a
//   command job's output directory and metrics file, a StatefulSet pod's index): read at each use, since
//   the launcher and the server set them for the processes they start.
// `llmtrain version --json` lists both. No other code reads an LLMTRAIN_* variable.
// The table and its rules are documented in src/kernels/README.md ("Knobs").
// Thread safety: reads are safe from any thread; ScopedKnob is for tests and must not run concurrently
// with code that reads the knob it overrides.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace llmt {

enum class Knob : int {
    kCpuIsa,           // LLMTRAIN_CPU_ISA
    kGemm,             // LLMTRAIN_GEMM
    kCudaSync,         // LLMTRAIN_CUDA_SYNC
    kCudaTf32,         // LLMTRAIN_CUDA_TF32
    kCublasLtTune,     // LLMTRAIN_CUBLASLT_TUNE
    kCudnnAttention,   // LLMTRAIN_CUDNN_ATTENTION
    kFlashAttention,   // LLMTRAIN_FLASH_ATTENTION
    kGeluFusion,       // LLMTRAIN_GELU_FUSION
    kFuseResidual,     // LLMTRAIN_FUSE_RESIDUAL
    kFuseLnColsum,     // LLMTRAIN_FUSE_LN_COLSUM
    kFuseAttnColsum,   // LLMTRAIN_FUSE_ATTN_COLSUM
    kAdamwRuns,        // LLMTRAIN_ADAMW_RUNS
    kLmHeadRows,       // LLMTRAIN_LM_HEAD_ROWS
    kCount,
};

struct KnobInfo {
    Knob knob;
    const char* name;     // the environment variable
    const char* choices;  // '|'-separated accepted values; a switch is "0|1"
    const char* dflt;     // one of choices
    const char* changes;  // what it changes, one sentence
    const char* doc;      // where it is documented
};

constexpr size_t kKnobCount = static_cast<size_t>(Knob::kCount);

// Every knob, in Knob order. (std::array, not std::span: the CUDA sources that read knobs are C++17.)
const std::array<KnobInfo, kKnobCount>& knob_table();
const KnobInfo& knob_info(Knob k);

// The knob's value as the index of one of its choices (a switch: 0 off, 1 on). The environment is read at
// the first call of any of these. Never throws, so kernels may read knobs inside OpenMP regions: a value
// that is not one of the choices reads as the default, and check_knobs() reports it.
int knob_choice(Knob k);
inline bool knob_on(Knob k) { return knob_choice(k) == 1; }
std::string knob_text(Knob k);  // the value in effect, as written in the table ("0", "auto", ...)
bool knob_is_set(Knob k);       // set in the environment (or by a ScopedKnob), even to its default

// Throws InputError naming every knob whose environment value is not one of its choices, with the
// accepted values. cli/main.cpp calls it before any subcommand runs.
void check_knobs();

// Test-only: sets a knob for the object's lifetime (value: one of its choices, else InputError), then
// restores the previous value. Lets one process exercise every path a knob selects.
// ---- locations ---------------------------------------------------------------------------------------

enum class Location : int {
    kHome,            // LLMTRAIN_HOME
    kThroughputFile,  // LLMTRAIN_THROUGHPUT_FILE
    kOutputDir,       // LLMTRAIN_OUTPUT_DIR
    kMetricsFile,     // LLMTRAIN_METRICS_FILE
    kPodIndex,        // LLMTRAIN_POD_INDEX
    kCount,
};

struct LocationInfo {
    Location location;
    const char* name;  // the environment variable
    const char* what;  // what it names and who sets it, one sentence
    const char* doc;   // where it is documented
};

constexpr size_t kLocationCount = static_cast<size_t>(Location::kCount);

const std::array<LocationInfo, kLocationCount>& location_table();
const char* location_name(Location l);  // the variable's name, for code that sets it for a child process
// The variable's value now; "" when it is unset or empty.
std::string location_value(Location l);

class ScopedKnob {
public:
    ScopedKnob(Knob k, std::string_view value);
    ~ScopedKnob();
    ScopedKnob(const ScopedKnob&) = delete;
    ScopedKnob& operator=(const ScopedKnob&) = delete;

private:
    Knob knob_;
    int saved_;
    bool saved_set_ = false;
};

}  // namespace llmt
