#include "config/typed.h"

namespace llmt::config {

Config from_resolved(const nlohmann::ordered_json& r) {
    Config c;
    c.resolved = r;
    c.schema_version = r.at("schema_version").get<int>();

    const auto& run = r.at("run");
    c.run.name = run.at("name");
    c.run.seed = run.at("seed").get<uint64_t>();
    c.run.device = run.at("device");
    c.run.deterministic = run.at("deterministic");
    c.run.threads = run.at("threads");

    const auto& m = r.at("model");
    c.model.arch = m.at("arch");
    c.model.n_layer = m.at("n_layer");
    c.model.n_head = m.at("n_head");
    c.model.n_kv_head = m.at("n_kv_head");
    c.model.d_model = m.at("d_model");
    c.model.d_ff = m.at("d_ff");
    c.model.block_size = m.at("block_size");
    c.model.vocab_size = m.at("vocab_size");
    c.model.vocab_pad_multiple = m.at("vocab_pad_multiple");
    c.model.dropout = m.at("dropout").get<float>();
    c.model.tie_embeddings = m.at("tie_embeddings");
    c.model.norm_eps = m.at("norm_eps").get<float>();
    c.model.head_dim = m.at("head_dim");
    c.model.init_from = m.at("init_from");
    c.model.revision = m.at("revision");
    // The families' sections (config.h): their keys stay flat in the YAML and the resolved config.
    auto& rope = c.model.rope;
    rope.theta = m.at("rope_theta").get<float>();
    const auto& rs = m.at("rope_scaling");
    rope.scaling.type = rs.at("type");
    rope.scaling.factor = rs.at("factor");
    rope.scaling.low_freq_factor = rs.at("low_freq_factor");
    rope.scaling.high_freq_factor = rs.at("high_freq_factor");
    rope.scaling.original_max_position_embeddings = rs.at("original_max_position_embeddings");
    c.model.mistral.sliding_window = m.at("sliding_window");
    auto& image = c.model.classifier;
    image.image_size = m.at("image_size");
    image.in_channels = m.at("in_channels");
    image.num_classes = m.at("num_classes");
    for (const auto& x : m.at("conv_channels")) image.conv_channels.push_back(static_cast<int>(x.get<double>()));
    for (const auto& x : m.at("hidden_sizes")) image.hidden_sizes.push_back(static_cast<int>(x.get<double>()));

    const auto& l = r.at("lora");
    c.lora.r = l.at("r");
    c.lora.alpha = l.at("alpha");
    c.lora.dropout = l.at("dropout");
    c.lora.target_modules = l.at("target_modules").get<std::vector<std::string>>();
    c.lora.use_rslora = l.at("use_rslora");
    c.lora.init_from = l.at("init_from");

    const auto& d = r.at("data");
    c.data.source = d.at("source");
    c.data.paths = d.at("paths").get<std::vector<std::string>>();
    c.data.text_field = d.at("text_field");
    c.data.split = d.at("split");
    c.data.val_split = d.at("val_split");
    c.data.config_name = d.at("config_name");
    c.data.revision = d.at("revision");
    c.data.tokenizer = d.at("tokenizer");
    c.data.val_fraction = d.at("val_fraction");
    c.data.cache_dir = d.at("cache_dir");
    c.data.train_shards = d.at("train_shards");
    c.data.val_shards = d.at("val_shards");
    c.data.shard_format = d.at("shard_format");
    c.data.shuffle = d.at("shuffle");
    c.data.packing = d.at("packing");
    c.data.train_images = d.at("train_images");
    c.data.train_labels = d.at("train_labels");
    c.data.test_images = d.at("test_images");
    c.data.test_labels = d.at("test_labels");
    c.data.pixel_mean = d.at("pixel_mean");
    c.data.pixel_std = d.at("pixel_std");
    c.data.crop_padding = d.at("augment").at("crop_padding");
    c.data.hflip = d.at("augment").at("hflip");

    const auto& t = r.at("trainer");
    c.trainer.max_steps = t.at("max_steps");
    c.trainer.epochs = t.at("epochs");
    c.trainer.micro_batch_size = t.at("micro_batch_size");
    c.trainer.grad_accum_steps = t.at("grad_accum_steps");
    c.trainer.lr = t.at("lr");
    c.trainer.min_lr = t.at("min_lr");
    c.trainer.warmup_steps = t.at("warmup_steps");
    c.trainer.schedule = t.at("schedule");
    c.trainer.weight_decay = t.at("weight_decay");
    c.trainer.decay_embeddings = t.at("decay_embeddings");
    c.trainer.betas = {t.at("betas").at(0).get<double>(), t.at("betas").at(1).get<double>()};
    c.trainer.eps = t.at("eps");
    c.trainer.optimizer = t.at("optimizer");
    c.trainer.momentum = t.at("momentum");
    c.trainer.dampening = t.at("dampening");
    c.trainer.nesterov = t.at("nesterov");
    c.trainer.max_grad_norm = t.at("max_grad_norm");
    c.trainer.precision = t.at("precision");
    c.trainer.conv_tf32 = t.at("conv_tf32");
    c.trainer.recompute = t.at("recompute");
    c.trainer.log_every_steps = t.at("log_every_steps");
    c.trainer.eval_every_steps = t.at("eval_every_steps");
    c.trainer.eval_steps = t.at("eval_steps");
    c.trainer.save_every_steps = t.at("save_every_steps");
    c.trainer.keep_last = t.at("keep_last");

    const auto& ds = r.at("dist");
    c.dist.backend = ds.at("backend");
    c.dist.timeout_sec = ds.at("timeout_sec");
    c.dist.bucket_mb = ds.at("bucket_mb");
    c.dist.overlap = ds.at("overlap");
    c.dist.zero_stage = ds.at("zero_stage");

    const auto& tr = r.at("tracking");
    c.tracking.jsonl = tr.at("jsonl");
    const auto& ml = tr.at("mlflow");
    c.tracking.mlflow.uri = ml.at("uri");
    c.tracking.mlflow.experiment = ml.at("experiment");
    c.tracking.mlflow.run_name = ml.at("run_name");
    c.tracking.tensorboard_dir = tr.at("tensorboard_dir");

    const auto& o = r.at("output");
    c.output.root_dir = o.at("root_dir");
    c.output.run_id = o.at("run_id");
    c.output.sync = o.at("sync");
    c.output.sync_part_mb = o.at("sync_part_mb");
    return c;
}

}  // namespace llmt::config
