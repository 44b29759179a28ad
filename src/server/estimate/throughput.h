// Measured training throughput: the rows bench/ runs append to configs/throughput.jsonl (one JSON object
// per line: device, card, world size, model shape, tokens/s, machine, date, command), and the
// interpolation that turns them into a per-rank rate and a scaling efficiency for a model and world size
// that were not measured. Estimates (server/estimate/estimate.h, `llmtrain estimate`) are built on this and name
// the rows they used. docs/server.md "Estimates".
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace llmt::server {

// A language-model row counts tokens; an image-classifier row (one with "images_per_s", "flops_per_image"
// and "arch" in the file) counts images, and its rate and FLOPs sit in the same two fields, per image.
struct ThroughputRow {
    std::string device;        // "cpu" | "cuda"
    std::string card;          // what ran it: the CPU model and core count, or the GPU's name
    int world_size = 1;        // ranks (processes) of the run
    int threads_per_rank = 0;  // CPU runs; 0 when not recorded
    double flops_per_token = 0;  // 6N + 12LCT of the model that ran (models::model_flops_per_token); per image
    double tokens_per_s = 0;     // all ranks together; images/s for a classifier row
    std::string arch;            // "" (a language model) | "mlp" | "cnn" (an image classifier)
    std::string model;           // "L4 d256 h4 T256" or "cnn 28x28x1 c32,64 h128 k10" (for people reading the rows)
    std::string precision;       // "fp32" | "bf16"
    int micro_batch_size = 0;    // per rank; 0 when not recorded
    std::string date, machine, command, source;
    int line = 0;  // 1-based line in the file, to name it

    bool images() const { return !arch.empty(); }
    nlohmann::json to_json() const;
};

// The rows of one workload: arch "" the language-model rows, else the classifier rows of that arch.
std::vector<ThroughputRow> rows_of_arch(const std::vector<ThroughputRow>& rows, const std::string& arch);

// Throws InputError naming the file, the line and the field for a row that is not valid.
std::vector<ThroughputRow> load_throughput(const std::filesystem::path& path);

// The rows an estimator uses, where they came from ("" = no table found) and the card to prefer ("" =
// the most recently measured one of the job's device).
struct ThroughputTable {
    std::vector<ThroughputRow> rows;
    std::string path;
    std::string card;
};

// The table shipped with the binary: $LLMTRAIN_THROUGHPUT_FILE, else configs/throughput.jsonl next to
// the installed configs (<exe>/../share/llmtrain/configs/, the image) or in the source tree the binary
// was built in (<exe>/../../configs/, build/release/llmtrain), else ./configs/. nullopt when none exists.
std::optional<std::filesystem::path> default_throughput_file();

// What the rows say for one model on one device at world size W.
struct ThroughputEstimate {
    bool measured = false;        // false: no row for the device: nothing below is set
    std::string card;             // the card whose rows were used
    double tokens_per_s_rank = 0;  // one rank alone (world size 1)
    int threads_per_rank = 0;      // of the rows the rate came from (CPU; 0 = not recorded)
    double efficiency = 1;         // tokens/s at W / (W x tokens/s at 1)
    std::string rate_basis;        // how tokens_per_s_rank was obtained (exact / interpolated / nearest)
    std::string efficiency_basis;  // how efficiency was obtained (measured / interpolated / extrapolated / none)
    std::vector<int> rows_used;    // line numbers
};

// device: "cpu" | "cuda"; card: "" = the card of the most recent row of that device, else a substring
// that must match the rows' card; threads: the job's threads per rank (0 = unknown: the rows with the
// most threads are used). The per-rank rate is interpolated in achieved FLOP/s (tokens/s x
// flops/token) between the two measured model sizes around `flops_per_token` (log-log), or taken from the
// nearest one outside the measured range. Efficiency at W comes from rows with world size > 1 (each
// divided by the same model's world-size-1 row), interpolated in log2(W) between measured sizes and
// extrapolated past the largest at the same loss per doubling (a world-size-W row is compared with the
// world-size-1 row of the same model and threads per rank); with no multi-rank rows it is 1 and
// efficiency_basis says it was not measured.
// `unit` names what a row counts ("token", "image") in the bases' text. Pass the rows of one workload
// (rows_of_arch).
ThroughputEstimate estimate_throughput(const std::vector<ThroughputRow>& rows, const std::string& device,
                                       const std::string& card, double flops_per_token, int world_size,
                                       int threads = 0, const std::string& unit = "token");

}  // namespace llmt::server
