#include "config/schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "config/arch_table.h"

namespace llmt::config {
namespace {

using nlohmann::ordered_json;

FieldSpec int_field(std::string path, ordered_json def, double min, double max, std::string doc) {
    FieldSpec f;
    f.path = std::move(path);
    f.type = FieldType::kInt;
    f.default_value = std::move(def);
    f.min = min;
    f.max = max;
    f.doc = std::move(doc);
    return f;
}
FieldSpec float_field(std::string path, double def, double min, double max, bool min_excl, std::string doc) {
    FieldSpec f;
    f.path = std::move(path);
    f.type = FieldType::kFloat;
    f.default_value = def;
    f.min = min;
    f.max = max;
    f.min_exclusive = min_excl;
    f.doc = std::move(doc);
    return f;
}
FieldSpec bool_field(std::string path, bool def, std::string doc) {
    FieldSpec f;
    f.path = std::move(path);
    f.type = FieldType::kBool;
    f.default_value = def;
    f.doc = std::move(doc);
    return f;
}
FieldSpec string_field(std::string path, std::string def, Access access, std::string doc,
                       std::vector<std::string> not_paths = {""}) {
    FieldSpec f;
    f.path = std::move(path);
    f.type = FieldType::kString;
    f.default_value = std::move(def);
    f.doc = std::move(doc);
    f.access = access;
    f.not_paths = std::move(not_paths);
    return f;
}
FieldSpec glob_field(FieldSpec f) {
    f.glob = true;
    return f;
}
FieldSpec string_list_field(std::string path, ordered_json def, Access access, std::string doc) {
    FieldSpec f;
    f.path = std::move(path);
    f.type = FieldType::kStringList;
    f.default_value = std::move(def);
    f.doc = std::move(doc);
    f.access = access;
    return f;
}
FieldSpec enum_field(std::string path, std::string def, std::vector<std::string> choices, std::string doc) {
    FieldSpec f;
    f.path = std::move(path);
    f.type = FieldType::kEnum;
    f.default_value = std::move(def);
    f.choices = std::move(choices);
    f.doc = std::move(doc);
    return f;
}
FieldSpec derived(FieldSpec f, std::string note) {
    f.default_value = nullptr;
    f.derived_note = std::move(note);
    return f;
}

constexpr double kInf = 1e300;
constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist/";

// A list of whole numbers in [lo, hi] (any length >= 1; integers checked by the loader's model checks).
void list_field(std::vector<FieldSpec>& v, std::string path, std::vector<int> def, double lo, double hi,
                std::string doc) {
    FieldSpec f;
    f.path = std::move(path);
    f.type = FieldType::kFloatList;
    f.default_value = ordered_json(def);
    f.min = lo;
    f.max = hi;
    f.list_len = -1;
    f.doc = std::move(doc);
    v.push_back(std::move(f));
}

// model.arch's doc: every family of the arch table with its few words.
std::string arch_doc() {
    std::string s = "model family (language models take it from config.json with model.init_from a Hugging Face "
                    "directory; image classifiers need data.source idx):";
    for (const ArchEntry& e : arch_table()) s += fmt::format(" {} = {};", e.name, e.doc);
    s.pop_back();
    return s;
}

std::vector<FieldSpec> build() {
    std::vector<FieldSpec> v;
    v.push_back(int_field("schema_version", kSchemaVersion, kSchemaVersion, kSchemaVersion,
                          "version of this config format; must be 1"));
    // run
    v.push_back(string_field("run.name", "llmtrain", Access::kNone, "name of the run; prefix of generated run ids"));
    v.push_back(
        int_field("run.seed", 1337, 0, 9007199254740991.0, "seed of every random stream (init, data order, dropout)"));
    v.push_back(enum_field("run.device", "auto", {"cpu", "cuda", "auto"},
                           "where to train; auto picks cuda when a GPU is present"));
    v.push_back(
        bool_field("run.deterministic", false,
                   "bit-reproducible runs: CPU runs always are (same config, threads and data give the same bits); "
                   "true is refused on CUDA, whose kernels are not (docs/config.md)"));
    v.push_back(int_field("run.threads", 0, 0, 4096,
                          "CPU threads per process; 0 = OMP_NUM_THREADS if set, else the CPUs this process may use "
                          "(affinity mask and cgroup CPU quota)"));
    // model
    v.push_back(enum_field("model.arch", "gpt2", arch_names(), arch_doc()));
    v.push_back(int_field("model.n_layer", 12, 1, 1024, "number of transformer blocks"));
    v.push_back(int_field("model.n_head", 12, 1, 1024, "attention heads"));
    v.push_back(derived(int_field("model.n_kv_head", nullptr, 1, 1024, "key/value heads (grouped-query attention)"),
                        "model.n_head"));
    v.push_back(int_field("model.d_model", 768, 1, 65536, "embedding width"));
    v.push_back(derived(int_field("model.d_ff", nullptr, 1, 1048576, "MLP hidden width"), "4 x model.d_model"));
    v.push_back(derived(
        int_field("model.head_dim", nullptr, 1, 65536,
                  "width of one attention head; gpt2: must be d_model / n_head; llama may differ (HF head_dim)"),
        "model.d_model / model.n_head"));
    v.push_back(int_field("model.block_size", 1024, 1, 1048576, "context length in tokens"));
    v.push_back(int_field("model.vocab_size", 50257, 1, 16777216, "vocabulary size of the tokenizer"));
    v.push_back(int_field(
        "model.vocab_pad_multiple", 128, 1, 65536,
        "the embedding/logit tables are padded to a multiple of this for speed; padding is never predicted"));
    v.push_back(float_field("model.dropout", 0.0, 0.0, 0.999, false, "dropout probability during training"));
    v.push_back(bool_field("model.tie_embeddings", true, "share the token embedding with the output projection"));
    v.push_back(float_field("model.norm_eps", 1e-5, 0.0, 1.0, true,
                            "epsilon of every LayerNorm (gpt2: 1e-5) or RMSNorm (llama: HF rms_norm_eps)"));
    // RoPE (llama only; gpt2 has learned positions and refuses these keys when not at their defaults).
    v.push_back(
        float_field("model.rope_theta", 10000.0, 0.0, kInf, true, "llama: RoPE base frequency (HF rope_theta)"));
    v.push_back(enum_field("model.rope_scaling.type", "none", {"none", "llama3"},
                           "llama: RoPE frequency scaling; llama3 as transformers' _compute_llama3_parameters"));
    v.push_back(
        float_field("model.rope_scaling.factor", 8.0, 1.0, kInf, false,
                    "llama3 scaling: long-wavelength frequencies are divided by this (Llama 3.1: 8, 3.2: 32)"));
    v.push_back(float_field("model.rope_scaling.low_freq_factor", 1.0, 0.0, kInf, true,
                            "llama3 scaling: wavelengths above original_max_position_embeddings / this are scaled"));
    v.push_back(float_field("model.rope_scaling.high_freq_factor", 4.0, 0.0, kInf, true,
                            "llama3 scaling: wavelengths below original_max_position_embeddings / this are kept"));
    v.push_back(int_field("model.rope_scaling.original_max_position_embeddings", 8192, 1, 1048576,
                          "llama3 scaling: the context length the model was pre-trained with"));
    v.push_back(int_field("model.sliding_window", 0, 0, 1048576,
                          "mistral: each token attends to this many most recent tokens, itself included (HF "
                          "sliding_window); 0 = no window"));
    // Image classifiers (model.arch mlp | cnn): refused with the language models, as those keys are here.
    v.push_back(int_field("model.image_size", 28, 1, 4096, "mlp/cnn: images are image_size x image_size pixels"));
    v.push_back(int_field("model.in_channels", 1, 1, 4, "mlp/cnn: channels per pixel (IDX images: 1)"));
    v.push_back(int_field("model.num_classes", 10, 2, 65536, "mlp/cnn: classes; labels are 0..num_classes-1"));
    list_field(v, "model.conv_channels", {32, 64}, 1, 65536,
               "cnn: output channels of each 3x3 convolution (padding 1, stride 1), each followed by ReLU and a 2x2 "
               "max-pool");
    list_field(
        v, "model.hidden_sizes", {128}, 1, 1048576,
        "mlp/cnn: widths of the fully connected hidden layers (ReLU, then model.dropout) before the class logits");
    v.push_back(string_field("model.init_from", "scratch", Access::kRead,
                             "'scratch' or a path to a Hugging Face safetensors file / model directory; or an s3:// "
                             "URI of one, fetched into output.root_dir/.cache/s3 by train", {"", "scratch"}));
    v.back().s3_uri_is_endpoint = true;
    v.push_back(string_field(
        "model.revision", "main", Access::kNone,
        "with model.init_from or data.tokenizer a hub cache folder (models--ORG--NAME): the branch or tag "
        "under its refs/, or a snapshot's commit hash (transformers' revision); another value than main "
        "needs such a folder"));
    // lora
    v.push_back(int_field("lora.r", 0, 0, 65536, "LoRA rank; 0 = full fine-tuning (no adapters)"));
    v.push_back(float_field("lora.alpha", 16.0, 0.0, kInf, true,
                            "LoRA scaling numerator: scale = alpha / r (alpha / sqrt(r) with use_rslora)"));
    v.push_back(
        float_field("lora.dropout", 0.0, 0.0, 0.999, false, "dropout on the adapters' input (PEFT's lora_dropout)"));
    v.push_back(
        string_list_field("lora.target_modules", ordered_json::array(), Access::kNone,
                          "modules that get adapters: Hugging Face names matched at the end of each module's "
                          "name (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj; GPT-2: c_attn, "
                          "c_proj, c_fc), ['all-linear'], or one regular expression full-matched against the "
                          "module name; empty = PEFT's default for the architecture (llama: q_proj, v_proj; "
                          "gpt2: c_attn)"));
    v.push_back(bool_field("lora.use_rslora", false, "rank-stabilised LoRA: scale = alpha / sqrt(r)"));
    v.push_back(string_field("lora.init_from", "", Access::kRead,
                             "a PEFT adapter directory (adapter_config.json + adapter_model.safetensors) to continue "
                             "from; empty = fresh adapters (A Kaiming-uniform, B zero)"));
    // data
    v.push_back(enum_field(
        "data.source", "shards", {"shards", "text", "jsonl", "hf", "chat", "idx"},
        "shards: prepared token shards; text/jsonl: raw corpora tokenized into data.cache_dir; hf: a "
        "Hugging Face dataset directory (Parquet/Arrow shards, save_to_disk, hub cache; docs/data.md) "
        "tokenized the same way; chat: conversations (JSONL, or a dataset directory, of messages or "
        "prompt/completion) rendered with the model's chat template, "
        "loss on the assistant's tokens only (docs/formats/chat_jsonl.md); idx: MNIST-format images and labels "
        "(model.arch mlp or cnn, docs/classifier.md)"));
    v.push_back(string_list_field("data.paths", ordered_json::array(), Access::kRead,
                                  "input files or directories (source text/jsonl/hf/chat only)"));
    v.push_back(string_field("data.text_field", "text", Access::kNone,
                             "JSONL field or dataset column that holds the document text (source jsonl/hf only)"));
    v.push_back(string_field("data.split", "train", Access::kNone, "source hf: the split documents are read from"));
    v.push_back(
        string_field("data.val_split", "", Access::kNone,
                     "source hf: a split that becomes the validation shards (then data.val_fraction is not used); "
                     "empty: data.val_fraction of data.split"));
    v.push_back(string_field("data.config_name", "", Access::kNone,
                             "source hf: the hub snapshot's <config>/ folder (empty: data/ or the only one)"));
    v.push_back(string_field(
        "data.revision", "main", Access::kNone,
        "source hf or chat, with a hub cache folder (datasets--ORG--NAME) in data.paths: the branch or tag "
        "under its refs/, or a snapshot's commit hash (datasets' revision); another value than main needs "
        "such a folder"));
    v.push_back(string_field(
        "data.tokenizer", "gpt2", Access::kRead,
        "'gpt2' or a path to a .tiktoken / tokenizer.json file or a model directory; source chat: a model "
        "directory (or tokenizer.json) with tokenizer_config.json, whose chat template renders the data",
        {"", "gpt2"}));
    v.push_back(
        float_field("data.val_fraction", 0.005, 0.0, 0.999, false,
                    "share of documents (chat: conversations) held out for validation (source text/jsonl/chat only)"));
    v.push_back(
        string_field("data.cache_dir", "data/cache", Access::kWrite,
                     "where tokenized text/jsonl/chat sources are cached, and the CPU precision probe's figures "
                     "(trainer.precision auto or bf16; train/cpu_precision.h)"));
    v.push_back(
        glob_field(string_field("data.train_shards", "", Access::kRead,
                                "glob of training shards (source: shards); or s3://bucket/prefix/*.bin, fetched "
                                "into output.root_dir/.cache/s3 by train")));
    v.back().s3_uri_is_endpoint = true;
    v.push_back(
        glob_field(string_field("data.val_shards", "", Access::kRead,
                                "glob of validation shards (source: shards); or an s3:// glob, as train_shards")));
    v.back().s3_uri_is_endpoint = true;
    v.push_back(enum_field(
        "data.shard_format", "llmc", {"llmc", "nanogpt"},
        "llmc: llm.c .bin with a 1 KiB header; nanogpt: header-less uint16 train.bin/val.bin (source shards only)"));
    v.push_back(bool_field("data.shuffle", true, "shuffle training windows each epoch (by seed and epoch)"));
    v.push_back(
        bool_field("data.packing", false,
                   "source chat only: pack whole conversations into rows of model.block_size (Best-Fit Decreasing, "
                   "positions restart per conversation, attention does not cross them); false: one a row, padded to "
                   "the longest in the batch"));
    for (const auto& [key, file, what] : std::vector<std::array<std::string, 3>>{
             {"train_images", "train-images-idx3-ubyte.gz", "training images"},
             {"train_labels", "train-labels-idx1-ubyte.gz", "training labels"},
             {"test_images", "t10k-images-idx3-ubyte.gz", "test images"},
             {"test_labels", "t10k-labels-idx1-ubyte.gz", "test labels"}})
        v.push_back(string_field(
            "data." + key, std::string(kFashionMnistDir) + file, Access::kRead,
            "source idx: IDX file (raw or .gz) of the " + what + "; default: Debian's dataset-fashion-mnist"));
    v.push_back(float_field("data.pixel_mean", 0.2860, -kInf, kInf, false,
                            "source idx: inputs are (pixel / 255 - pixel_mean) / pixel_std (Fashion-MNIST's mean)"));
    v.push_back(float_field("data.pixel_std", 0.3530, 0.0, kInf, true,
                            "source idx: see data.pixel_mean (Fashion-MNIST's std)"));
    v.push_back(int_field("data.augment.crop_padding", 0, 0, 64,
                          "source idx: random crop of the image padded by this many zero pixels per side; 0 = off"));
    v.push_back(
        bool_field("data.augment.hflip", false, "source idx: flip training images left-right with probability 1/2"));
    // trainer
    v.push_back(
        int_field("trainer.max_steps", 1000, 1, 1e15,
                  "optimizer steps to train; written together with trainer.epochs it wins (transformers' rule)"));
    v.push_back(
        int_field("trainer.epochs", 0, 0, 1e9,
                  "passes over the training set (data.source idx): sets the step count from the dataset size "
                  "unless trainer.max_steps is written too (then max_steps wins); 0 = trainer.max_steps decides"));
    v.push_back(int_field("trainer.micro_batch_size", 8, 1, 1048576, "sequences per micro-batch per process"));
    v.push_back(int_field("trainer.grad_accum_steps", 1, 1, 1048576, "micro-batches accumulated per optimizer step"));
    v.push_back(float_field("trainer.lr", 6e-4, 0.0, kInf, true, "peak learning rate"));
    v.push_back(derived(float_field("trainer.min_lr", 0.0, 0.0, kInf, false, "final learning rate of the decay"),
                        "0.1 x trainer.lr"));
    v.push_back(int_field("trainer.warmup_steps", 100, 0, 1e15, "linear warmup steps"));
    v.push_back(enum_field("trainer.schedule", "cosine", {"cosine", "linear", "constant"},
                           "learning-rate decay after warmup"));
    v.push_back(enum_field("trainer.optimizer", "adamw", {"adamw", "sgd"},
                           "adamw: AdamW (trainer.betas, trainer.eps); sgd: SGD with momentum as torch.optim.SGD "
                           "(trainer.momentum, trainer.dampening, trainer.nesterov)"));
    v.push_back(float_field("trainer.weight_decay", 0.1, 0.0, kInf, false,
                            "weight decay of 2-D weights: decoupled (p *= 1 - lr * wd) with adamw, L2 added to the "
                            "gradient (g += wd * p) with sgd"));
    v.push_back(bool_field("trainer.decay_embeddings", false, "also apply weight decay to the embedding tables"));
    {
        FieldSpec f;
        f.path = "trainer.betas";
        f.type = FieldType::kFloatList;
        f.default_value = ordered_json::array({0.9, 0.95});
        f.min = 0.0;
        f.max = 0.999999;
        f.list_len = 2;
        f.doc = "trainer.optimizer adamw: beta1, beta2";
        v.push_back(f);
    }
    v.push_back(float_field("trainer.eps", 1e-8, 0.0, 1.0, true, "trainer.optimizer adamw: epsilon"));
    v.push_back(float_field("trainer.momentum", 0.9, 0.0, 1.0, false,
                            "trainer.optimizer sgd: momentum factor; 0 = plain SGD (no momentum buffer)"));
    v.push_back(float_field("trainer.dampening", 0.0, 0.0, 1.0, false,
                            "trainer.optimizer sgd: the new gradient enters the momentum buffer times 1 - dampening"));
    v.push_back(
        bool_field("trainer.nesterov", false,
                   "trainer.optimizer sgd: Nesterov momentum (needs trainer.momentum > 0 and trainer.dampening 0)"));
    v.push_back(float_field("trainer.max_grad_norm", 1.0, 0.0, kInf, false, "global gradient-norm clip; 0 disables"));
    v.push_back(
        enum_field("trainer.precision", "fp32", {"fp32", "bf16", "auto"},
                   "compute precision (master weights stay fp32); auto: bf16 on CUDA, on the CPU the faster of "
                   "fp32 and bf16 GEMMs as a short cached probe measures them"));
    v.push_back(
        bool_field("trainer.conv_tf32", true,
                   "model.arch cnn on CUDA with fp32: the convolutions' products on TF32 tensor cores (PyTorch's "
                   "torch.backends.cudnn.allow_tf32 default); false keeps fp32 accuracy (3xTF32). The CPU "
                   "computes convolutions in fp32 either way"));
    v.push_back(enum_field("trainer.recompute", "none", {"none", "gelu", "mlp", "all"},
                           "activation recomputation to save memory: mlp (alias gelu) recomputes the MLP's activation "
                           "output (GPT-2's GELU, LLaMA's SwiGLU) in backward; all "
                           "keeps only each block's input and re-runs the block's forward before its backward"));
    v.push_back(int_field("trainer.log_every_steps", 10, 1, 1e15, "steps between metric lines"));
    v.push_back(int_field("trainer.eval_every_steps", 250, 0, 1e15, "steps between evaluations; 0 = off"));
    v.push_back(int_field("trainer.eval_steps", 20, 1, 1e15, "validation batches per evaluation"));
    v.push_back(
        int_field("trainer.save_every_steps", 1000, 0, 1e15, "steps between checkpoints; 0 = only at the end"));
    v.push_back(int_field("trainer.keep_last", 3, 1, 1e9, "checkpoints kept (the best one is kept besides)"));
    // dist
    v.push_back(enum_field("dist.backend", "auto", {"auto", "gloo", "nccl"},
                           "collectives: gloo (CPU), nccl (GPU), auto by device"));
    v.push_back(
        float_field("dist.timeout_sec", 300.0, 0.0, kInf, true, "a peer silent this long is an error, never a hang"));
    v.push_back(float_field("dist.bucket_mb", 25.0, 0.0, kInf, true, "gradient all-reduce bucket size in MiB"));
    v.push_back(bool_field("dist.overlap", true, "all-reduce buckets while backward still runs"));
    v.push_back(int_field("dist.zero_stage", 0, 0, 3,
                          "1 shards optimizer state (and under bf16 the fp32 master weights) across ranks (ZeRO-1); 3 "
                          "also the parameters and gradients, per layer (ZeRO-3); 2 is not built"));
    // tracking
    v.push_back(bool_field("tracking.jsonl", true, "write metrics.jsonl in the run directory"));
    v.push_back(
        string_field("tracking.mlflow.uri", "", Access::kEndpoint,
                     "MLflow: a file store (a directory or file: URI, written from rank 0) or a tracking server "
                     "(http(s)://); empty = $MLFLOW_TRACKING_URI, and off when that is unset too (docs/tracking.md)"));
    v.back().file_uri_is_write = true;
    v.push_back(string_field("tracking.mlflow.experiment", "", Access::kNone,
                             "MLflow experiment name; empty = MLflow's \"Default\" experiment"));
    v.push_back(string_field("tracking.mlflow.run_name", "", Access::kNone,
                             "MLflow run name; empty = the run directory's name"));
    v.push_back(
        string_field("tracking.tensorboard_dir", "", Access::kWrite,
                     "TensorBoard log directory: rank 0 writes <dir>/<run id>/events.out.tfevents.*; empty = off"));
    // output
    v.push_back(string_field("output.root_dir", "runs", Access::kWrite, "parent directory of run directories"));
    v.push_back(string_field("output.run_id", "", Access::kNone,
                             "run directory name; empty = <run.name>-<UTC time>-<random>"));
    v.push_back(string_field("output.sync", "", Access::kEndpoint,
                             "s3://bucket/prefix: rank 0 uploads each checkpoint and the run's small files to "
                             "<prefix>/<run id>/ in the background (docs/object_storage.md); empty = off"));
    v.push_back(float_field("output.sync_part_mb", 64.0, 0.0, kInf, true,
                            "object storage: files above this many MiB upload in parts of this size (AWS needs >= 5 "
                            "except the last part), and downloads read ranges of it"));
    return v;
}

}  // namespace

const std::vector<FieldSpec>& schema_fields() {
    static const std::vector<FieldSpec> fields = build();
    return fields;
}

nlohmann::ordered_json::json_pointer schema_pointer(const std::string& path) {
    std::string p = "/" + path;
    std::replace(p.begin(), p.end(), '.', '/');
    return nlohmann::ordered_json::json_pointer(p);
}

bool is_key_group(const std::string& path) {
    for (const auto& f : schema_fields())
        if (f.path.size() > path.size() && f.path.compare(0, path.size(), path) == 0 && f.path[path.size()] == '.')
            return true;
    return false;
}

const FieldSpec* find_field(const std::string& path) {
    for (const auto& f : schema_fields())
        if (f.path == path) return &f;
    return nullptr;
}

std::vector<std::string> split_path(const std::string& path) {
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t dot; (dot = path.find('.', start)) != std::string::npos; start = dot + 1)
        parts.push_back(path.substr(start, dot - start));
    parts.push_back(path.substr(start));
    return parts;
}

