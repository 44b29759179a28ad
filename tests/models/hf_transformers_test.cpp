// Hugging Face directories against transformers itself, both ways (tools/ref/hf_transformers_check.py):
// what we write (hf_config_json + write_hf_weights, sharded bf16 and single fp32, llama3 RoPE, GQA, untied)
// loads with LlamaForCausalLM.from_pretrained with no missing, unexpected or mismatched tensor and the
// values we wrote; what transformers' save_pretrained writes (sharded, fp32 and bf16, tied/untied llama,
// GPT-2) reads here with its config and every value bit for bit. Label gpu: transformers is installed on
// the GPU machine, not in Debian; skipped where python3 cannot import it.
// LLMT_HF_THEIRS_DIR=<dir> reads a directory the script wrote elsewhere instead of running it (for
// checking the reading half on a machine without transformers).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "config/loader.h"
#include "core/fs.h"
#include "models/hf_config.h"
#include "models/hf_weights.h"

namespace llmt::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The first interpreter that imports transformers, or "".
std::string python_with_transformers() {
    for (const char* py : {"/usr/bin/python3", "python3"})
        if (std::system(fmt::format("{} -c 'import transformers' >/dev/null 2>&1", py).c_str()) == 0) return py;
    return "";
}

// A tiny llama (2 heads, 1 KV head, llama3 RoPE, untied) written with our writers; values exact in bf16.
void write_ours(const fs::path& dir, bool bf16) {
    auto cfg = config::load_config_string(
        "data: {source: shards, train_shards: t, val_shards: v}\n"
        "model: {arch: llama, n_layer: 1, n_head: 2, n_kv_head: 1, d_model: 8, d_ff: 16, vocab_size: 16, block_size: "
        "32,"
        " tie_embeddings: false, rope_theta: 500000, rope_scaling: {type: llama3, factor: 32,"
        " original_max_position_embeddings: 16}}\n",
        "tiny.yaml");
    const std::string l = "model.layers.0.";
    const std::vector<std::pair<std::string, Shape>> specs = {{"model.embed_tokens.weight", {16, 8}},
                                                              {"model.norm.weight", {8}},
                                                              {"lm_head.weight", {16, 8}},
                                                              {l + "self_attn.q_proj.weight", {8, 8}},
                                                              {l + "self_attn.k_proj.weight", {4, 8}},
                                                              {l + "self_attn.v_proj.weight", {4, 8}},
                                                              {l + "self_attn.o_proj.weight", {8, 8}},
                                                              {l + "mlp.gate_proj.weight", {16, 8}},
                                                              {l + "mlp.up_proj.weight", {16, 8}},
                                                              {l + "mlp.down_proj.weight", {8, 16}},
                                                              {l + "input_layernorm.weight", {8}},
                                                              {l + "post_attention_layernorm.weight", {8}}};
    std::vector<std::vector<float>> values;
    values.reserve(specs.size());
    std::vector<HfTensor> tensors;
    json names = json::array();
    for (std::size_t t = 0; t < specs.size(); ++t) {
        std::size_t n = 1;
        for (auto d : specs[t].second) n *= static_cast<std::size_t>(d);
        auto& v = values.emplace_back(n);
        for (std::size_t k = 0; k < n; ++k)
            v[k] = static_cast<float>(static_cast<int>((k * 7) % 13) - 6) / 64.f + t / 1024.f;
        tensors.push_back({specs[t].first, specs[t].second, v.data()});
        names.push_back(specs[t].first);
    }
    HfExportDir out(dir);
    HfWriteOptions o;
    o.dtype = bf16 ? HfDType::kBF16 : HfDType::kF32;
    o.max_shard_bytes = bf16 ? 1000 : 1'000'000;  // bf16: two shards and an index
    write_hf_weights(out.dir(), tensors, o);
    HfExportInfo info;
    info.dtype = bf16 ? "bfloat16" : "float32";
    info.max_position_embeddings = 64;
    info.bos_token_id = {1};
    info.eos_token_id = {2, 3};
    write_file_atomic(out.dir() / "config.json", hf_config_json(cfg.model, info).dump(2));
    write_file_atomic(out.dir() / "generation_config.json", hf_generation_config_json(info).dump(2));
    out.commit();
    const json expect = {{"dtype", info.dtype},
                         {"tensors", names},
                         {"bos", 1},
                         {"eos", {2, 3}},
                         {"config",
                          {{"num_key_value_heads", 1}, {"head_dim", 4}, {"tie_word_embeddings", false},
                           {"max_position_embeddings", 64}, {"rope.rope_type", "llama3"}, {"rope.factor", 32.0},
                           {"rope.rope_theta", 500000.0}, {"rope.original_max_position_embeddings", 16}}}};
    write_file_atomic(dir.string() + ".expect.json", expect.dump(1));
}

