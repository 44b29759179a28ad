// Every config key does what it says, or is refused: the test walks schema_fields()
// and needs, for each key, a reader probe below that shows its value is used: changing the value changes
// something observable (a loss, a learning rate, a buffer size, a path, a count of checkpoints), or the
// value is refused with an error naming the key. A key added to the schema without a probe fails
// EveryKeyHasAReaderProbe with the key's name. Probes call the library (train::run_training on a tiny
// GPT-2 over synthetic shards, tests/support/tiny_run.h), not the binary, so the walk stays in seconds.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <omp.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "config/loader.h"
#include "config/schema.h"
#include "core/fs.h"
#include "support/free_port.h"
#include "storage/s3_client.h"
#include "storage/s3rver.h"
#include "support/tiny_run.h"
#include "train/dist_context.h"

namespace llmt::config {
namespace {

namespace fs = std::filesystem;
using llmt::testing::free_port;
using Sets = std::vector<std::string>;
using testing::TinyRun;

// ---- observables ----

// One forward pass (trainer's --dry-run): parameters, memory plan, loss, windows; the timing removed.
nlohmann::ordered_json dry(const TinyRun& t, const Sets& sets) {
    auto s = t.train(sets, /*dry_run=*/true);
    s.erase("forward_ms");
    return s;
}

// What a training run shows per step: loss, learning rate, gradient norm, validation loss.
std::string trace(const TinyRun& t, const Sets& sets) {
    const auto summary = t.train(sets);
    std::string out;
    for (const auto& j : t.metrics(summary)) {
        if (j.contains("loss"))
            out += fmt::format("{} loss {:.17g} lr {:.17g} norm {:.17g}\n", j["step"].get<int64_t>(),
                               j["loss"].get<double>(), j["lr"].get<double>(), j["grad_norm"].get<double>());
        if (j.contains("val_loss"))
            out += fmt::format("{} val {:.17g} tokens {}\n", j["step"].get<int64_t>(), j["val_loss"].get<double>(),
                               j["val_tokens"].get<int64_t>());
    }
    return out;
}

// "" when the config validates and a dry run succeeds; else the error's message.
std::string error_of(const TinyRun& t, const Sets& sets) {
    try {
        (void)dry(t, sets);
        return "";
    } catch (const std::exception& e) {
        return e.what();
    }
}

// The summary of a dry run, or its error: an observable for values that may be refused.
std::string outcome(const TinyRun& t, const Sets& sets) {
    try {
        return dry(t, sets).dump();
    } catch (const std::exception& e) {
        return std::string("error: ") + e.what();
    }
}

void expect_refused(const TinyRun& t, const Sets& sets, const std::string& key) {
    const std::string e = error_of(t, sets);
    EXPECT_NE(e.find(key), std::string::npos) << "expected an error naming " << key << ", got: \"" << e << "\"";
}

int checkpoints_of(const TinyRun& t, const nlohmann::ordered_json& summary) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(t.run_dir(summary) / "checkpoints"))
        n += e.is_directory() && e.path().filename().string().rfind("step_", 0) == 0;
    return n;
}

