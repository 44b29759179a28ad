// GPT-2 against PyTorch (tools/ref/gpt2_ref.py, float64): a HF-layout safetensors file written by
// PyTorch loads into our model, and our fp32 loss and every parameter gradient match.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/fs.h"
#include "core/safetensors.h"
#include "models/gpt2.h"
#include "hf_grads.h"
#include "models/hf_adapter.h"
#include "support/subprocess.h"

namespace llmt::models {
namespace {

// Runs the reference with dropout probability `p` (0: none) and compares loss and gradients.
void compare_with_pytorch(float p, uint64_t dropout_seed) {
    const int L = 2, C = 64, NH = 4, T = 32, B = 4, V = 50257;
    auto dir = std::filesystem::temp_directory_path() /
               ("llmt_gpt2_ref_" + std::to_string(::getpid()) + "_" + std::to_string(p));
    std::filesystem::create_directories(dir);
    std::vector<std::string> argv = {"/usr/bin/python3", std::string(LLMT_SOURCE_DIR) + "/tools/ref/gpt2_ref.py",
                                     dir.string(), std::to_string(L), std::to_string(C), std::to_string(NH),
                                     std::to_string(T), std::to_string(B), std::to_string(V), "20261126"};
    if (p > 0) {
        argv.push_back(std::to_string(p));
        argv.push_back(std::to_string(dropout_seed));
    }
    auto r = testing::run_process(argv, "", 600);
    ASSERT_EQ(r.exit_code, 0) << r.err;

    Gpt2Config cfg{L, NH, C, 4 * C, T, V, 50304, true, 1e-5f, p, Recompute::kNone, {}, {}};
    Gpt2 model(cfg);
    model.set_dropout_seed(dropout_seed);
    load_hf(model, model.params(), SafetensorsSource(SafetensorsFile::open(dir / "weights.safetensors")));
    auto batch = SafetensorsFile::open(dir / "batch.safetensors");
    std::vector<int32_t> inputs(B * T), targets(B * T);
    batch.read_exact("inputs", StDType::kI32, {B, T}, inputs.data());
    batch.read_exact("targets", StDType::kI32, {B, T}, targets.data());

    model.zero_grad();
    float loss = model.forward(inputs.data(), targets.data(), B, T, /*train=*/true);
    model.backward();
    double ref_loss = std::stod(read_file(dir / "loss.txt"));
    // fp32 against float64: the loss is a mean of ~128 log-softmaxes over 50k logits; 1e-5 relative
    // is ~100x the fp32 rounding of such sums and far below any real error.
    EXPECT_NEAR(loss, ref_loss, 1e-5 * std::abs(ref_loss));

    // Our gradients in HF layout, compared per tensor by relative L2 error.
    std::vector<std::vector<float>> scratch;
    auto ours = hf_tensors(model, model.grads(), scratch);
    auto ref = SafetensorsFile::open(dir / "grads.safetensors");
    // The bound: relative error under 1e-4 for fp32 against the fp64 reference.
    testing::expect_grads_match(ours, ref, 1e-4);
    std::filesystem::remove_all(dir);
}

TEST(Gpt2Reference, LossAndEveryGradientMatchPyTorch) { compare_with_pytorch(0.f, 0); }

// Dropout with the engine's stateless masks, which the reference redraws from the same formula:
// p = 0.25 is exact in binary, so both sides use the same keep threshold and scale.
TEST(Gpt2Reference, LossAndEveryGradientMatchPyTorchWithDropout) {
    compare_with_pytorch(0.25f, 0x1234567890ABCDEFull);
}

}  // namespace
}  // namespace llmt::models
