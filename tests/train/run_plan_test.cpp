// Memory estimates before allocation (train/run_plan.h, issue 17): the figures match a built model's
// memory plan, a 5x10^13-parameter model is refused with its figures against a limit, sizes that
// overflow 64 bits are caught, and --max-memory sizes parse.
#include "train/run_plan.h"

#include <gtest/gtest.h>

#include <string>

#include "config/loader.h"
#include "core/error.h"
#include "models/registry.h"

using namespace llmt;
using namespace llmt::train;

namespace {

config::Config tiny(const std::vector<std::string>& sets = {}) {
    const std::string yaml = R"(schema_version: 1
run: {name: tiny, seed: 7, device: cpu, threads: 1}
model: {arch: gpt2, n_layer: 2, n_head: 2, d_model: 16, block_size: 8, vocab_size: 64, vocab_pad_multiple: 64}
trainer: {max_steps: 3, warmup_steps: 1, eval_every_steps: 0, micro_batch_size: 2}
data: {source: shards, train_shards: "x_*.bin", val_shards: ""}
)";
    return config::load_config_string(yaml, "<tiny>", sets);
}

std::string message_of_check(const config::Config& cfg, std::uint64_t limit) {
    try {
        check_config_memory(cfg, limit);
    } catch (const InputError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(RunPlan, EstimateMatchesTheBuiltModel) {
    const auto cfg = tiny();
    const MemoryEstimate e = estimate_training_memory(cfg, Device::kCpu, DType::kF32);
    const auto model = models::make_model(cfg);
    const auto plan = model->memory_plan(cfg.trainer.micro_batch_size, cfg.model.block_size);
    EXPECT_EQ(e.parameters, plan.params);
    EXPECT_EQ(e.gradients, plan.grads);
    EXPECT_EQ(e.activations, plan.activations);
    EXPECT_EQ(e.optimizer, 2 * plan.grads);  // AdamW m and v in fp32
    EXPECT_EQ(estimate_training_memory(cfg, Device::kCpu, DType::kF32, 4).optimizer, (2 * plan.grads + 3) / 4);
    // recompute: all keeps fewer activations.
    EXPECT_LT(estimate_training_memory(tiny({"trainer.recompute=all"}), Device::kCpu, DType::kF32).activations,
              e.activations);
}

// ZeRO-1 under bf16 shards the fp32 masters as well as the moments; the bf16 copy and the gradients stay
// whole, and the model is built whole first (the start-up peak the check also takes).
TEST(RunPlan, Zero1ShardsTheBf16MastersOverTheRanks) {
    const auto cfg = tiny();
    const auto plan = models::plan_model_memory(cfg, Device::kCuda, DType::kBF16, cfg.trainer.micro_batch_size,
                                                cfg.model.block_size);
    const MemoryEstimate whole = estimate_training_memory(cfg, Device::kCuda, DType::kBF16);
    const MemoryEstimate two = estimate_training_memory(cfg, Device::kCuda, DType::kBF16, 2);
    ASSERT_EQ(plan.grads % 128, 0u);  // whole 64-byte lines of fp32: the halves below are exact
    EXPECT_EQ(whole.parameters, plan.params);
    EXPECT_EQ(whole.build_peak, 0u);
    EXPECT_EQ(two.parameters, plan.params - plan.grads / 2);  // half the 4-byte masters gone
    EXPECT_EQ(two.gradients, plan.grads);
    EXPECT_EQ(two.optimizer, plan.grads);  // 8 bytes of moments per parameter, halved
    EXPECT_EQ(two.build_peak, plan.params + plan.grads);
    // fp32: the weights are the compute weights and stay whole; only the moments are divided.
    EXPECT_EQ(estimate_training_memory(cfg, Device::kCpu, DType::kF32, 2).parameters,
              estimate_training_memory(cfg, Device::kCpu, DType::kF32).parameters);
    // validate --world-size: divided under dist.zero_stage 1 only.
    EXPECT_EQ(check_config_memory(tiny({"dist.zero_stage=1"}), std::nullopt, 2).estimate.optimizer,
              estimate_training_memory(cfg, Device::kCpu, DType::kF32).optimizer / 2);
    EXPECT_EQ(check_config_memory(cfg, std::nullopt, 2).estimate.optimizer,
              estimate_training_memory(cfg, Device::kCpu, DType::kF32).optimizer);
    // A limit above the steady state but below the start-up peak is refused, naming the peak.
    MemoryEstimate e;
    e.parameters = 6ull << 30;
    e.build_peak = 10ull << 30;
    EXPECT_NO_THROW(check_memory(e, {11ull << 30, "--max-memory"}, cfg));
    try {
        check_memory(e, {8ull << 30, "--max-memory"}, cfg);
        ADD_FAILURE() << "a start-up peak over the limit passed";
    } catch (const InputError& err) {
        EXPECT_NE(std::string(err.what()).find("10.00 GiB while the model is built"), std::string::npos) << err.what();
    }
}

TEST(RunPlan, HugeModelIsRefusedWithFigures) {
    // 1024 layers of d_model 65536: 12 x 1024 x 65536^2 = 5.3e13 parameters, within the schema's bounds.
    const auto cfg = tiny({"model.n_layer=1024", "model.d_model=65536", "model.n_head=64"});
    const std::string msg = message_of_check(cfg, 64ull << 30);
    EXPECT_NE(msg.find("model does not fit: training needs"), std::string::npos) << msg;
    EXPECT_NE(msg.find("GiB per process (parameters"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--max-memory is 64.00 GiB"), std::string::npos) << msg;
    const MemoryEstimate e = estimate_training_memory(cfg, Device::kCpu, DType::kF32);
    EXPECT_GT(e.parameters, 4ull * 50'000'000'000'000ull);
    EXPECT_EQ(message_of_check(tiny(), 64ull << 30), "");
}

TEST(RunPlan, OverflowIsCaughtNotWrapped) {
    // B*T = 2^40 rows of MLP activations 2^20 wide: 2^62 bytes each, and several of them (the logits are
    // computed in chunks of rows, models/lm_head.h, so they are no longer the largest buffer).
    const auto cfg = tiny({"trainer.micro_batch_size=1048576", "model.block_size=1048576", "model.d_ff=1048576"});
    try {
        estimate_training_memory(cfg, Device::kCpu, DType::kF32);
        ADD_FAILURE() << "no overflow error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("64-bit"), std::string::npos) << e.what();
    }
}

TEST(RunPlan, ParseMemorySize) {
    EXPECT_EQ(parse_memory_size("1073741824"), 1073741824u);
    EXPECT_EQ(parse_memory_size("64GiB"), 64ull << 30);
    EXPECT_EQ(parse_memory_size("64G"), 64ull << 30);
    EXPECT_EQ(parse_memory_size("512mib"), 512ull << 20);
    EXPECT_EQ(parse_memory_size("1.5TB"), 1'500'000'000'000ull);
    EXPECT_EQ(parse_memory_size("2 KB"), 2000u);
    for (const char* bad : {"", "GiB", "-1G", "0", "12X", "1.2.3G", "1e3", "99999999999999999999P"})
        EXPECT_THROW(parse_memory_size(bad), UsageError) << bad;
}
