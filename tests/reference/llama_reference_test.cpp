// LLaMA against PyTorch (tools/ref/llama_ref.py, float64): a Hugging Face-layout safetensors file written
// by PyTorch loads into our model (q/k/v and gate/up fused on load, an inv_freq buffer ignored, no
// lm_head when tied), and our fp32 loss and every parameter gradient (split back into HF tensors) match:
// RMSNorm, rotate-half RoPE with Llama 3 scaling, grouped-query attention, SwiGLU, tied and untied.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "core/fs.h"
#include "core/safetensors.h"
#include "hf_grads.h"
#include "models/hf_adapter.h"
#include "models/llama.h"
#include "support/subprocess.h"

namespace llmt::models {
namespace {

struct Case {
    int L, C, NH, KV, F, T, B, V;
    bool tied;
    const char* scaling;
    // LoRA (models/lora.h): rank 0 = none; targets as lora.target_modules, ref_targets as the script's list.
    int r = 0;
    double alpha = 0;
    bool rslora = false;
    std::vector<std::string> targets = {};
    std::string ref_targets = "";
};

void compare_with_pytorch(const Case& c) {
    auto dir = std::filesystem::temp_directory_path() /
               fmt::format("llmt_llama_ref_{}_{}_{}", ::getpid(), c.tied, c.scaling);
    std::filesystem::create_directories(dir);
    const std::vector<std::string> argv = {
        "/usr/bin/python3", std::string(LLMT_SOURCE_DIR) + "/tools/ref/llama_ref.py", dir.string(),
        std::to_string(c.L), std::to_string(c.C), std::to_string(c.NH), std::to_string(c.KV), std::to_string(c.F),
        std::to_string(c.T), std::to_string(c.B), std::to_string(c.V), c.tied ? "1" : "0", c.scaling, "20261127"};
    std::vector<std::string> args = argv;
    if (c.r > 0)
        args.insert(args.end(),
                    {std::to_string(c.r), fmt::format("{}", c.alpha), c.ref_targets, c.rslora ? "1" : "0"});
    auto r = testing::run_process(args, "", 600);
    ASSERT_EQ(r.exit_code, 0) << r.err;

    LlamaConfig cfg;
    cfg.n_layer = c.L;
    cfg.n_head = c.NH;
    cfg.n_kv_head = c.KV;
    cfg.d_model = c.C;
    cfg.d_ff = c.F;
    cfg.block_size = c.T;
    cfg.vocab_size = c.V;
    cfg.padded_vocab = (c.V + 63) / 64 * 64;  // padding rows the file does not have
    cfg.tie_embeddings = c.tied;
    if (std::string(c.scaling) == "llama3") cfg.rope_scaling = {"llama3", 32.0, 1.0, 4.0, 8};
    cfg.lora.r = c.r;
    cfg.lora.alpha = c.alpha;
    cfg.lora.rslora = c.rslora;
    cfg.lora.target_modules = c.targets;
    Llama model(cfg);
    load_hf_params(model, SafetensorsSource(SafetensorsFile::open(dir / "weights.safetensors")));
    if (c.r > 0) {
        load_trained_params(model, SafetensorsSource(SafetensorsFile::open(dir / "adapters.safetensors")));
        EXPECT_EQ(model.base().grad_bytes(), 0u);  // the base is frozen: no gradient arena
        EXPECT_TRUE(model.base().grads().data() == nullptr);
    }
    auto batch = SafetensorsFile::open(dir / "batch.safetensors");
    std::vector<int32_t> inputs(static_cast<size_t>(c.B * c.T)), targets(inputs.size());
    batch.read_exact("inputs", StDType::kI32, {c.B, c.T}, inputs.data());
    batch.read_exact("targets", StDType::kI32, {c.B, c.T}, targets.data());

    model.zero_grad();
    const float loss = model.forward(inputs.data(), targets.data(), c.B, c.T, /*train=*/true);
    model.backward();
    const double ref_loss = std::stod(read_file(dir / "loss.txt"));
    // fp32 against float64: the bound, 1e-5 relative. The loss is a mean of ~100 log-softmaxes;
    // fp32 rounding of these sums is ~1e-7 relative, so 1e-5 leaves room only for rounding, not errors.
    EXPECT_NEAR(loss, ref_loss, 1e-5 * std::abs(ref_loss));

    // Our gradients in HF layout (fused tensors split back), compared per tensor by relative L2 error.
    std::vector<std::vector<float>> scratch;
    const auto ours = hf_tensors(model, model.grads(), scratch);
    const auto ref = SafetensorsFile::open(dir / "grads.safetensors");
    // Relative L2 error under 1e-4 for fp32 against the fp64 reference (as for GPT-2): fp32 sums over
    // B*T = 96 rows and C = 64 channels round at ~1e-6; anything real is orders larger.
    testing::expect_grads_match(ours, ref, 1e-4);
    std::filesystem::remove_all(dir);
}

// 2 layers, d 64, 4 heads sharing 2 KV heads (GQA), FFN 96, T 32, B 3, V 300 (padded to 320).
TEST(LlamaReference, UntiedWithLlama3ScalingMatchesPyTorch) {
    compare_with_pytorch({2, 64, 4, 2, 96, 32, 3, 300, false, "llama3"});
}

TEST(LlamaReference, TiedMultiQueryMatchesPyTorch) {
    compare_with_pytorch({2, 64, 4, 1, 96, 32, 3, 300, true, "none"});
}

// LoRA against PEFT's definition: the gradients of A and B of q_proj and v_proj (two parts of our fused
// q|k|v, k left out) and down_proj, alpha / r scaling; the base frozen (no gradient arena at all).
TEST(LlamaReference, LoraOnQVDownMatchesPyTorch) {
    compare_with_pytorch({2,
                          64,
                          4,
                          2,
                          96,
                          32,
                          3,
                          300,
                          false,
                          "llama3",
                          4,
                          8.0,
                          false,
                          {"q_proj", "v_proj", "down_proj"},
                          "q_proj,v_proj,down_proj"});
}

// Every linear layer (all-linear: every part of q|k|v and gate|up, o and down, not the head) with rsLoRA's
// alpha / sqrt(r), tied embeddings and one KV head.
TEST(LlamaReference, LoraAllLinearRsLoraMatchesPyTorch) {
    compare_with_pytorch({2, 64, 4, 1, 96, 32, 3, 300, true, "none", 8, 16.0, true, {"all-linear"},
                          "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"});
}

}  // namespace
}  // namespace llmt::models