Sets with(Sets a, const Sets& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// ---- inputs of the text/jsonl sources ----

std::string base64(const std::string& s) {
    static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    size_t i = 0;
    for (; i + 2 < s.size(); i += 3) {
        const uint32_t v = (uint8_t(s[i]) << 16) | (uint8_t(s[i + 1]) << 8) | uint8_t(s[i + 2]);
        for (int sh : {18, 12, 6, 0}) out += k[(v >> sh) & 63];
    }
    if (i + 1 == s.size()) {
        const uint32_t v = uint8_t(s[i]) << 16;
        out += std::string{k[(v >> 18) & 63], k[(v >> 12) & 63]} + "==";
    } else if (i + 2 == s.size()) {
        const uint32_t v = (uint8_t(s[i]) << 16) | (uint8_t(s[i + 1]) << 8);
        out += std::string{k[(v >> 18) & 63], k[(v >> 12) & 63], k[(v >> 6) & 63]} + "=";
    }
    return out;
}

// A byte-level .tiktoken (every byte a token, `merges` after them), so text sources need no GPT-2 file
// and the model's vocabulary stays small (model.vocab_size 320 covers 256 bytes, merges and <|endoftext|>).
fs::path write_tokenizer(const fs::path& path, const std::vector<std::string>& merges) {
    std::string s;
    for (int b = 0; b < 256; ++b) s += base64(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
    for (size_t i = 0; i < merges.size(); ++i) s += base64(merges[i]) + " " + std::to_string(256 + i) + "\n";
    write_file_atomic(path, s);
    return path;
}

struct Inputs {
    fs::path tokenizer, tokenizer_merges, corpus, corpus_short, jsonl;
};

Inputs write_inputs(const fs::path& root) {
    Inputs in;
    in.tokenizer = write_tokenizer(root / "bytes.tiktoken", {});
    in.tokenizer_merges = write_tokenizer(root / "merges.tiktoken", {"th", "e ", "ou"});
    std::string text, jsonl;
    for (int d = 0; d < 60; ++d) {
        std::string doc;
        for (int i = 0; i < 6; ++i) doc += "the count is " + std::to_string(d + i) + " and then it goes on.\n";
        text += doc + "\n";
        jsonl += nlohmann::json{{"text", "short " + std::to_string(d)}, {"body", doc}}.dump() + "\n";
    }
    write_file_atomic(root / "corpus.txt", text);
    write_file_atomic(root / "corpus_short.txt", text.substr(0, text.size() / 3));
    write_file_atomic(root / "corpus.jsonl", jsonl);
    in.corpus = root / "corpus.txt";
    in.corpus_short = root / "corpus_short.txt";
    in.jsonl = root / "corpus.jsonl";
    return in;
}

const fs::path kHfFixtures = fs::path(LLMT_SOURCE_DIR) / "tests/data/fixtures/hf/hub";

// --set overrides for a text (or jsonl) source reading `input` with its own cache directory (later
// overrides of the same key win).
Sets text_source(const TinyRun& t, const Inputs& in, const std::string& cache, const std::string& source = "text",
                 const fs::path& input = {}) {
    return {"data.source=" + source,
            "data.paths=[" + (input.empty() ? in.corpus : input).string() + "]",
            "data.tokenizer=" + in.tokenizer.string(),
            "data.cache_dir=" + (t.root() / cache).string(),
            R"(data.train_shards="")",
            R"(data.val_shards="")",
            // A fifth of the documents, so even the short JSONL field leaves a validation batch.
            "data.val_fraction=0.2",
            "model.vocab_size=320"};
}

// Seconds until rank 0 of a 2-rank world whose rank 1 never comes gives up on the rendezvous.
double rendezvous_timeout_s(const TinyRun& t, const std::string& timeout_sec) {
    const Config cfg = t.config({"dist.timeout_sec=" + timeout_sec});
    const std::string port = std::to_string(free_port());
    ::setenv("RANK", "0", 1);
    ::setenv("WORLD_SIZE", "2", 1);
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", port.c_str(), 1);
    const auto t0 = std::chrono::steady_clock::now();
    bool threw = false;
    try {
        (void)train::DistContext::create(cfg, Device::kCpu);
    } catch (const std::exception&) {
        threw = true;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) ::unsetenv(v);
    EXPECT_TRUE(threw) << "a rendezvous missing a rank must fail";
    return s;
}

// ---- the probes: key -> a check that its value is used ----

// A real S3-compatible server (tests/storage/s3rver.h) and this process's AWS_* variables pointing at it,
// for the output.sync probes (the trainer runs in this process); the variables are removed afterwards.
struct S3Env {
    testing::S3rver server;
    S3Env() {
        for (const auto& e : server.env()) {
            const auto eq = e.find('=');
            ::setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
        }
    }
    ~S3Env() {
        for (const auto& e : server.env()) ::unsetenv(e.substr(0, e.find('=')).c_str());
    }
    // How many parts the synced model.safetensors of a run's step 1 went up in (its marker says); 0 when
    // the step has no marker.
    int model_parts(const nlohmann::ordered_json& summary, const std::string& prefix) {
        storage::S3Client c(server.settings());
        const std::string run = prefix + "/" + summary["run_id"].get<std::string>() + "/checkpoints/step_1/";
        if (!c.head_object({server.bucket(), run + "_SYNCED.json"})) return 0;
        const auto marker = nlohmann::json::parse(c.get_object({server.bucket(), run + "_SYNCED.json"}));
        for (const auto& f : marker["files"])  // held: a range-for over a temporary's member dangles
            if (f["name"] == "model.safetensors") return f["parts"].get<int>();
        return 0;
    }
};

struct Ctx {
    const TinyRun& t;
    const Inputs& in;
};
using Probe = std::function<void(const Ctx&)>;

// Keys whose value only changes the training trajectory (losses, learning rates, norms): a value other
// than the base config's must change the trace of a short run.
void trajectory_differs(const Ctx& c, const Sets& a, const Sets& b) { EXPECT_NE(trace(c.t, a), trace(c.t, b)); }

const std::map<std::string, Probe>& probes() {
    static const std::map<std::string, Probe> p = {
        {"schema_version", [](const Ctx& c) { expect_refused(c.t, {"schema_version=2"}, "schema_version"); }},
        // run
        {"run.name",
         [](const Ctx& c) {
             const auto s = c.t.train({"run.name=probe-name", "trainer.max_steps=1"});
             EXPECT_EQ(s["run_id"].get<std::string>().rfind("probe-name-", 0), 0u) << s["run_id"];
         }},
        {"run.seed",
         [](const Ctx& c) { EXPECT_NE(dry(c.t, {"run.seed=1"})["loss"], dry(c.t, {"run.seed=2"})["loss"]); }},
        {"run.device",
         [](const Ctx& c) {
             EXPECT_EQ(dry(c.t, {"run.device=cpu"})["device"], "cpu");
             const std::string e = error_of(c.t, {"run.device=cuda"});
             if (e.empty())
                 EXPECT_EQ(dry(c.t, {"run.device=cuda"})["device"], "cuda");
             else
                 EXPECT_NE(e.find("run.device"), std::string::npos) << e;  // no GPU here: refused by name
         }},
        // CPU runs are bit-reproducible whatever the key says (tests/train/deterministic_test.cpp); true
        // is what CUDA cannot honour, so it is refused there.
        {"run.deterministic",
         [](const Ctx& c) {
             expect_refused(c.t, {"run.deterministic=true", "run.device=cuda"}, "run.deterministic");
         }},
        {"run.threads",
         [](const Ctx& c) {
             (void)dry(c.t, {"run.threads=1"});
             EXPECT_EQ(omp_get_max_threads(), 1);
             (void)dry(c.t, {"run.threads=2"});
             EXPECT_EQ(omp_get_max_threads(), 2);
         }},
        // model
        // Another architecture: other tensors (no position table or biases, three MLP matrices).
        {"model.arch",
         [](const Ctx& c) { EXPECT_NE(dry(c.t, {"model.arch=llama"})["parameters"], dry(c.t, {})["parameters"]); }},
        // gpt2 splits d_model into heads: any other head width is refused by name; llama's q/k/v/o widths follow it.
        {"model.head_dim",
         [](const Ctx& c) {
             expect_refused(c.t, {"model.head_dim=3"}, "model.head_dim");
             EXPECT_NE(dry(c.t, {"model.arch=llama", "model.head_dim=4"})["parameters"],
                       dry(c.t, {"model.arch=llama"})["parameters"]);
         }},
        // RoPE keys are llama's: gpt2 (learned positions) refuses them by name; for llama each one moves the
        // rotation angles and so the loss. The llama3 fields are read only with rope_scaling.type llama3, with an
        // original context short enough for head size 8's wavelengths (6.3 ... 6283) to be rescaled (4: all
        // divided by factor) or blended (16: the shortest one sits between the low and high bands).
        {"model.rope_theta",
         [](const Ctx& c) {
             expect_refused(c.t, {"model.rope_theta=500000"}, "model.rope_theta");
             EXPECT_NE(dry(c.t, {"model.arch=llama", "model.rope_theta=500000"})["loss"],
                       dry(c.t, {"model.arch=llama"})["loss"]);
         }},
        {"model.rope_scaling.type",
         [](const Ctx& c) {
             expect_refused(c.t, {"model.rope_scaling.type=llama3"}, "model.rope_scaling.type");
             const Sets l = {"model.arch=llama", "model.rope_scaling.original_max_position_embeddings=4"};
             EXPECT_NE(dry(c.t, with(l, {"model.rope_scaling.type=llama3"}))["loss"],
                       dry(c.t, {"model.arch=llama"})["loss"]);
         }},
        {"model.rope_scaling.factor",
         [](const Ctx& c) {
             expect_refused(c.t, {"model.rope_scaling.factor=32"}, "model.rope_scaling.factor");
             const Sets l = {"model.arch=llama", "model.rope_scaling.type=llama3",
                             "model.rope_scaling.original_max_position_embeddings=4"};
             EXPECT_NE(dry(c.t, with(l, {"model.rope_scaling.factor=32"}))["loss"], dry(c.t, l)["loss"]);
         }},
        {"model.rope_scaling.low_freq_factor",
         [](const Ctx& c) {
             expect_refused(c.t, {"model.rope_scaling.low_freq_factor=2"}, "model.rope_scaling.low_freq_factor");
             const Sets l = {"model.arch=llama", "model.rope_scaling.type=llama3",
                             "model.rope_scaling.original_max_position_embeddings=16"};
             EXPECT_NE(dry(c.t, with(l, {"model.rope_scaling.low_freq_factor=2"}))["loss"], dry(c.t, l)["loss"]);
         }},
        {"model.rope_scaling.high_freq_factor",
         [](const Ctx& c) {
             expect_refused(c.t, {"model.rope_scaling.high_freq_factor=8"}, "model.rope_scaling.high_freq_factor");
             const Sets l = {"model.arch=llama", "model.rope_scaling.type=llama3",
                             "model.rope_scaling.original_max_position_embeddings=16"};
             EXPECT_NE(dry(c.t, with(l, {"model.rope_scaling.high_freq_factor=8"}))["loss"], dry(c.t, l)["loss"]);
         }},
        {"model.rope_scaling.original_max_position_embeddings",
         [](const Ctx& c) {
             expect_refused(c.t, {"model.rope_scaling.original_max_position_embeddings=4096"},
                            "model.rope_scaling.original_max_position_embeddings");
             const Sets l = {"model.arch=llama", "model.rope_scaling.type=llama3"};
             EXPECT_NE(dry(c.t, with(l, {"model.rope_scaling.original_max_position_embeddings=4"}))["loss"],
                       dry(c.t, with(l, {"model.rope_scaling.original_max_position_embeddings=16"}))["loss"]);
         }},
        // Mistral's window: the families that do not read it refuse it by name; for mistral a window shorter
        // than the sequence hides keys and so moves the loss.
        {"model.sliding_window",
         [](const Ctx& c) {
             expect_refused(c.t, {"model.sliding_window=2"}, "model.sliding_window");
             EXPECT_NE(dry(c.t, {"model.arch=mistral", "model.sliding_window=2"})["loss"],
                       dry(c.t, {"model.arch=mistral"})["loss"]);
         }},
        {"model.n_layer",
         [](const Ctx& c) { EXPECT_NE(dry(c.t, {"model.n_layer=1"})["parameters"], dry(c.t, {})["parameters"]); }},
        // Same parameters, another split of the channels into heads: another attention, another loss.
        {"model.n_head", [](const Ctx& c) { EXPECT_NE(dry(c.t, {"model.n_head=4"})["loss"], dry(c.t, {})["loss"]); }},
        // gpt2 has one kv head per query head (refused otherwise); llama shares them: fewer k/v weights.
        {"model.n_kv_head",
         [](const Ctx& c) {
             expect_refused(c.t, {"model.n_kv_head=1"}, "model.n_kv_head");
             EXPECT_NE(dry(c.t, {"model.arch=llama", "model.n_kv_head=1"})["parameters"],
                       dry(c.t, {"model.arch=llama"})["parameters"]);
         }},
        {"model.d_model",
         [](const Ctx& c) { EXPECT_NE(dry(c.t, {"model.d_model=32"})["parameters"], dry(c.t, {})["parameters"]); }},
        {"model.d_ff",
         [](const Ctx& c) { EXPECT_NE(dry(c.t, {"model.d_ff=32"})["parameters"], dry(c.t, {})["parameters"]); }},
        {"model.block_size",
         [](const Ctx& c) { EXPECT_NE(dry(c.t, {"model.block_size=4"})["parameters"], dry(c.t, {})["parameters"]); }},
        {"model.vocab_size",
         [](const Ctx& c) {
             EXPECT_NE(dry(c.t, {"model.vocab_size=100"})["parameters"], dry(c.t, {})["parameters"]);
         }},
        {"model.vocab_pad_multiple",
         [](const Ctx& c) {
             EXPECT_NE(dry(c.t, {"model.vocab_pad_multiple=128"})["memory_bytes"]["parameters"],
                       dry(c.t, {})["memory_bytes"]["parameters"]);
         }},
        {"model.dropout",
         [](const Ctx& c) {
             trajectory_differs(c, {"trainer.max_steps=1", "model.dropout=0.5"}, {"trainer.max_steps=1"});
         }},
        {"model.tie_embeddings",
         [](const Ctx& c) {
             EXPECT_NE(dry(c.t, {"model.tie_embeddings=false"})["parameters"], dry(c.t, {})["parameters"]);
         }},
        // The eps of every LayerNorm; weights whose config.json says another layer_norm_epsilon are refused.
        {"model.norm_eps",
         [](const Ctx& c) {
             EXPECT_NE(dry(c.t, {"model.norm_eps=0.5"})["loss"], dry(c.t, {})["loss"]);
             const auto s = c.t.train({"trainer.max_steps=1"});
             const fs::path w = c.t.run_dir(s) / "checkpoints/step_1/model.safetensors";
             EXPECT_NO_THROW((void)dry(c.t, {"model.init_from=" + w.string()}));
             expect_refused(c.t, {"model.init_from=" + w.string(), "model.norm_eps=0.5"}, "model.norm_eps");
         }},
        {"model.init_from",
         [](const Ctx& c) {
             const auto s = c.t.train({"trainer.max_steps=2"});
             const fs::path w = c.t.run_dir(s) / "checkpoints/step_2/model.safetensors";
             EXPECT_NE(dry(c.t, {"model.init_from=" + w.string()})["loss"], dry(c.t, {})["loss"]);
         }},
        // A hub cache folder whose refs/main and refs/v1 name snapshots of two runs' weights (links into blobs/).
        {"model.revision",
         [](const Ctx& c) {
             const fs::path repo = c.t.root() / "hub/models--walk--tiny";
             int n = 0;
             for (const auto& [ref, steps] : {std::pair{"main", 2}, std::pair{"v1", 4}}) {
                 const auto s = c.t.train({"trainer.max_steps=" + std::to_string(steps)});
                 const fs::path step = c.t.run_dir(s) / ("checkpoints/step_" + std::to_string(steps));
                 const std::string sha = std::string(39, '0') + std::to_string(steps);
                 fs::create_directories(repo / "blobs");
                 fs::create_directories(repo / "refs");
                 fs::create_directories(repo / "snapshots" / sha);
                 llmt::write_file_atomic(repo / "refs" / ref, sha);
                 for (const char* f : {"model.safetensors", "config.json"}) {
                     const std::string blob = "b" + std::to_string(n++);
                     fs::copy_file(step / f, repo / "blobs" / blob);
                     fs::create_symlink("../../blobs/" + blob, repo / "snapshots" / sha / f);
                 }
             }
             const Sets from = {"model.init_from=" + repo.string()};
             EXPECT_NE(dry(c.t, with(from, {"model.revision=v1"}))["loss"], dry(c.t, from)["loss"]);
             expect_refused(c.t, with(from, {"model.revision=v2"}), "has no revision 'v2'");
             expect_refused(c.t, {"model.revision=v1"}, "model.revision");
         }},
        // lora (docs/lora.md): adapters on the tiny GPT-2; B starts at zero, so a value shows after a step.
        {"lora.r",
         [](const Ctx& c) {
             const auto full = dry(c.t, {})["memory_bytes"]["gradients"].get<int64_t>();
             const auto r4 = dry(c.t, {"lora.r=4"})["memory_bytes"]["gradients"].get<int64_t>();
             const auto r8 = dry(c.t, {"lora.r=8"})["memory_bytes"]["gradients"].get<int64_t>();
             EXPECT_LT(r4, full / 10);  // the adapters' gradients only
             EXPECT_LT(r4, r8);
         }},
        {"lora.alpha",
         [](const Ctx& c) {
             EXPECT_NE(trace(c.t, {"lora.r=4", "lora.alpha=8", "trainer.max_steps=3"}),
                       trace(c.t, {"lora.r=4", "lora.alpha=64", "trainer.max_steps=3"}));
             expect_refused(c.t, {"lora.alpha=8"}, "lora.alpha");  // without adapters
         }},
        {"lora.dropout",
         [](const Ctx& c) {
             EXPECT_NE(trace(c.t, {"lora.r=4", "trainer.max_steps=3"}),
                       trace(c.t, {"lora.r=4", "lora.dropout=0.2", "trainer.max_steps=3"}));
             expect_refused(c.t, {"lora.dropout=0.1"}, "lora.dropout");  // without adapters
         }},
        {"lora.target_modules",
         [](const Ctx& c) {
             EXPECT_LT(
                 dry(c.t, {"lora.r=4", "lora.target_modules=[c_attn]"})["memory_bytes"]["gradients"].get<int64_t>(),
                 dry(c.t, {"lora.r=4", "lora.target_modules=[c_attn, c_fc]"})["memory_bytes"]["gradients"]
                     .get<int64_t>());
             expect_refused(c.t, {"lora.r=4", "lora.target_modules=[q_proj]"}, "lora.target_modules");
         }},
        {"lora.use_rslora",
         [](const Ctx& c) {
             EXPECT_NE(trace(c.t, {"lora.r=4", "trainer.max_steps=3"}),
                       trace(c.t, {"lora.r=4", "lora.use_rslora=true", "trainer.max_steps=3"}));
         }},
        {"lora.init_from",
         [](const Ctx& c) {
             // A LoRA checkpoint's step directory as a PEFT adapter directory.
             const auto s = c.t.train({"lora.r=4", "trainer.max_steps=2"});
             const fs::path step = c.t.run_dir(s) / "checkpoints/step_2", adapter = step.parent_path() / "peft";
             fs::create_directories(adapter);
             fs::copy_file(step / "adapter_config.json", adapter / "adapter_config.json");
             fs::copy_file(step / "model.safetensors", adapter / "adapter_model.safetensors");
             EXPECT_NE(dry(c.t, {"lora.r=4", "lora.init_from=" + adapter.string()})["loss"],
                       dry(c.t, {"lora.r=4"})["loss"]);
             expect_refused(c.t, {"lora.r=4", "lora.init_from=" + step.string() + "/nothing"}, "lora.init_from");
         }},
        // data: each key changes what the loader reads, and is refused for a source that never reads it.
        {"data.source",
         [](const Ctx& c) {
             const auto text = dry(c.t, text_source(c.t, c.in, "cache_source"));
             EXPECT_NE(text["train_windows"], dry(c.t, {"model.vocab_size=320"})["train_windows"]);
         }},
        {"data.paths",
         [](const Ctx& c) {
             EXPECT_NE(dry(c.t, text_source(c.t, c.in, "cache_paths_a"))["train_windows"],
                       dry(c.t, text_source(c.t, c.in, "cache_paths_b", "text", c.in.corpus_short))["train_windows"]);
             expect_refused(c.t, {"data.paths=[" + c.in.corpus.string() + "]"}, "data.paths");
         }},
        {"data.text_field",
         [](const Ctx& c) {
             const Sets jsonl = text_source(c.t, c.in, "cache_field", "jsonl", c.in.jsonl);
             EXPECT_NE(dry(c.t, jsonl)["train_windows"],
                       dry(c.t, with(jsonl, {"data.text_field=body"}))["train_windows"]);
             expect_refused(c.t, with(text_source(c.t, c.in, "cache_field_text"), {"data.text_field=body"}),
                            "data.text_field");
         }},
        // source hf: pyarrow's hub cache folders (tests/data/fixtures/hf): tiny has train and validation
        // splits, configs has the configs `default` and `alt`.
        {"data.split",
         [](const Ctx& c) {
             const Sets hf = text_source(c.t, c.in, "cache_split", "hf", kHfFixtures / "datasets--testorg--tiny");
             EXPECT_NE(dry(c.t, hf)["train_windows"], dry(c.t, with(hf, {"data.split=validation"}))["train_windows"]);
             expect_refused(c.t, with(text_source(c.t, c.in, "cache_split_text"), {"data.split=validation"}),
                            "data.split");
         }},
        {"data.val_split",
         [](const Ctx& c) {
             const Sets hf = text_source(c.t, c.in, "cache_val_split", "hf", kHfFixtures / "datasets--testorg--tiny");
             EXPECT_NE(dry(c.t, hf)["train_windows"],
                       dry(c.t, with(hf, {"data.val_split=validation"}))["train_windows"]);
             expect_refused(c.t, with(text_source(c.t, c.in, "cache_val_split_text"), {"data.val_split=validation"}),
                            "data.val_split");
         }},
        {"data.config_name",
         [](const Ctx& c) {
             const Sets hf = text_source(c.t, c.in, "cache_config", "hf", kHfFixtures / "datasets--testorg--configs");
             EXPECT_NE(dry(c.t, hf)["train_windows"], dry(c.t, with(hf, {"data.config_name=alt"}))["train_windows"]);
             expect_refused(c.t, with(text_source(c.t, c.in, "cache_config_text"), {"data.config_name=alt"}),
                            "data.config_name");
         }},
        // A copy of the fixture's hub cache folder with tag `old`: a snapshot whose train split is the validation
        // file.
        {"data.revision",
         [](const Ctx& c) {
             const fs::path repo = c.t.root() / "hub/datasets--testorg--tiny";
             fs::create_directories(repo.parent_path());
             fs::copy(kHfFixtures / "datasets--testorg--tiny", repo,
                      fs::copy_options::recursive | fs::copy_options::copy_symlinks);
             const std::string sha = std::string(40, 'a'), old = std::string(40, 'b');
             fs::create_directories(repo / "snapshots" / old / "data");
             fs::create_symlink("../../" + sha + "/data/validation-00000-of-00001.parquet",
                                repo / "snapshots" / old / "data/train-00000-of-00001.parquet");
             llmt::write_file_atomic(repo / "refs/old", old);
             const Sets hf = text_source(c.t, c.in, "cache_revision", "hf", repo);
             EXPECT_NE(dry(c.t, hf)["train_windows"], dry(c.t, with(hf, {"data.revision=old"}))["train_windows"]);
             expect_refused(c.t, with(text_source(c.t, c.in, "cache_revision_text"), {"data.revision=old"}),
                            "data.revision");
         }},
        {"data.tokenizer",
         [](const Ctx& c) {
             const Sets merged = with(text_source(c.t, c.in, "cache_tok_b"),
                                      {"data.tokenizer=" + c.in.tokenizer_merges.string()});
             EXPECT_NE(dry(c.t, text_source(c.t, c.in, "cache_tok_a"))["train_windows"],
                       dry(c.t, merged)["train_windows"]);
         }},
        {"data.val_fraction",
         [](const Ctx& c) {
             EXPECT_NE(
                 dry(c.t, text_source(c.t, c.in, "cache_vf_a"))["train_windows"],
                 dry(c.t, with(text_source(c.t, c.in, "cache_vf_b"), {"data.val_fraction=0.5"}))["train_windows"]);
             expect_refused(c.t, {"data.val_fraction=0.5"}, "data.val_fraction");
         }},
        {"data.cache_dir",
         [](const Ctx& c) {
             (void)dry(c.t, text_source(c.t, c.in, "cache_dir_probe"));
             EXPECT_TRUE(fs::is_directory(c.t.root() / "cache_dir_probe"));
             expect_refused(c.t, {"data.cache_dir=" + (c.t.root() / "x").string()}, "data.cache_dir");
         }},
        {"data.train_shards",
         [](const Ctx& c) {
             EXPECT_NE(dry(c.t, {"data.train_shards=" + (c.t.root() / "shards/val_*.bin").string()})["train_windows"],
                       dry(c.t, {})["train_windows"]);
         }},
        {"data.val_shards",
         [](const Ctx& c) {
             const Sets eval = {"trainer.max_steps=1", "trainer.eval_every_steps=1"};
             trajectory_differs(c, eval,
                                with(eval, {"data.val_shards=" + (c.t.root() / "shards/train_*.bin").string()}));
         }},
        // The synthetic shards are llm.c files: read as header-less nanoGPT tokens they are other data.
        {"data.shard_format",
         [](const Ctx& c) { EXPECT_NE(outcome(c.t, {"data.shard_format=nanogpt"}), outcome(c.t, {})); }},
        {"data.shuffle", [](const Ctx& c) { trajectory_differs(c, {"data.shuffle=false"}, {}); }},
        // Read by the chat source only (data/chat/chat_loader.h; tests/data/chat_*_test.cpp and
        // tests/integration/lora_test.cpp show what it changes); refused for every other source.
        {"data.packing", [](const Ctx& c) { expect_refused(c.t, {"data.packing=true"}, "data.packing"); }},
        // Image classification: read by model.arch mlp/cnn and data.source idx only (their effect:
        // tests/models/classifier_test.cpp, tests/integration/classifier_train_test.cpp); refused here.
        {"model.image_size", [](const Ctx& c) { expect_refused(c.t, {"model.image_size=32"}, "model.image_size"); }},
        {"model.in_channels", [](const Ctx& c) { expect_refused(c.t, {"model.in_channels=3"}, "model.in_channels"); }},
        {"model.num_classes", [](const Ctx& c) { expect_refused(c.t, {"model.num_classes=5"}, "model.num_classes"); }},
        {"model.conv_channels",
         [](const Ctx& c) { expect_refused(c.t, {"model.conv_channels=[8]"}, "model.conv_channels"); }},
        {"model.hidden_sizes",
         [](const Ctx& c) { expect_refused(c.t, {"model.hidden_sizes=[8]"}, "model.hidden_sizes"); }},
        {"data.train_images", [](const Ctx& c) { expect_refused(c.t, {"data.train_images=x"}, "data.train_images"); }},
        {"data.train_labels", [](const Ctx& c) { expect_refused(c.t, {"data.train_labels=x"}, "data.train_labels"); }},
        {"data.test_images", [](const Ctx& c) { expect_refused(c.t, {"data.test_images=x"}, "data.test_images"); }},
        {"data.test_labels", [](const Ctx& c) { expect_refused(c.t, {"data.test_labels=x"}, "data.test_labels"); }},
        {"data.pixel_mean", [](const Ctx& c) { expect_refused(c.t, {"data.pixel_mean=0.5"}, "data.pixel_mean"); }},
        {"data.pixel_std", [](const Ctx& c) { expect_refused(c.t, {"data.pixel_std=0.5"}, "data.pixel_std"); }},
        {"data.augment.crop_padding",
         [](const Ctx& c) { expect_refused(c.t, {"data.augment.crop_padding=2"}, "data.augment.crop_padding"); }},
        {"data.augment.hflip",
         [](const Ctx& c) { expect_refused(c.t, {"data.augment.hflip=true"}, "data.augment.hflip"); }},
        {"trainer.epochs", [](const Ctx& c) { expect_refused(c.t, {"trainer.epochs=2"}, "trainer.epochs"); }},
        // Read by model.arch cnn on CUDA (its effect: tests/kernels/cuda_conv_test.cpp, GPU); refused here and
        // with mlp (tests/integration/classifier_train_test.cpp).
        {"trainer.conv_tf32",
         [](const Ctx& c) { expect_refused(c.t, {"trainer.conv_tf32=false"}, "trainer.conv_tf32"); }},
        // trainer
        {"trainer.max_steps", [](const Ctx& c) { EXPECT_EQ(c.t.train({"trainer.max_steps=2"})["steps"], 2); }},
        {"trainer.micro_batch_size",
         [](const Ctx& c) {
             EXPECT_NE(dry(c.t, {"trainer.micro_batch_size=4"})["memory_bytes"]["activations"],
                       dry(c.t, {})["memory_bytes"]["activations"]);
         }},
        {"trainer.grad_accum_steps",
         [](const Ctx& c) {
             EXPECT_EQ(c.t.train({"trainer.max_steps=1", "trainer.grad_accum_steps=3"})["tokens"], 3 * 2 * 8);
         }},
        {"trainer.lr", [](const Ctx& c) { trajectory_differs(c, {"trainer.lr=0.02"}, {}); }},
        {"trainer.min_lr", [](const Ctx& c) { trajectory_differs(c, {"trainer.min_lr=0"}, {}); }},
        {"trainer.warmup_steps", [](const Ctx& c) { trajectory_differs(c, {"trainer.warmup_steps=0"}, {}); }},
        // Five steps: over three, both decays pass the same midpoint.
        {"trainer.schedule",
         [](const Ctx& c) {
             trajectory_differs(c, {"trainer.max_steps=5", "trainer.schedule=linear"},
                                {"trainer.max_steps=5", "trainer.schedule=cosine"});
         }},
        {"trainer.weight_decay", [](const Ctx& c) { trajectory_differs(c, {"trainer.weight_decay=0.9"}, {}); }},
        {"trainer.decay_embeddings",
         [](const Ctx& c) {
             trajectory_differs(c, {"trainer.weight_decay=0.9", "trainer.decay_embeddings=true"},
                                {"trainer.weight_decay=0.9"});
         }},
        {"trainer.betas", [](const Ctx& c) { trajectory_differs(c, {"trainer.betas=[0.5, 0.6]"}, {}); }},
        {"trainer.eps", [](const Ctx& c) { trajectory_differs(c, {"trainer.eps=0.1"}, {}); }},
        // SGD moves the weights differently and keeps one buffer where AdamW keeps two.
        {"trainer.optimizer",
         [](const Ctx& c) {
             trajectory_differs(c, {"trainer.optimizer=sgd"}, {});
             EXPECT_EQ(2 * dry(c.t, {"trainer.optimizer=sgd"})["memory_bytes"]["optimizer"].get<int64_t>(),
                       dry(c.t, {})["memory_bytes"]["optimizer"].get<int64_t>());
         }},
        {"trainer.momentum",
         [](const Ctx& c) {
             trajectory_differs(c, {"trainer.optimizer=sgd", "trainer.momentum=0.5"}, {"trainer.optimizer=sgd"});
         }},
        {"trainer.dampening",
         [](const Ctx& c) {
             trajectory_differs(c, {"trainer.optimizer=sgd", "trainer.dampening=0.5"}, {"trainer.optimizer=sgd"});
         }},
        {"trainer.nesterov",
         [](const Ctx& c) {
             trajectory_differs(c, {"trainer.optimizer=sgd", "trainer.nesterov=true"}, {"trainer.optimizer=sgd"});
         }},
        {"trainer.max_grad_norm", [](const Ctx& c) { trajectory_differs(c, {"trainer.max_grad_norm=0.001"}, {}); }},
        // On the CPU bf16 rounds the GEMMs' operands (kernels/cpu/gemm_bf16.h): a different trajectory.
        {"trainer.precision", [](const Ctx& c) { trajectory_differs(c, {"trainer.precision=bf16"}, {}); }},
        {"trainer.recompute",
         [](const Ctx& c) {
             const auto none = dry(c.t, {})["memory_bytes"]["activations"].get<int64_t>();
             EXPECT_LT(dry(c.t, {"trainer.recompute=gelu"})["memory_bytes"]["activations"].get<int64_t>(), none);
             EXPECT_LT(dry(c.t, {"trainer.recompute=all"})["memory_bytes"]["activations"].get<int64_t>(), none);
         }},
        {"trainer.log_every_steps",
         [](const Ctx& c) {
             const auto a = c.t.train({"trainer.max_steps=5", "trainer.log_every_steps=4"});
             EXPECT_EQ(c.t.metrics(a).size(), 3u);  // steps 1, 4 and the last
         }},
        {"trainer.eval_every_steps",
         [](const Ctx& c) { trajectory_differs(c, {"trainer.eval_every_steps=1"}, {"trainer.eval_every_steps=0"}); }},
        {"trainer.eval_steps",
         [](const Ctx& c) {
             const Sets eval = {"trainer.max_steps=1", "trainer.eval_every_steps=1"};
             trajectory_differs(c, with(eval, {"trainer.eval_steps=1"}), with(eval, {"trainer.eval_steps=3"}));
         }},
        {"trainer.save_every_steps",
         [](const Ctx& c) {
             const Sets keep = {"trainer.keep_last=5"};
             EXPECT_EQ(checkpoints_of(c.t, c.t.train(with(keep, {"trainer.save_every_steps=1"}))), 3);
             EXPECT_EQ(checkpoints_of(c.t, c.t.train(with(keep, {"trainer.save_every_steps=0"}))), 1);
         }},
        {"trainer.keep_last",
         [](const Ctx& c) {
             const Sets every = {"trainer.save_every_steps=1"};
             EXPECT_EQ(checkpoints_of(c.t, c.t.train(with(every, {"trainer.keep_last=2"}))), 2);
             EXPECT_EQ(checkpoints_of(c.t, c.t.train(with(every, {"trainer.keep_last=1"}))), 1);
         }},
        // dist: one process synchronises nothing (GradSync stays off); with peers each key shapes it.
        {"dist.backend",
         [](const Ctx& c) {
             expect_refused(c.t, {"dist.backend=nccl", "run.device=cpu"}, "dist.backend");
         }},
        {"dist.timeout_sec",
         [](const Ctx& c) {
             const double quick = rendezvous_timeout_s(c.t, "0.3"), slow = rendezvous_timeout_s(c.t, "1.5");
             EXPECT_GT(slow - quick, 0.6) << "timeouts of 0.3 s and 1.5 s gave up after " << quick << " and " << slow;
         }},
        {"dist.bucket_mb",
         [](const Ctx& c) {
             EXPECT_EQ(train::grad_sync_plan(c.t.config({"dist.bucket_mb=1"}), 2).bucket_bytes, 1u << 20);
             EXPECT_EQ(train::grad_sync_plan(c.t.config({"dist.bucket_mb=2"}), 2).bucket_bytes, 2u << 20);
         }},
        {"dist.overlap",
         [](const Ctx& c) {
             EXPECT_TRUE(train::grad_sync_plan(c.t.config({"dist.overlap=true"}), 2).overlap);
             EXPECT_FALSE(train::grad_sync_plan(c.t.config({"dist.overlap=false"}), 2).overlap);
         }},
        {"dist.zero_stage",
         [](const Ctx& c) {
             EXPECT_TRUE(train::grad_sync_plan(c.t.config({"dist.zero_stage=1"}), 2).zero1);
             EXPECT_FALSE(train::grad_sync_plan(c.t.config({"dist.zero_stage=0"}), 2).zero1);
         }},
        // tracking
        {"tracking.jsonl",
         [](const Ctx& c) {
             const auto off = c.t.train({"trainer.max_steps=1", "tracking.jsonl=false"});
             const auto on = c.t.train({"trainer.max_steps=1"});
             EXPECT_FALSE(fs::exists(c.t.run_dir(off) / "metrics.jsonl") &&
                          fs::file_size(c.t.run_dir(off) / "metrics.jsonl") > 0);
             EXPECT_GT(fs::file_size(c.t.run_dir(on) / "metrics.jsonl"), 0u);
         }},
        // MLflow and TensorBoard content is checked by independent readers in tests/tracking; here, that
        // each key changes what is written.
        {"tracking.mlflow.uri",
         [](const Ctx& c) {
             const fs::path store = c.t.root() / "probe_mlruns";
             c.t.train({"trainer.max_steps=1", "tracking.mlflow.uri=" + store.string()});
             EXPECT_TRUE(fs::exists(store / "0" / "meta.yaml"));
             expect_refused(c.t, {"tracking.mlflow.uri=s3://bucket/mlruns"}, "tracking.mlflow.uri");
         }},
        {"tracking.mlflow.experiment",
         [](const Ctx& c) {
             const fs::path store = c.t.root() / "probe_mlruns_exp";
             c.t.train({"trainer.max_steps=1", "tracking.mlflow.uri=" + store.string(),
                        "tracking.mlflow.experiment=probe-exp"});
             bool found = false;
             for (const auto& e : fs::directory_iterator(store))
                 if (fs::exists(e.path() / "meta.yaml"))
                     found |= read_file(e.path() / "meta.yaml").find("name: 'probe-exp'") != std::string::npos;
             EXPECT_TRUE(found);
         }},
        {"tracking.mlflow.run_name",
         [](const Ctx& c) {
             const fs::path store = c.t.root() / "probe_mlruns_name";
             c.t.train({"trainer.max_steps=1", "tracking.mlflow.uri=" + store.string(),
                        "tracking.mlflow.run_name=probe-run"});
             bool found = false;
             for (const auto& e : fs::recursive_directory_iterator(store))
                 if (e.path().filename() == "mlflow.runName") found |= read_file(e.path()) == "probe-run";
             EXPECT_TRUE(found);
         }},
        {"tracking.tensorboard_dir",
         [](const Ctx& c) {
             const fs::path tb = c.t.root() / "probe_tb";
             const auto s = c.t.train({"trainer.max_steps=1", "tracking.tensorboard_dir=" + tb.string()});
             EXPECT_FALSE(fs::is_empty(tb / s["run_id"].get<std::string>()));
         }},
        // output
        {"output.root_dir",
         [](const Ctx& c) {
             const fs::path other = c.t.root() / "other_runs";
             const auto s = c.t.train({"trainer.max_steps=1", "output.root_dir=" + other.string()});
             EXPECT_TRUE(fs::is_directory(other / s["run_id"].get<std::string>()));
         }},
        {"output.run_id",
         [](const Ctx& c) {
             EXPECT_EQ(c.t.train({"trainer.max_steps=1", "output.run_id=probe-id"})["run_id"], "probe-id");
         }},
        {"output.sync",
         [](const Ctx& c) {
             S3Env s3;
             const auto s = c.t.train({"trainer.max_steps=1", "output.sync=s3://llmt-test/probe"});
             EXPECT_EQ(s3.model_parts(s, "probe"), 1);
             expect_refused(c.t, {"output.sync=gs://bucket/x"}, "output.sync");
         }},
        {"output.sync_part_mb",
         [](const Ctx& c) {
             S3Env s3;
             // The tiny model's file is ~30 KiB: one PUT by default, parts of 16 KiB at 1/64 MiB.
             auto s = c.t.train({"trainer.max_steps=1", "output.sync=s3://llmt-test/one"});
             EXPECT_EQ(s3.model_parts(s, "one"), 1);
             s = c.t.train(
                 {"trainer.max_steps=1", "output.sync=s3://llmt-test/parts", "output.sync_part_mb=0.015625"});
             EXPECT_GE(s3.model_parts(s, "parts"), 2);
             expect_refused(c.t, {"output.sync_part_mb=0"}, "output.sync_part_mb");
         }},
    };
    return p;
}

TEST(SchemaWalk, EveryKeyHasAReaderProbe) {
    for (const auto& f : schema_fields())
        EXPECT_TRUE(probes().count(f.path))
            << "config key `" << f.path << "` has no reader probe in tests/config/schema_walk_test.cpp: add one that "
            << "shows its value is used (changing it changes a loss, a size, a path, ...), or refuse the value in "
               "config validation until it is implemented, and probe that";
}

TEST(SchemaWalk, EveryProbeNamesASchemaKey) {
    for (const auto& [key, probe] : probes())
        EXPECT_NE(find_field(key), nullptr) << "probe for `" << key << "`, which is not in the schema";
}

TEST(SchemaWalk, EveryProbedKeyIsRead) {
    TinyRun t("schema_walk");
    const Inputs in = write_inputs(t.root());
    const Ctx c{t, in};
    for (const auto& f : schema_fields()) {
        auto it = probes().find(f.path);
        if (it == probes().end()) continue;  // EveryKeyHasAReaderProbe names it
        SCOPED_TRACE("config key " + f.path);
        const auto t0 = std::chrono::steady_clock::now();
        try {
            it->second(c);
        } catch (const std::exception& e) {
            ADD_FAILURE() << "the probe of `" << f.path << "` threw: " << e.what();
        }
        std::printf("[schema-walk] %-28s %6.0f ms\n", f.path.c_str(),
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
}

}  // namespace
}  // namespace llmt::config