// Reads one directory transformers wrote: config and every tensor, bit for bit against its fp32 dump.
void read_theirs(const fs::path& dir, const json& shapes) {
    SCOPED_TRACE(dir.string());
    const HfConfig hf = read_hf_config(dir / "config.json");
    const std::string name = dir.filename().string();
    if (name.rfind("llama_tied", 0) == 0) {
        EXPECT_TRUE(hf.tie_word_embeddings);
        EXPECT_EQ(hf.num_key_value_heads, 2);
        EXPECT_EQ(hf.rope.scaling.type, "llama3");
        EXPECT_EQ(hf.rope.scaling.factor, 32.0);
        EXPECT_EQ(hf.rope.theta, 500000.0);
        EXPECT_EQ(hf.rope.scaling.original_max_position_embeddings, 64);
        EXPECT_EQ(hf.norm_eps, 1e-5);
    } else if (name.rfind("llama_untied", 0) == 0) {
        EXPECT_FALSE(hf.tie_word_embeddings);
        EXPECT_EQ(hf.num_key_value_heads, 1);
        EXPECT_EQ(hf.head_dim, 32);  // not hidden_size / heads
        EXPECT_EQ(hf.rope.scaling.type, "none");
        EXPECT_EQ(hf.norm_eps, 1e-6);  // LlamaConfig's default
    } else {
        EXPECT_EQ(hf.model_type, "gpt2");
        EXPECT_EQ(hf.intermediate_size, 256);  // n_inner null: 4 x n_embd
        EXPECT_TRUE(hf.tie_word_embeddings);
    }
    EXPECT_EQ(hf.dtype, name.find("bf16") != std::string::npos ? "bfloat16" : "float32");
    // The merge takes the shape from it.
    config::Config cfg = config::load_config_string(
        "data: {source: shards, train_shards: t, val_shards: v}\nmodel: {init_from: x, block_size: 64}\n", "x.yaml");
    apply_hf_config(cfg, hf);
    EXPECT_EQ(cfg.model.arch, hf.model_type);
    EXPECT_EQ(cfg.model.head_dim, hf.head_dim);

    const HfWeights w = HfWeights::open(dir);
    EXPECT_TRUE(w.sharded());
    std::vector<std::string> want;
    for (const auto& [tensor, shape] : shapes.items()) want.push_back(tensor);
    EXPECT_EQ(w.names(), want);
    for (const auto& [tensor, shape] : shapes.items()) {
        const Shape s = shape.get<Shape>();
        const std::string ref = read_file(dir.string() + ".f32/" + tensor);
        std::vector<float> got(ref.size() / 4);
        w.read_f32(tensor, got.data(), s);
        EXPECT_EQ(std::memcmp(got.data(), ref.data(), ref.size()), 0) << tensor;
    }
}

TEST(HfTransformers, OursLoadThereAndTheirsLoadHere) {
    const fs::path root = fs::temp_directory_path() / ("hf_transformers_" + std::to_string(::getpid()));
    fs::remove_all(root);
    fs::path theirs = root / "theirs";
    if (const char* given = std::getenv("LLMT_HF_THEIRS_DIR")) {
        theirs = given;
    } else {
        const std::string py = python_with_transformers();
        if (py.empty()) GTEST_SKIP() << "transformers is not importable here (it is on the GPU machine)";
        write_ours(root / "ours" / "llama_bf16", true);
        write_ours(root / "ours" / "llama_f32", false);
        fs::create_directories(theirs);
        const std::string cmd = fmt::format("{} " LLMT_SOURCE_DIR "/tools/ref/hf_transformers_check.py {} {}", py,
                                            (root / "ours").string(), theirs.string());
        ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << " refused our export (see its output)";
    }
    const json manifest = json::parse(read_file(theirs / "manifest.json"));
    EXPECT_EQ(manifest["dirs"].size(), 6u);
    for (const auto& [dir, shapes] : manifest["dirs"].items()) read_theirs(theirs / dir, shapes);
    if (!std::getenv("LLMT_HF_THEIRS_DIR")) fs::remove_all(root);
}

}  // namespace
}  // namespace llmt::models
