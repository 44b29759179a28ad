// `llmtrain export`: a checkpoint as a Hugging Face model directory that transformers loads with
// from_pretrained unchanged: config.json, generation_config.json, model.safetensors (sharded above
// --max-shard-size with model.safetensors.index.json) and the run's tokenizer files. A LoRA run exports its adapters
// as a PEFT directory instead (adapter_config.json and adapter_model.safetensors; `llmtrain merge` folds them into the
// base). Written into a temp directory and renamed, so --out is the whole export or untouched. The run's tokenizer
// goes beside the weights, its bos/eos/pad ids into config.json and generation_config.json.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/checkpoint_model.h"
#include "cli/command.h"
#include "cli/hub_revision.h"
#include "core/check.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/json_parse.h"
#include "models/hf_adapter.h"
#include "models/hf_config.h"
#include "models/hf_resolve.h"
#include "models/hf_weights.h"
#include "models/peft.h"
#include "train/hf_model_files.h"
#include "train/run_plan.h"

namespace llmt::cli {

namespace {

namespace fs = std::filesystem;

struct ExportOptions {
    std::string checkpoint, config, out, dtype = "bf16", max_shard_size = "5GB", tokenizer, revision = "main";
    std::vector<std::string> sets;
};

// config.json, generation_config.json and the run's tokenizer files (train/hf_model_files.h), the weights
// (the model's own, fp32 on the host) in `dtype`, sharded above shard_bytes, into the export directory; one
// line on stderr. `origin_key` records the source in the safetensors metadata; `tokenizer` replaces the
// run's tokenizer (then it must load and fit the model).
void write_model_dir(const models::HfExportDir& out, const LoadedModel& loaded, const std::string& dtype,
                     std::uint64_t shard_bytes, const std::string& origin_key, const std::string& tokenizer) {
    const models::Model& model = *loaded.model;
    train::HfModelFiles files(loaded.config, dtype == "bf16" ? "bfloat16" : "float32", tokenizer, !tokenizer.empty());
    files.write(out.dir());
    const Arena host = models::host_f32_copy(model.base());
    std::vector<std::vector<float>> scratch;
    std::vector<models::HfTensor> tensors;
    for (const TensorRef& t : models::hf_tensors(model.base().specs(), host, scratch))
        tensors.push_back({t.name, t.shape, static_cast<const float*>(t.data)});
    models::HfWriteOptions wo;
    wo.dtype = dtype == "bf16" ? models::HfDType::kBF16 : models::HfDType::kF32;
    wo.max_shard_bytes = shard_bytes;
    wo.metadata = {{origin_key, loaded.source}};
    const std::vector<std::string> weights = models::write_hf_weights(out.dir(), tensors, wo);
    fmt::print(stderr, "{} ({}, {:.2f}M parameters, {}) -> {}: config.json, generation_config.json, {}; {}\n",
               loaded.source, model.arch(), static_cast<double>(model.num_parameters()) / 1e6, dtype,
               out.final_dir().string(), fmt::join(weights, ", "), files.describe());
}

void run_export(const ExportOptions& o) {
    LLMT_CHECK_AS(UsageError, o.dtype == "bf16" || o.dtype == "fp32", "export: --dtype must be bf16 or fp32, got '{}'",
                  o.dtype);
    const std::uint64_t shard_bytes = train::parse_memory_size(o.max_shard_size);
    const LoadedModel loaded = load_checkpoint_model("export", o.checkpoint, o.config, o.sets, /*merged=*/false);
    const models::Model& model = *loaded.model;

    models::HfExportDir out(o.out);
    if (model.lora()) {  // a LoRA run: its adapters as PEFT writes them, loadable beside the base
        const std::string base = loaded.config.model.init_from == "scratch" ? "" : loaded.config.model.init_from;
        models::write_peft_adapter(model, out.dir(), base);
        out.commit();
        fmt::print(stderr, "export: {} (LoRA r {}, {} modules, {} parameters) -> {}: {}, {} (base {})\n",
                   loaded.source, model.lora()->spec().r, model.lora()->modules().size(),
                   model.trained().num_parameters(), o.out, models::kAdapterConfigFile, models::kAdapterWeightsFile,
                   base.empty() ? "drawn from run.seed" : base);
        return;
    }
    fmt::print(stderr, "export: ");
    write_model_dir(out, loaded, o.dtype, shard_bytes, "llmtrain.checkpoint", o.tokenizer);
    out.commit();
}

struct MergeOptions {
    std::string model, adapter, out, dtype = "auto", max_shard_size = "5GB", tokenizer, revision = "main";
};

// The dtype of the base's weight files: bf16, or fp32 for fp32 files (and for fp16/fp64, which the
// writer has no other spelling for: noted on stderr).
std::string base_dtype(const std::string& model_dir) {
    const models::HfSource src = models::resolve_init_from(model_dir, "");
    const models::HfWeights w = models::HfWeights::open(src.weights);
    const auto names = w.names();
    if (names.empty()) return "fp32";
    const StDType t = w.info(names.front()).dtype;
    if (t == StDType::kBF16) return "bf16";
    if (t != StDType::kF32)
        fmt::print(stderr, "merge: the base's tensors are {}; the merged weights are written in fp32\n",
                   st_dtype_name(t));
    return "fp32";
}

// `llmtrain merge`: W += scale B A of a PEFT adapter folded into its HF base, in fp32 on the host, then
// written as an HF model directory in the base's dtype (PEFT's merge_and_unload + save_pretrained).
void run_merge(const MergeOptions& o) {
    LLMT_CHECK_AS(UsageError, o.dtype == "auto" || o.dtype == "bf16" || o.dtype == "fp32",
                  "merge: --dtype must be auto, bf16 or fp32, got '{}'", o.dtype);
    const std::uint64_t shard_bytes = train::parse_memory_size(o.max_shard_size);
    const fs::path adapter_cfg = fs::path(o.adapter) / models::kAdapterConfigFile;
    if (!fs::is_regular_file(adapter_cfg))
        throw InputError(fmt::format("merge: --adapter '{}' has no {} (expected a PEFT adapter directory)", o.adapter,
                                     models::kAdapterConfigFile));
    const nlohmann::json ac = parse_json(read_file(adapter_cfg, 1 << 20), adapter_cfg.string());
    if (!ac.is_object() || !ac.contains("r") || !ac["r"].is_number_integer())
        throw InputError(fmt::format("merge: {}: expected an object with an integer \"r\"", adapter_cfg.string()));
    const std::vector<std::string> sets = {fmt::format("lora.r={}", ac["r"].get<int64_t>()),
                                           fmt::format("lora.init_from={}", o.adapter)};
    LoadedModel loaded = load_model_dir("merge", o.model, sets, /*with_adapter=*/true);
    const std::string dtype = o.dtype == "auto" ? base_dtype(o.model) : o.dtype;
    loaded.model->merge_adapters();
    models::HfExportDir out(o.out);
    fmt::print(stderr, "merge: {} + {}: ", o.model, o.adapter);
    write_model_dir(out, loaded, dtype, shard_bytes, "llmtrain.merged_from", o.tokenizer);
    out.commit();
}

}  // namespace

void register_merge(CLI::App& app, Runtime& rt) {
    auto* cmd = app.add_subcommand("merge", "Fold a PEFT LoRA adapter into its Hugging Face base model and write the "
                                            "merged model directory (PEFT's merge_and_unload)");
    auto o = std::make_shared<MergeOptions>();
    cmd->add_option("--model", o->model,
                    "the base: a Hugging Face model directory or hub cache folder (models--ORG--NAME)")
        ->required();
    add_revision_option(*cmd, &o->revision, "--revision", "--model and --tokenizer");
    cmd->add_option("--adapter", o->adapter,
                    "a PEFT adapter directory (adapter_config.json, adapter_model.safetensors): "
                    "`llmtrain export` of a LoRA run, or PEFT's save_pretrained")
        ->required();
    cmd->add_option("--out,-o", o->out, "the merged model directory to write (created; an earlier one is replaced)")
        ->required();
    cmd->add_option("--dtype", o->dtype, "tensor dtype in the files: auto (the base's), bf16 or fp32")
        ->capture_default_str();
    cmd->add_option("--max-shard-size", o->max_shard_size,
                    "above this the weights are split into shards with an index")
        ->capture_default_str();
    cmd->add_option("--tokenizer", o->tokenizer,
                    "the tokenizer to write beside the weights (default: the base directory's tokenizer files)");
    cmd->callback([o, &rt] {
        resolve_hub_options(o->revision, {&o->model, &o->tokenizer}, "--revision", "--model or --tokenizer");
        run_merge(*o);
        rt.exit_code = 0;
    });
}

void register_export(CLI::App& app, Runtime& rt) {
    auto* cmd = app.add_subcommand("export", "Write a checkpoint as a Hugging Face model directory (transformers "
                                             "from_pretrained)");
    auto o = std::make_shared<ExportOptions>();
    cmd->add_option("--checkpoint", o->checkpoint,
                    "a checkpoints/step_N directory, a checkpoints/ directory or a run directory")
        ->required();
    cmd->add_option("--out,-o", o->out, "the model directory to write (created; an earlier export there is replaced)")
        ->required();
    cmd->add_option("--dtype", o->dtype, "tensor dtype in the files: bf16 or fp32")->capture_default_str();
    cmd->add_option("--max-shard-size", o->max_shard_size,
                    "above this the weights are split into shards with an index (transformers' default 5GB)")
        ->capture_default_str();
    cmd->add_option("--tokenizer", o->tokenizer,
                    "the tokenizer to write beside the weights (default: the run's: data.tokenizer, or "
                    "model.init_from's tokenizer files)");
    cmd->add_option("--config,-c", o->config,
                    "YAML config of the model (default: the resolved config stored in the checkpoint's state.json)");
    cmd->add_option("--set", o->sets, "override a config key (repeatable)")->allow_extra_args(false);
    add_revision_option(*cmd, &o->revision, "--revision", "--tokenizer");
    cmd->callback([o, &rt] {
        resolve_hub_options(o->revision, {&o->tokenizer}, "--revision", "--tokenizer");
        run_export(*o);
        rt.exit_code = 0;
    });
}

}  // namespace llmt::cli
