// model.init_from resolved: which weights and which config.json a path names (a .safetensors file, or a
// Hugging Face model directory), and the config.json applied to the run's config. Commands call this
// after the server's access policy (server/jobs/job_access.h) allowed the path; config parsing never does.
// docs/formats/hf_directories.md. train, eval, export, estimate, validate and generate/chat --model use it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "models/hf_config.h"

namespace llmt::config {
struct Config;
}

namespace llmt::models {

struct HfSource {
    std::filesystem::path weights;                     // a .safetensors file or a model directory (HfWeights::open)
    std::optional<std::filesystem::path> config_json;  // the config.json that describes them, when there is one
};

// Resolves `init_from` for a model of arch `arch`:
//  - a .safetensors file: its weights; the config.json beside it, if any (our checkpoints have one);
//  - a directory: model.safetensors.index.json or model.safetensors in it, and its config.json, which is
//    required for llama (GPT-2 directories without one are read with the config's shape keys).
// Throws InputError naming model.init_from: the path does not exist, is neither a file nor a directory,
// a directory without weights, a llama directory without config.json.
HfSource resolve_init_from(const std::string& init_from, const std::string& arch);

// model.init_from and data.tokenizer, when they are hub cache folders (models--ORG--NAME) or in one, become
// their snapshot at model.revision (core/hub_cache.h), in the typed config only (cfg.resolved keeps what
// the user wrote). Idempotent. Throws InputError for a revision that is not there (naming those found), a
// snapshot link out of its folder, and a model.revision other than main with no hub cache folder to apply to.
void resolve_hub_revisions(config::Config& cfg);

// resolve_hub_revisions(cfg), then resolve_init_from(cfg.model.init_from, arch), then apply_hf_config
// (models/hf_config.h) with its config.json when there is one: the arch for the lookup is the config.json's model_type
// when the user did not write model.arch. Returns the source; cfg.model and cfg.resolved hold the merged keys. For
// init_from "scratch" returns an empty source (after resolve_hub_revisions). Throws as those.
HfSource prepare_init_from(config::Config& cfg);

// What config.json / generation_config.json record beyond the model keys, for a checkpoint or an export
// of a run of `cfg` (prepare_init_from already applied) with tensors in `dtype` (float32 | bfloat16):
// max_position_embeddings and the bos/eos ids of the config.json the run started from, when it has one;
// else the GPT-2 tokenizer's <|endoftext|> (50256) for data.tokenizer gpt2, and none otherwise (also when
// model.init_from no longer exists where this runs).
HfExportInfo hf_export_info(const config::Config& cfg, const std::string& dtype);

}  // namespace llmt::models
