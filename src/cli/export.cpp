// `llmtrain export`: a checkpoint as a Hugging Face model directory that transformers loads with
// from_pretrained unchanged: config.json, generation_config.json, model.safetensors (sharded above
// --max-shard-size with model.safetensors.index.json) and the tokenizer files of the model the run started
// from. Written into a temp directory and renamed, so --out is the whole export or untouched.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/checkpoint_model.h"
#include "cli/command.h"
#include "core/check.h"
#include "core/error.h"
#include "core/fs.h"
#include "models/hf_adapter.h"
#include "models/hf_config.h"
#include "models/hf_resolve.h"
#include "models/hf_weights.h"
#include "train/run_plan.h"

namespace llmt::cli {

namespace {

namespace fs = std::filesystem;

struct ExportOptions {
    std::string checkpoint, config, out, dtype = "bf16", max_shard_size = "5GB";
    std::vector<std::string> sets;
};

// Tokenizer files of the HF directory the run started from (model.init_from), copied as they are.
std::vector<fs::path> tokenizer_files(const config::Config& cfg) {
    static const char* const kNames[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                         "tokenizer.model", "vocab.json", "merges.txt"};
    std::vector<fs::path> found;
    if (cfg.model.init_from.empty() || cfg.model.init_from == "scratch") return found;
    std::error_code ec;
    const fs::path dir(cfg.model.init_from);
    if (!fs::is_directory(dir, ec)) return found;
    for (const char* n : kNames)
        if (fs::is_regular_file(dir / n, ec)) found.push_back(dir / n);
    return found;
}

void run_export(const ExportOptions& o) {
    LLMT_CHECK_AS(UsageError, o.dtype == "bf16" || o.dtype == "fp32", "export: --dtype must be bf16 or fp32, got '{}'", o.dtype);
    const std::uint64_t shard_bytes = train::parse_memory_size(o.max_shard_size);
    const LoadedModel loaded = load_checkpoint_model("export", o.checkpoint, o.config, o.sets);
    const models::Model& model = *loaded.model;

    models::HfExportDir out(o.out);
    const models::HfExportInfo info = models::hf_export_info(loaded.config, o.dtype == "bf16" ? "bfloat16" : "float32");
    write_file_atomic(out.dir() / "config.json", models::hf_config_json(loaded.config.model, info).dump(2) + "\n");
    write_file_atomic(out.dir() / "generation_config.json", models::hf_generation_config_json(info).dump(2) + "\n");
    std::vector<std::vector<float>> scratch;
    std::vector<models::HfTensor> tensors;
    for (const TensorRef& t : models::hf_tensors(model, model.params(), scratch))
        tensors.push_back({t.name, t.shape, static_cast<const float*>(t.data)});
    models::HfWriteOptions wo;
    wo.dtype = o.dtype == "bf16" ? models::HfDType::kBF16 : models::HfDType::kF32;
    wo.max_shard_bytes = shard_bytes;
    wo.metadata = {{"llmtrain.checkpoint", loaded.source}};
    const std::vector<std::string> files = models::write_hf_weights(out.dir(), tensors, wo);
    const std::vector<fs::path> tok = tokenizer_files(loaded.config);
    for (const fs::path& f : tok) fs::copy_file(f, out.dir() / f.filename());
    out.commit();
    fmt::print(stderr, "export: {} ({}, {:.2f}M parameters, {}) -> {}: config.json, generation_config.json, {}{}\n",
               loaded.source, model.arch(), static_cast<double>(model.num_parameters()) / 1e6,
               o.dtype, o.out, fmt::join(files, ", "),
               tok.empty() ? "" : fmt::format(", {} tokenizer file(s) from {}", tok.size(), loaded.config.model.init_from));
}

}  // namespace

void register_export(CLI::App& app, Runtime& rt) {
    auto* cmd = app.add_subcommand("export", "Write a checkpoint as a Hugging Face model directory (transformers "
                                             "from_pretrained)");
    auto o = std::make_shared<ExportOptions>();
    cmd->add_option("--checkpoint", o->checkpoint, "a checkpoints/step_N directory, a checkpoints/ directory or a run directory")
        ->required();
    cmd->add_option("--out,-o", o->out, "the model directory to write (created; an earlier export there is replaced)")
        ->required();
    cmd->add_option("--dtype", o->dtype, "tensor dtype in the files: bf16 or fp32")->capture_default_str();
    cmd->add_option("--max-shard-size", o->max_shard_size,
                    "above this the weights are split into shards with an index (transformers' default 5GB)")
        ->capture_default_str();
    cmd->add_option("--config,-c", o->config,
                    "YAML config of the model (default: the resolved config stored in the checkpoint's state.json)");
    cmd->add_option("--set", o->sets, "override a config key (repeatable)")->allow_extra_args(false);
    cmd->callback([o, &rt] {
        run_export(*o);
        rt.exit_code = 0;
    });
}

}  // namespace llmt::cli
