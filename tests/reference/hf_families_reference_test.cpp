// Qwen2 (tied, untied), Qwen3 (head_dim != hidden / heads) and Mistral (a window shorter than the sequence,
// and none) against transformers itself: tiny random models written by save_pretrained with their float64
// loss, gradients, greedy continuations and a PEFT adapter's losses and gradients
// (tools/ref/hf_families_ref.py, run on a machine with transformers 5.17 and peft 0.21; the output is
// committed under fixtures/hf_families/ with its summary.json). Each directory goes the way a user's does:
// model.init_from (config.json decides model.arch through the registry), lora.init_from for the adapter.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/loader.h"
#include "core/fs.h"
#include "core/safetensors.h"
#include "hf_grads.h"
#include "models/hf_adapter.h"
#include "models/hf_resolve.h"
#include "models/hf_weights.h"
#include "models/language_model.h"
#include "models/peft.h"
#include "models/registry.h"

namespace llmt::models {
namespace {

namespace fs = std::filesystem;

const int B = 2, T = 16;  // the script's batch

fs::path fixture(const std::string& name) {
    return fs::path(LLMT_SOURCE_DIR) / "tests/reference/fixtures/hf_families" / name;
}

double number_in(const fs::path& file) { return std::stod(read_file(file)); }

// The config a user writes to fine-tune the directory (with an adapter when `peft`).
config::Config user_config(const fs::path& dir, bool peft) {
    std::string yaml = fmt::format(
        "data: {{source: shards, train_shards: t.bin, val_shards: v.bin}}\n"
        "model: {{init_from: {}, block_size: {}, vocab_pad_multiple: 64}}\n",
        (dir / "model").string(), 2 * T);  // room for the prompt and its continuation
    // lora.r as the adapter has it (r is what turns adapters on); alpha and the targets come from the file.
    if (peft) yaml += fmt::format("lora: {{r: 4, init_from: {}}}\n", (dir / "peft").string());
    config::Config cfg = config::load_config_string(yaml, "x.yaml");
    return cfg;
}

struct Loaded {
    std::unique_ptr<Model> model;
    std::vector<int32_t> inputs, targets;
};

Loaded load(const std::string& name, bool peft) {
    const fs::path dir = fixture(name);
    config::Config cfg = user_config(dir, peft);
    const HfSource src = prepare_init_from(cfg);
    if (peft) prepare_lora_init_from(cfg);
    Loaded l;
    l.model = make_model(cfg);
    load_hf_params(*l.model, HfWeightsSource(HfWeights::open(src.weights)));
    if (peft) load_peft_adapter(*l.model, dir / "peft");
    const SafetensorsFile batch = SafetensorsFile::open(dir / "batch.safetensors");
    l.inputs.resize(static_cast<size_t>(B * T));
    l.targets.resize(l.inputs.size());
    batch.read_exact("inputs", StDType::kI32, {B, T}, l.inputs.data());
    batch.read_exact("targets", StDType::kI32, {B, T}, l.targets.data());
    return l;
}

struct Family {
    const char* dir;
    const char* arch;
};

class HfFamilies : public ::testing::TestWithParam<Family> {};

// One training step's loss and every trained tensor's gradient (split back into HF's tensors) against the
// fixture's float64 figures in `loss_file` and `grads_file` of family f. fp32 against float64: a mean of 29
// log-softmaxes over 64 logits after two layers rounds at ~1e-7 relative; 1e-5 (tighter than the
// acceptance's 1e-4) leaves room for rounding only. Relative L2 error per tensor under 1e-4: fp32 sums over
// 32 rows and <= 64 channels round at ~1e-6.
void expect_step_matches(Loaded& l, const Family& f, const std::string& loss_file, const std::string& grads_file) {
    l.model->zero_grad();
    const float loss = l.model->forward(l.inputs.data(), l.targets.data(), B, T, /*train=*/true);
    l.model->backward();
    const double want = number_in(fixture(f.dir) / loss_file);
    EXPECT_NEAR(loss, want, 1e-5 * std::abs(want));
    std::vector<std::vector<float>> scratch;
    testing::expect_grads_match(hf_tensors(*l.model, l.model->grads(), scratch),
                                SafetensorsFile::open(fixture(f.dir) / grads_file), 1e-4);
}

// Loss and every parameter gradient against transformers in float64.
TEST_P(HfFamilies, LossAndGradientsMatchTransformers) {
    Loaded l = load(GetParam().dir, false);
    EXPECT_EQ(l.model->arch(), GetParam().arch);
    expect_step_matches(l, GetParam(), "loss.txt", "grads.safetensors");
}

// `generate -t 0`: the KV-cache decoder's argmax after the prompt and after each chosen token equals
// transformers' greedy continuation token for token (the script records each step's best-second logit gap,
// >= 7.6e-3 here, far above fp32's ~1e-5 error in a logit).
TEST_P(HfFamilies, GreedyContinuationMatchesTransformers) {
    Loaded l = load(GetParam().dir, false);
    const auto g = nlohmann::json::parse(read_file(fixture(GetParam().dir) / "greedy.json"));
    const std::vector<int32_t> prompt = g["prompt"].get<std::vector<int32_t>>();
    const std::vector<int32_t> want = g["continuation"].get<std::vector<int32_t>>();
    auto dec = as_language_model(*l.model).decoder(static_cast<int>(prompt.size() + want.size()));
    const int V = l.model->dims().vocab_size;
    auto argmax = [&](const float* logits) {
        return static_cast<int32_t>(std::max_element(logits, logits + V) - logits);
    };
    std::vector<int32_t> got;
    const float* logits = dec->prefill(prompt);
    for (std::size_t i = 0; i < want.size(); ++i) {
        got.push_back(argmax(logits));
        if (i + 1 < want.size()) logits = dec->step(got.back());
    }
    EXPECT_EQ(got, want);
}

// A PEFT adapter on every linear layer (r 4, alpha 8): its loss and the adapters' gradients as PEFT computes
// them, and after merging (llmtrain merge's fold) the merged model's loss as merge_and_unload's.
TEST_P(HfFamilies, PeftAdapterAndItsMergeMatchPeft) {
    Loaded l = load(GetParam().dir, true);
    expect_step_matches(l, GetParam(), "peft_loss.txt", "peft_grads.safetensors");
    l.model->merge_adapters();
    const float merged = l.model->forward(l.inputs.data(), l.targets.data(), B, T, /*train=*/false);
    const double want_merged = number_in(fixture(GetParam().dir) / "peft_merged_loss.txt");
    EXPECT_NEAR(merged, want_merged, 1e-5 * std::abs(want_merged));
}

INSTANTIATE_TEST_SUITE_P(Transformers, HfFamilies,
                         ::testing::Values(Family{"qwen2_tied", "qwen2"}, Family{"qwen2_untied", "qwen2"},
                                           Family{"qwen3", "qwen3"}, Family{"mistral_window", "mistral"},
                                           Family{"mistral_nowindow", "mistral"}),
                         [](const ::testing::TestParamInfo<Family>& p) { return std::string(p.param.dir); });

}  // namespace
}  // namespace llmt::models
