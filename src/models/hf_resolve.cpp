#include "models/hf_resolve.h"

#include <fmt/format.h>

#include "config/config.h"
#include "core/error.h"
#include "core/hub_cache.h"
#include "models/arch.h"
#include "models/hf_config.h"
#include "models/hf_weights.h"

namespace llmt::models {

namespace fs = std::filesystem;

HfSource resolve_init_from(const std::string& init_from, const std::string& arch) {
    const fs::path p = resolve_hub_path(init_from);  // a hub cache folder (models--ORG--NAME): its refs/main snapshot
    std::error_code ec;
    const auto st = fs::status(p, ec);
    if (!fs::exists(st))
        throw InputError(fmt::format("model.init_from: '{}' does not exist (expected a .safetensors file or a "
                                     "Hugging Face model directory)",
                                     init_from));
    HfSource s;
    s.weights = p;
    if (fs::is_regular_file(st)) {
        const fs::path beside = (p.parent_path().empty() ? fs::path(".") : p.parent_path()) / "config.json";
        if (fs::is_regular_file(beside, ec)) s.config_json = beside;
        return s;
    }
    if (!fs::is_directory(st))
        throw InputError(fmt::format("model.init_from: '{}' is neither a file nor a directory", init_from));
    if (!fs::exists(p / kHfIndexFile, ec) && !fs::exists(p / kHfWeightsFile, ec))
        throw InputError(fmt::format("model.init_from: directory '{}' has neither {} nor {}", init_from,
                                     kHfWeightsFile, kHfIndexFile));
    if (fs::is_regular_file(p / "config.json", ec)) {
        s.config_json = p / "config.json";
    } else if (!arch.empty() && arch_spec(arch).needs_config_json) {
        throw InputError(fmt::format("model.init_from: directory '{}' has no config.json, which a {} model "
                                     "directory needs (RoPE and norm settings are not in the weights)",
                                     init_from, arch));
    }
    return s;
}

void resolve_hub_revisions(config::Config& cfg) {
    bool model_in_cache = false, tokenizer_in_cache = false, model_absent = false;
    if (!cfg.model.init_from.empty() && cfg.model.init_from != "scratch") {
        std::error_code ec;
        // A base that is not here (a checkpoint read on another machine) is not known to ignore the revision.
        model_absent = !fs::exists(cfg.model.init_from, ec);
        cfg.model.init_from = resolve_hub_path(cfg.model.init_from, cfg.model.revision, &model_in_cache).string();
    }
    cfg.data.tokenizer = resolve_hub_path(cfg.data.tokenizer, cfg.model.revision, &tokenizer_in_cache).string();
    check_revision_used(cfg.model.revision, model_in_cache || tokenizer_in_cache || model_absent, "model.revision",
                        "model.init_from or data.tokenizer");
}

HfSource prepare_init_from(config::Config& cfg) {
    resolve_hub_revisions(cfg);
    if (cfg.model.init_from.empty() || cfg.model.init_from == "scratch") return {};
    // A directory's config.json decides the arch unless the user wrote it: look without the family's
    // config.json rule first, then apply the rule for the arch that results.
    HfSource s = resolve_init_from(cfg.model.init_from, cfg.wrote("model.arch") ? cfg.model.arch : "");
    if (s.config_json) {
        apply_hf_config(cfg, read_hf_config(*s.config_json));
        resolve_hub_revisions(cfg);  // the model section was typed again from cfg.resolved (the user's folder)
    }
    return resolve_init_from(cfg.model.init_from, cfg.model.arch);
}

HfExportInfo hf_export_info(const config::Config& cfg, const std::string& dtype) {
    HfExportInfo info;
    info.dtype = dtype;
    // The directory the run started from may be gone where a checkpoint is read later (another machine,
    // a volume no longer mounted): its ids are then unknown, which only leaves them out of the files.
    std::error_code ec;
    const bool have_source = !cfg.model.init_from.empty() && cfg.model.init_from != "scratch" &&
                             std::filesystem::exists(cfg.model.init_from, ec);
    const HfSource src = have_source ? resolve_init_from(cfg.model.init_from, cfg.model.arch) : HfSource{};
    if (src.config_json) {
        const HfConfig hf = read_hf_config(*src.config_json);
        info.max_position_embeddings = hf.max_position_embeddings;
        info.bos_token_id = hf.bos_token_id;
        info.eos_token_id = hf.eos_token_id;
    } else if (cfg.data.tokenizer == "gpt2") {
        info.bos_token_id = info.eos_token_id = {50256};
    }
    return info;
}

}  // namespace llmt::models