const nlohmann::ordered_json* resolved_value(const nlohmann::ordered_json& resolved, const std::string& path) {
    const nlohmann::ordered_json* v = &resolved;
    for (const auto& part : split_path(path)) {
        if (!v->is_object() || !v->contains(part)) return nullptr;
        v = &(*v)[part];
    }
    return v;
}

std::optional<std::string> local_path_of_uri(const std::string& value) {
    const auto colon = value.find(':');
    const auto slash = value.find('/');
    // No scheme: a plain path ("mlruns", "/shared/mlruns", "./a:b" has its ':' after a '/').
    if (colon == std::string::npos || (slash != std::string::npos && slash < colon)) return value;
    if (value.compare(0, colon, "file") != 0) return std::nullopt;
    std::string rest = value.substr(colon + 1);
    if (rest.rfind("//", 0) == 0) {  // file://host/path: only an empty host or localhost is this machine
        const auto path_start = rest.find('/', 2);
        const std::string host = rest.substr(2, path_start == std::string::npos ? std::string::npos : path_start - 2);
        if (!host.empty() && host != "localhost") return std::nullopt;
        rest = path_start == std::string::npos ? "/" : rest.substr(path_start);
    }
    return rest;
}

Access access_of(const FieldSpec& f, const std::string& value) {
    if (f.file_uri_is_write && local_path_of_uri(value)) return Access::kWrite;
    if (f.s3_uri_is_endpoint && value.rfind("s3://", 0) == 0) return Access::kEndpoint;
    return f.access;
}

