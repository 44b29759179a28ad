// The resolved, validated configuration as typed structs (docs/design.md §3). Produced only by the loader
// (config/loader.h), so every value here has passed the schema and the cross-field checks.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace llmt::config {

struct RunConfig {
    std::string name;
    uint64_t seed = 0;
    std::string device;  // cpu | cuda | auto
    bool deterministic = false;
    int threads = 0;
};

// The model section. What every family reads stays flat; a key that only one family (or one group of
// families, as src/models/ groups them) reads lives in that family's section, the struct's mirror of the
// section's keys in config/arch_table.cpp. The YAML keys stay flat (model.rope_theta -> rope.theta,
// config/typed.cpp maps them); a family that does not read a section holds its schema defaults (the loader
// refuses any other value under it).
struct ModelConfig {
    std::string arch;
    // n_kv_head and head_dim: every language model's attention shape (GPT-2's are n_head and d_model / n_head;
    // the families on LLaMA's graph may set others, HF num_key_value_heads and head_dim).
    int n_layer = 0, n_head = 0, n_kv_head = 0, d_model = 0, d_ff = 0;
    int block_size = 0;
    int vocab_size = 0;
    int vocab_pad_multiple = 1;
    float dropout = 0.f;
    bool tie_embeddings = true;
    float norm_eps = 1e-5f;  // LayerNorm (gpt2) or RMSNorm (llama) epsilon
    int head_dim = 0;        // d_model / n_head unless written
    std::string init_from;  // "scratch" or a path
    std::string revision;   // of init_from and data.tokenizer when they are hub cache folders

    // RoPE (llama, qwen2, qwen3, mistral: the families on LLaMA's graph, models/llama.h): the base
    // (model.rope_theta) and transformers' "llama3" frequency scaling (model.rope_scaling.*: type "none" or
    // "llama3"; the other fields are read only with llama3).
    struct Rope {
        float theta = 10000.f;
        struct Scaling {
            std::string type = "none";
            double factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
            int original_max_position_embeddings = 8192;
        } scaling;
    } rope;
    // Mistral (models/mistral.cpp): each query sees the model.sliding_window most recent keys (itself
    // included); 0 = no window.
    struct Mistral {
        int sliding_window = 0;
    } mistral;
    // Image classifiers (mlp, cnn; models/classifier.h): model.image_size, in_channels, num_classes,
    // conv_channels (cnn only: 3x3 conv + ReLU + 2x2 max-pool each), hidden_sizes (fully connected widths).
    struct Classifier {
        int image_size = 28, in_channels = 1, num_classes = 10;
        std::vector<int> conv_channels;
        std::vector<int> hidden_sizes;
    } classifier;

    // Whether model.arch is an image classifier (config/arch_table.h).
    bool is_classifier() const;

    // vocab_size rounded up to vocab_pad_multiple (the width of the embedding and logit tables).
    int padded_vocab_size() const {
        return (vocab_size + vocab_pad_multiple - 1) / vocab_pad_multiple * vocab_pad_multiple;
    }
};

struct LoraConfig {
    int r = 0;  // 0: no LoRA
    double alpha = 16.0;
    double dropout = 0.0;
    std::vector<std::string> target_modules;  // empty: the architecture's PEFT default
    bool use_rslora = false;
    std::string init_from;  // a PEFT adapter directory, or empty
};

struct DataConfig {
    std::string source;  // shards | text | jsonl | chat
    std::vector<std::string> paths;
    std::string text_field;
    std::string split, val_split, config_name;  // source hf
    std::string revision;                       // source hf/chat: of the hub cache folders in paths
    std::string tokenizer;
    double val_fraction = 0.0;
    std::string cache_dir;
    std::string train_shards, val_shards;
    std::string shard_format;  // llmc | nanogpt
    bool shuffle = true;
    bool packing = false;  // source chat: pack conversations into rows (data/chat/chat_rows.h)
    // source idx (data/images/image_set.h)
    std::string train_images, train_labels, test_images, test_labels;
    double pixel_mean = 0, pixel_std = 1;
    int crop_padding = 0;
    bool hflip = false;
};

struct TrainerConfig {
    int64_t max_steps = 0;
    int64_t epochs = 0;  // > 0: max_steps comes from the training set's size (train/image_batches.h)
    int micro_batch_size = 0;
    int grad_accum_steps = 1;
    double lr = 0, min_lr = 0;
    int64_t warmup_steps = 0;
    std::string schedule;  // cosine | linear | constant
    double weight_decay = 0;
    bool decay_embeddings = false;
    std::string optimizer = "adamw";  // adamw | sgd
    std::array<double, 2> betas{0.9, 0.95};  // adamw
    double eps = 1e-8;                       // adamw
    double momentum = 0.9, dampening = 0;    // sgd
    bool nesterov = false;                   // sgd
    double max_grad_norm = 1.0;
    std::string precision;  // fp32 | bf16 | auto (train/cpu_precision.h resolves it)
    bool conv_tf32 = true;  // cnn on CUDA, fp32: TF32 convolutions
    std::string recompute;  // none | gelu | all
    int64_t log_every_steps = 1, eval_every_steps = 0, eval_steps = 1, save_every_steps = 0;
    int keep_last = 1;
};

struct DistConfig {
    std::string backend;  // auto | gloo | nccl
    double timeout_sec = 300;
    double bucket_mb = 25;
    bool overlap = true;
    int zero_stage = 0;
};

struct MlflowConfig {
    std::string uri;         // a directory, a file: URI or an http(s):// URL; empty: $MLFLOW_TRACKING_URI
    std::string experiment;  // empty: "Default"
    std::string run_name;    // empty: the run directory's name
};

struct TrackingConfig {
    bool jsonl = true;
    MlflowConfig mlflow;
    std::string tensorboard_dir;  // empty: off
};

struct OutputConfig {
    std::string root_dir;
    std::string run_id;
    std::string sync;           // "" or s3://bucket/prefix (train/checkpoint_sync.h)
    double sync_part_mb = 64;   // multipart threshold and part size
};

struct Config {
    int schema_version = 1;
    RunConfig run;
    ModelConfig model;
    LoraConfig lora;
    DataConfig data;
    TrainerConfig trainer;
    DistConfig dist;
    TrackingConfig tracking;
    OutputConfig output;

    std::string source;              // the file (or "<string>") it was loaded from
    nlohmann::ordered_json resolved;  // every key with defaults materialized, in schema order
    // The keys the user wrote (in the file or with --set), each with where: "configs/x.yaml:12:3" or
    // "--set model.n_layer=4". Keys left to their defaults (or derived) are absent; so are all keys of a
    // config rebuilt from a checkpoint's resolved JSON. models/hf_config.h takes the unwritten model keys
    // from a Hugging Face config.json and compares the written ones.
    std::map<std::string, std::string> written;
    bool wrote(const std::string& key) const { return written.count(key) != 0; }
    // What the loader changed instead of refusing (config/schedule_keys.h), one sentence each, for the
    // commands to print as warnings.
    std::vector<std::string> warnings;
};

}  // namespace llmt::config
