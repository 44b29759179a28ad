// trainer.precision resolved (train/cpu_precision.h): the rule from given rates, the probe's shapes, the cache
// (a second resolve reads it, an unusable one is measured again), the explicit-bf16 warning, CUDA and the
// classifiers; and an auto run equals the chosen precision's run bit for bit (run.deterministic), with the
// choice in meta.json and the log. Rates are injected (a GemmProber), never timed, so nothing here depends on
// this machine's speed.
#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "core/fs.h"
#include "support/subprocess.h"
#include "support/tiny_run.h"
#include "train/cpu_precision.h"

namespace llmt::train {
namespace {

namespace fs = std::filesystem;
using testing::TinyRun;

kernels::GemmProbe rates(double fp32, double bf16) {
    kernels::GemmProbe p;
    p.fp32_gflops = fp32;
    p.bf16_gflops = bf16;
    p.bf16_path = "avx512_bf16";
    p.bf16_how = "injected";
    p.threads = 1;
    p.seconds = 0.25;
    return p;
}

// A prober that counts its calls and returns fixed rates.
struct Prober {
    double fp32, bf16;
    int calls = 0;
    GemmProber fn() {
        return [this](const std::vector<kernels::GemmShape>&) {
            ++calls;
            return rates(fp32, bf16);
        };
    }
};

TEST(CpuPrecision, FasterPrecisionNeedsTheMargin) {
    EXPECT_EQ(faster_precision(100, 200), "bf16");
    EXPECT_EQ(faster_precision(100, 105), "bf16");  // exactly kBf16Margin
    EXPECT_EQ(faster_precision(100, 104), "fp32");  // a near tie keeps fp32's numerics
    EXPECT_EQ(faster_precision(300, 150), "fp32");
}

// The shapes' weighted FLOPs are the step's linear-layer GEMM FLOPs, stand-ins included.
TEST(CpuPrecision, ProbeShapesKeepTheStepsGemmMix) {
    TinyRun t("cpu_precision_shapes");
    const std::vector<std::string> tiny_cpu = {"model.n_layer=4",         "model.d_model=256",
                                               "model.n_head=4",          "model.block_size=256",
                                               "model.vocab_size=50257",  "model.vocab_pad_multiple=64",
                                               "trainer.micro_batch_size=8"};
    const config::Config cfg = t.config(tiny_cpu);
    const auto shapes = probe_shapes(cfg);
    const double rows = 8 * 256, C = 256, Vp = 50304;
    const double step = 6 * rows * C * (4 * (3 * C + C + 4 * C + 4 * C) + Vp);  // 3 GEMMs x 2 FLOP each
    double weighted = 0, pass = 0;
    for (const auto& s : shapes) {
        weighted += s.flops() * s.weight;
        pass += s.flops();
        EXPECT_LE(std::max({s.M, s.N, s.K}), 4096);
    }
    EXPECT_NEAR(weighted / step, 1.0, 1e-9);
    EXPECT_LE(pass, 24e9);
    EXPECT_EQ(shapes.size(), 15u);  // 4 distinct layers + the head, 3 GEMMs each
    // LoRA freezes the base: no weight-gradient GEMMs.
    auto lora_sets = tiny_cpu;
    lora_sets.push_back("lora.r=4");
    const auto lora = probe_shapes(t.config(lora_sets));
    for (const auto& s : lora) EXPECT_FALSE(s.accumulate);
    EXPECT_EQ(lora.size(), 10u);
    // An image classifier has no probe.
    config::Config image = cfg;
    image.model.arch = "mlp";
    EXPECT_TRUE(probe_shapes(image).empty());
}

TEST(CpuPrecision, LlamaShapesUseGroupedHeadsAndTheGatedMlp) {
    TinyRun t("cpu_precision_llama");
    config::Config cfg = t.config();
    cfg.model.arch = "llama";
    cfg.model.d_model = 64, cfg.model.n_head = 8, cfg.model.n_kv_head = 2, cfg.model.head_dim = 8, cfg.model.d_ff = 96;
    const auto shapes = probe_shapes(cfg);
    auto has_forward = [&](int64_t out, int64_t in) {
        for (const auto& s : shapes)
            if (!s.trans_a && s.trans_b && s.N == out && s.K == in) return true;
        return false;
    };
    EXPECT_TRUE(has_forward((8 + 2 * 2) * 8, 64));  // q|k|v
    EXPECT_TRUE(has_forward(64, 64));               // o
    EXPECT_TRUE(has_forward(2 * 96, 64));           // gate|up
    EXPECT_TRUE(has_forward(64, 96));               // down
}

TEST(CpuPrecision, AutoTakesTheFasterAndCachesIt) {
    TinyRun t("cpu_precision_cache");
    omp_set_num_threads(1);
    const config::Config cfg = t.config({"trainer.precision=auto", "data.cache_dir=" + (t.root() / "cache").string()});
    Prober bf16_faster{100, 180};
    const PrecisionChoice a = resolve_precision(cfg, Device::kCpu, bf16_faster.fn());
    EXPECT_EQ(a.precision, "bf16");
    EXPECT_EQ(bf16_faster.calls, 1);
    EXPECT_FALSE(a.cached);
    ASSERT_TRUE(a.probe.has_value());
    EXPECT_EQ(a.cache_file, precision_cache_file(cfg, probe_shapes(cfg)).string());
    EXPECT_EQ(fs::path(a.cache_file).parent_path(), t.root() / "cache" / "cpu_precision");
    ASSERT_TRUE(fs::exists(a.cache_file));
    // The second resolve reads the cache: no probe, the same figures and choice.
    Prober never{1, 1};
    const PrecisionChoice b = resolve_precision(cfg, Device::kCpu, never.fn());
    EXPECT_EQ(never.calls, 0);
    EXPECT_TRUE(b.cached);
    EXPECT_EQ(b.precision, "bf16");
    EXPECT_DOUBLE_EQ(b.probe->bf16_gflops, 180);
    const auto j = b.to_json();
    EXPECT_EQ(j["configured"], "auto");
    EXPECT_EQ(j["chosen"], "bf16");
    EXPECT_EQ(j["fp32_gflops"], 100.0);
    EXPECT_EQ(j["cached"], true);
    EXPECT_NE(b.log_lines().back().find("auto -> bf16"), std::string::npos) << b.log_lines().back();
    // Other shapes are another cache entry.
    const config::Config wider = t.config({"trainer.precision=auto", "model.d_model=32",
                                           "data.cache_dir=" + (t.root() / "cache").string()});
    Prober fp32_faster{200, 100};
    EXPECT_EQ(resolve_precision(wider, Device::kCpu, fp32_faster.fn()).precision, "fp32");
    EXPECT_EQ(fp32_faster.calls, 1);
    // An unusable cache is measured again, and said.
    write_file_atomic(a.cache_file, "{not json");
    Prober again{200, 100};
    const PrecisionChoice c = resolve_precision(cfg, Device::kCpu, again.fn());
    EXPECT_EQ(again.calls, 1);
    EXPECT_EQ(c.precision, "fp32");
    EXPECT_NE(c.cache_note.find("unusable"), std::string::npos) << c.cache_note;
}

TEST(CpuPrecision, ExplicitBf16SlowerRunsWithAWarningGivingBothRates) {
    TinyRun t("cpu_precision_warn");
    const config::Config cfg = t.config({"trainer.precision=bf16", "data.cache_dir=" + (t.root() / "cache").string()});
    Prober slower{351.5, 140.2};
    const PrecisionChoice c = resolve_precision(cfg, Device::kCpu, slower.fn());
    EXPECT_EQ(c.precision, "bf16");
    EXPECT_NE(c.warning.find("bf16 GEMMs 140.2 GFLOP/s, fp32 351.5 GFLOP/s"), std::string::npos) << c.warning;
    EXPECT_EQ(c.log_lines().back().rfind("warning: ", 0), 0u);
    // Faster bf16: no warning.
    const config::Config other = t.config({"trainer.precision=bf16", "data.cache_dir=" + (t.root() / "c2").string()});
    Prober faster{100, 300};
    EXPECT_EQ(resolve_precision(other, Device::kCpu, faster.fn()).warning, "");
}

TEST(CpuPrecision, Fp32CudaAndClassifiersNeedNoProbe) {
    TinyRun t("cpu_precision_noprobe");
    Prober never{1, 1};
    EXPECT_EQ(resolve_precision(t.config(), Device::kCpu, never.fn()).precision, "fp32");
    EXPECT_EQ(resolve_precision(t.config({"trainer.precision=auto"}), Device::kCuda, never.fn()).precision, "bf16");
    config::Config image = t.config({"trainer.precision=auto"});
    image.model.arch = "cnn";
    EXPECT_EQ(resolve_precision(image, Device::kCpu, never.fn()).precision, "fp32");
    EXPECT_EQ(resolve_precision(image, Device::kCuda, never.fn()).precision, "fp32");
    EXPECT_EQ(never.calls, 0);
}

// `llmtrain print-config --json` prints what auto resolves to on this machine: the cached choice, here seeded
// both ways (the binary keys the cache as this process does: run.threads 1, the same libraries).
TEST(CpuPrecision, PrintConfigShowsTheResolvedPrecision) {
    TinyRun t("cpu_precision_print");
    const std::string cache = "data.cache_dir=" + (t.root() / "cache").string();
    const std::string yaml = (t.root() / "auto.yaml").string();
    write_file_atomic(yaml, t.base_yaml());
    omp_set_num_threads(1);
    for (const auto& [fp32, bf16, want] : {std::tuple{300.0, 100.0, "fp32"}, std::tuple{100.0, 300.0, "bf16"}}) {
        const config::Config cfg = t.config({"trainer.precision=auto", cache});
        std::error_code ec;
        fs::remove(precision_cache_file(cfg, probe_shapes(cfg)), ec);
        Prober seed{fp32, bf16};
        ASSERT_EQ(resolve_precision(cfg, Device::kCpu, seed.fn()).precision, want);
        const auto r = llmt::testing::run_process({llmt::testing::llmtrain_bin(), "print-config", "--config", yaml,
                                                   "--json", "--set", "trainer.precision=auto", "--set", cache});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(nlohmann::json::parse(r.out)["trainer"]["precision"], want) << r.err;
        EXPECT_NE(r.err.find(std::string("precision: auto -> ") + want), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("cached in"), std::string::npos) << r.err;  // the seeded figures, not a new probe
    }
}

std::string losses(const TinyRun& t, const nlohmann::ordered_json& summary) {
    std::string out;
    for (const auto& j : t.metrics(summary))
        if (j.contains("loss"))
            out += fmt::format("{:.17g} {:.17g}\n", j["loss"].get<double>(), j["grad_norm"].get<double>());
    return out;
}

// With the cache saying `faster` wins, an auto run takes it, records it in meta.json and the log, and its losses
// equal an explicit run of that precision bit for bit.
void auto_equals_chosen(const std::string& faster) {
    TinyRun t("cpu_precision_bits_" + faster);
    const std::string cache = "data.cache_dir=" + (t.root() / "cache").string();
    auto with = [&](const std::string& p) {
        std::vector<std::string> s = {"run.deterministic=true", "trainer.max_steps=4", "trainer.precision=" + p};
        if (p != "fp32") s.push_back(cache);  // fp32 reads no probe cache, and refuses the key with shards
        return s;
    };
    omp_set_num_threads(1);  // the trainer's thread count (run.threads 1), which keys the cache
    Prober seed{faster == "bf16" ? 100.0 : 300.0, faster == "bf16" ? 300.0 : 100.0};
    ASSERT_EQ(resolve_precision(t.config(with("auto")), Device::kCpu, seed.fn()).precision, faster);
    const auto a = t.train(with("auto"));
    const auto meta = nlohmann::json::parse(read_file(t.run_dir(a) / "meta.json"));
    EXPECT_EQ(meta["precision"]["chosen"], faster) << meta.dump(2);
    EXPECT_EQ(meta["precision"]["cached"], true) << meta.dump(2);
    EXPECT_EQ(meta["precision"]["bf16_gflops"], seed.bf16);
    const std::string log = read_file(t.run_dir(a) / "logs" / "rank0.log");
    EXPECT_NE(log.find("precision: auto -> " + faster), std::string::npos) << log;
    const auto b = t.train(with(faster));
    EXPECT_EQ(losses(t, a), losses(t, b));
    EXPECT_FALSE(losses(t, a).empty());
    // The other precision differs (so the comparison above can fail).
    const auto c = t.train(with(faster == "bf16" ? "fp32" : "bf16"));
    EXPECT_NE(losses(t, a), losses(t, c));
}

TEST(CpuPrecision, AutoRunEqualsTheChosenPrecisionBitForBit) {
    auto_equals_chosen("bf16");
    auto_equals_chosen("fp32");
}

}  // namespace
}  // namespace llmt::train