bool names_a_path(const FieldSpec& f, const std::string& value) {
    if (f.access == Access::kNone) return false;
    for (const auto& n : f.not_paths)
        if (value == n) return false;
    return true;
}

const std::vector<std::string>& schema_sections() {
    static const std::vector<std::string> sections = {"run",     "model", "lora",     "data",
                                                      "trainer", "dist",  "tracking", "output"};
    return sections;
}

namespace {
std::string fmt_num(double x) {
    if (x == static_cast<double>(static_cast<long long>(x)) && std::abs(x) < 1e15)
        return fmt::format("{}", static_cast<long long>(x));
    return fmt::format("{}", x);
}
std::string range_text(const FieldSpec& f) {
    bool has_min = f.min > -1e299, has_max = f.max < 1e299;
    if (has_min && has_max && f.min == f.max) return fmt::format(" equal to {}", fmt_num(f.min));
    std::string s;
    if (has_min) s += fmt::format(" {} {}", f.min_exclusive ? ">" : ">=", fmt_num(f.min));
    if (has_max) s += fmt::format("{} <= {}", has_min ? " and" : "", fmt_num(f.max));
    return s;
}
}  // namespace

std::string describe_expected(const FieldSpec& f) {
    switch (f.type) {
        case FieldType::kInt:
            return "an integer" + range_text(f);
        case FieldType::kFloat:
            return "a number" + range_text(f);
        case FieldType::kBool:
            return "true or false";
        case FieldType::kString:
            return "a string";
        case FieldType::kEnum: {
            std::string s = "one of ";
            for (std::size_t i = 0; i < f.choices.size(); ++i) s += (i ? ", " : "") + f.choices[i];
            return s;
        }
        case FieldType::kFloatList:
            return fmt::format("a list of {}numbers{}", f.list_len > 0 ? fmt::format("{} ", f.list_len) : "",
                               range_text(f).empty() ? "" : ", each" + range_text(f));
        case FieldType::kStringList:
            return "a list of strings";
    }
    return "?";
}

}  // namespace llmt::config
