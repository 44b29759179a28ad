// train/model_setup.h.
#include "train/model_setup.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/fs.h"
#include "data/shards/prepare_cache.h"
#include "models/hf_adapter.h"
#include "models/peft.h"
#include "models/registry.h"
#include "train/console.h"

namespace llmt::train {

ShardFiles resolve_data(const config::Config& cfg, bool need_train) {
    ShardFiles f;
    f.format = cfg.data.shard_format == "nanogpt" ? data::ShardFormat::kNanoGptU16 : data::ShardFormat::kLlmc;
    if (cfg.data.source == "shards") {
        f.train = expand_glob(cfg.data.train_shards);
        if (!cfg.data.val_shards.empty()) f.val = expand_glob(cfg.data.val_shards);
        if (need_train && f.train.empty())
            throw InputError(fmt::format("data.train_shards: no file matches '{}' (run `make data`, or `llmtrain data "
                                         "prepare`, to create shards)",
                                         cfg.data.train_shards));
        return f;
    }
    data::PrepareOptions po;
    po.inputs = cfg.data.paths;
    po.corpus.format = data::parse_input_format(cfg.data.source);
    po.corpus.text_field = cfg.data.text_field;
    po.corpus.hf = {cfg.data.split, cfg.data.config_name, cfg.data.revision};
    po.tokenizer = cfg.data.tokenizer;
    // source hf with data.val_split: that split is the validation set, whole; else val_fraction of the split.
    const bool val_split = cfg.data.source == "hf" && !cfg.data.val_split.empty();
    po.val_fraction = val_split ? 0.0 : cfg.data.val_fraction;
    po.seed = cfg.run.seed;
    auto cached = data::prepare_cached(po, cfg.data.cache_dir);
    console().line(fmt::format("data: {} shards in {}", cached.reused ? "reusing" : "prepared", cached.dir.string()));
    f.train = expand_glob((cached.dir / "train_*.bin").string());
    f.val = expand_glob((cached.dir / "val_*.bin").string());
    if (val_split) {
        po.corpus.hf.split = cfg.data.val_split;
        auto v = data::prepare_cached(po, cfg.data.cache_dir);
        console().line(fmt::format("data: {} validation shards ({}) in {}", v.reused ? "reusing" : "prepared",
                                   cfg.data.val_split, v.dir.string()));
        f.val = expand_glob((v.dir / "train_*.bin").string());
    }
    return f;
}

namespace {

// Loads model.init_from's weights (prepare_init_from resolved them): a file or a (sharded) HF directory,
// checksums (when the files have them: files from elsewhere have none) and finiteness checked first.
void load_init_from(models::Model& model, const models::HfSource& source) {
    const models::HfWeights weights = models::HfWeights::open(source.weights);
    models::load_hf_params(model, models::HfWeightsSource(weights));
}

}  // namespace

std::unique_ptr<models::Model> build_model(const config::Config& cfg, const models::HfSource& init_from, Device device,
                                           DType dtype, models::ParamShard shard) {
    auto model = models::make_model(cfg, device, dtype, shard);
    if (init_from.weights.empty()) {
        model->init_random(cfg.run.seed);
    } else {
        load_init_from(*model, init_from);
        model->init_adapters(cfg.run.seed);
        console().line(fmt::format("model: initialised from {}", init_from.weights.string()));
    }
    if (model->lora() && !cfg.lora.init_from.empty()) {
        models::load_peft_adapter(*model, cfg.lora.init_from);
        console().line(fmt::format("lora: adapters from {}", cfg.lora.init_from));
    }
    return model;
}

std::vector<optim::ParamSlot> param_slots(const models::Model& model, bool decay_embeddings) {
    std::vector<optim::ParamSlot> slots;
    const auto& specs = model.param_specs();
    for (size_t i = 0; i < specs.size(); ++i) {
        if (!specs[i].trainable) continue;
        const auto& e = model.params().entry(i);
        bool decay = specs[i].kind == models::ParamKind::kWeight ||
                     (decay_embeddings && specs[i].kind == models::ParamKind::kEmbedding);
        slots.push_back({specs[i].name, Shape(specs[i].shape.begin(), specs[i].shape.end()), e.offset / sizeof(float),
                         decay});
    }
    return slots;
}

}  // namespace llmt::train
