// Measured-throughput table and its interpolation (server/estimate/throughput.h), and the estimates built on it
// (server/estimate/estimate.h), on hand-written rows whose expected figures are worked out in the comments, and
// the `llmtrain estimate` command over the repository's table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "config/loader.h"
#include "core/error.h"
#include "models/classifier.h"
#include "models/gpt2.h"
#include "server/estimate/estimate.h"
#include "server/estimate/throughput.h"
#include "support/subprocess.h"

namespace fs = std::filesystem;
using namespace llmt;
using namespace llmt::server;

namespace {

fs::path write_rows(const std::string& name, const std::string& text) {
    fs::path p = fs::temp_directory_path() / ("llmt_throughput_" + std::to_string(::getpid()) + "_" + name + ".jsonl");
    std::ofstream(p) << text;
    return p;
}

std::string row(const std::string& device, const std::string& card, int world, int threads, double fpt, double tps,
                const std::string& date = "2026-11-26", const std::string& command = "hand-written") {
    return "{\"device\":\"" + device + "\",\"card\":\"" + card + "\",\"world_size\":" + std::to_string(world) +
           ",\"threads_per_rank\":" + std::to_string(threads) + ",\"flops_per_token\":" + std::to_string(fpt) +
           ",\"tokens_per_s\":" + std::to_string(tps) + ",\"date\":\"" + date +
           "\",\"machine\":\"test\",\"command\":\"" + command + "\",\"model\":\"m\",\"precision\":\"fp32\"}\n";
}

// Two CPU models (1e8 and 4e8 FLOP/token) at world size 1 with 1 thread, the small one also at 2 and 4
// ranks; one GPU row on another card.
const std::string kTable = "# a comment line\n" + row("cpu", "xeon x2", 1, 1, 1e8, 1000) +  // line 2
                           row("cpu", "xeon x2", 1, 1, 4e8, 200) +                          // line 3
                           row("cpu", "xeon x2", 2, 1, 1e8, 1800) +                         // line 4: eff 0.9
                           row("cpu", "xeon x2", 4, 1, 1e8, 3240) +                         // line 5: eff 0.81
                           row("cuda", "H200", 1, 0, 1e9, 5e5);                              // line 6

}  // namespace

TEST(Throughput, ExactInterpolatedAndNearestRates) {
    auto rows = load_throughput(write_rows("rates", kTable));
    ASSERT_EQ(rows.size(), 5u);
    EXPECT_EQ(rows[0].line, 2);

    auto exact = estimate_throughput(rows, "cpu", "", 1e8, 1);
    ASSERT_TRUE(exact.measured);
    EXPECT_DOUBLE_EQ(exact.tokens_per_s_rank, 1000);
    EXPECT_EQ(exact.card, "xeon x2");

    // Achieved FLOP/s: 1e11 at 1e8 FLOP/token, 8e10 at 4e8. At 2e8 (halfway in log) the log-log
    // interpolation gives sqrt(1e11 * 8e10) = 8.944e10 FLOP/s, i.e. 447.2 tokens/s.
    auto mid = estimate_throughput(rows, "cpu", "", 2e8, 1);
    EXPECT_NEAR(mid.tokens_per_s_rank, std::sqrt(1e11 * 8e10) / 2e8, 1e-6);
    EXPECT_EQ(mid.rows_used, (std::vector<int>{2, 3}));

    // Outside the range: the nearest model's FLOP/s (8e10) over the new size.
    auto big = estimate_throughput(rows, "cpu", "", 8e8, 1);
    EXPECT_NEAR(big.tokens_per_s_rank, 100, 1e-9);
    EXPECT_NE(big.rate_basis.find("outside"), std::string::npos);

    EXPECT_FALSE(estimate_throughput(rows, "cuda", "A100", 1e9, 1).measured);  // no such card
    EXPECT_TRUE(estimate_throughput(rows, "cuda", "H2", 1e9, 1).measured);     // substring
}

TEST(Throughput, EfficiencyMeasuredInterpolatedExtrapolated) {
    auto rows = load_throughput(write_rows("eff", kTable));
    EXPECT_NEAR(estimate_throughput(rows, "cpu", "", 1e8, 2).efficiency, 0.9, 1e-12);
    EXPECT_NEAR(estimate_throughput(rows, "cpu", "", 1e8, 4).efficiency, 0.81, 1e-12);
    // W=3: between 2 (0.9) and 4 (0.81) at t = log2(3/2) = 0.585.
    const double t = std::log2(1.5);
    EXPECT_NEAR(estimate_throughput(rows, "cpu", "", 1e8, 3).efficiency, 0.9 + t * (0.81 - 0.9), 1e-12);
    // W=16: 0.81 per two doublings -> 0.81^2 over four.
    auto e16 = estimate_throughput(rows, "cpu", "", 1e8, 16);
    EXPECT_NEAR(e16.efficiency, 0.81 * 0.81, 1e-12);
    EXPECT_NE(e16.efficiency_basis.find("extrapolated"), std::string::npos);
    // GPU rows have no multi-rank row: efficiency 1, and the basis says it is not measured.
    auto g = estimate_throughput(rows, "cuda", "", 1e9, 8);
    EXPECT_EQ(g.efficiency, 1);
    EXPECT_NE(g.efficiency_basis.find("not measured"), std::string::npos);
}

TEST(Throughput, ThreadsPairEfficiencyRows) {
    // 2 ranks x 1 thread compared with 1 rank x 1 thread (0.95), not with 1 rank x 2 threads.
    auto rows =
        load_throughput(write_rows("threads", row("cpu", "c", 1, 2, 1e8, 1900) + row("cpu", "c", 1, 1, 1e8, 1000) +
                                                  row("cpu", "c", 2, 1, 1e8, 1900)));
    auto e = estimate_throughput(rows, "cpu", "", 1e8, 2, 1);
    EXPECT_EQ(e.threads_per_rank, 1);
    EXPECT_DOUBLE_EQ(e.tokens_per_s_rank, 1000);
    EXPECT_NEAR(e.efficiency, 0.95, 1e-12);
    EXPECT_DOUBLE_EQ(estimate_throughput(rows, "cpu", "", 1e8, 1, 0).tokens_per_s_rank, 1900);  // most threads
}

TEST(Throughput, EfficiencyComparesRowsOfTheSameRun) {
    // Two single-GPU figures (1000 from one benchmark, 1200 from the multi-GPU run) and the multi-GPU run's
    // 2-GPU row: efficiency is 2280 / (2 x 1200) = 0.95 from that run, not 2280 / (2 x 1100) = 1.036.
    auto rows =
        load_throughput(write_rows("samerun", row("cuda", "H100", 1, 0, 1e9, 1000, "2026-11-26", "bench A") +
                                                  row("cuda", "H100", 1, 0, 1e9, 1200, "2026-11-26", "multi") +
                                                  row("cuda", "H100", 2, 0, 1e9, 2280, "2026-11-26", "multi")));
    auto e = estimate_throughput(rows, "cuda", "", 1e9, 2);
    EXPECT_NEAR(e.efficiency, 0.95, 1e-12);
    EXPECT_DOUBLE_EQ(e.tokens_per_s_rank, 1100);  // the per-rank rate is the median of every single-GPU row
}

TEST(Throughput, BadRowsNameTheLineAndField) {
    auto expect_error = [](const std::string& text, const std::string& needle) {
        fs::path p = write_rows("bad", text);
        try {
            load_throughput(p);
            ADD_FAILURE() << "accepted: " << text;
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
        }
    };
    expect_error("{not json\n", ":1: invalid JSON");
    expect_error(row("cpu", "c", 1, 1, 1e8, 1) + "{\"device\":\"cpu\"}\n", ":2: missing field 'card'");
    expect_error(row("tpu", "c", 1, 1, 1e8, 1), "field 'device' must be");
    expect_error(row("cpu", "c", 0, 1, 1e8, 1), "'world_size' must be >= 1");
    expect_error(row("cpu", "c", 1, 1, 1e8, -5), "'tokens_per_s' must be > 0");
    EXPECT_THROW(load_throughput("/nonexistent/throughput.jsonl"), IoError);
}

TEST(Estimate, JobFiguresFromRows) {
    config::Config cfg = config::load_config_file(fs::path(LLMT_SOURCE_DIR) / "configs/presets/gpt2_tiny_cpu.yaml",
                                                  {"trainer.max_steps=100", "run.threads=1"});
    const double fpt = models::Gpt2Config::from(cfg.model).flops_per_token(cfg.model.block_size);
    ThroughputTable table;
    table.rows =
        load_throughput(write_rows("job", row("cpu", "c", 1, 1, fpt, 1000) + row("cpu", "c", 2, 1, fpt, 1800)));
    table.path = "rows.jsonl";
    JobSpec spec;
    spec.nproc_per_node = 2;
    Rates rates{0.5, 3.0};

    const double tokens =
        100.0 * cfg.trainer.micro_batch_size * cfg.trainer.grad_accum_steps * cfg.model.block_size * 2;
    nlohmann::json e = estimate_job(spec, cfg, rates, table);
    EXPECT_EQ(e["source"], "measured");
    EXPECT_DOUBLE_EQ(e["tokens"].get<double>(), tokens);
    EXPECT_NEAR(e["tokens_per_s"].get<double>(), 1800, 1e-9);  // 2 ranks x 1000 x efficiency 0.9
    EXPECT_NEAR(e["duration_s"].get<double>(), tokens / 1800, 1e-9);
    EXPECT_NEAR(e["cost_usd"].get<double>(), tokens / 1800 / 3600 * 2 * 0.5, 1e-12);
    EXPECT_EQ(e["rows_used"].size(), 2u);

    nlohmann::json sc = estimate_scaling(spec, cfg, rates, table, 2);
    ASSERT_EQ(sc["worlds"].size(), 2u);
    EXPECT_DOUBLE_EQ(sc["worlds"][0]["speedup"].get<double>(), 1);
    EXPECT_NEAR(sc["worlds"][1]["speedup"].get<double>(), 1.8, 1e-9);  // same total tokens, 1800 vs 1000 tok/s

    // No table: an estimate that says so, with no figures.
    nlohmann::json none = estimate_job(spec, cfg, rates, ThroughputTable{});
    EXPECT_EQ(none["source"], "unmeasured");
    EXPECT_TRUE(none["cost_usd"].is_null());
    EXPECT_NE(none["reason"].get<std::string>().find("no throughput table"), std::string::npos);
}

// trainer.precision picks its own rows; auto takes the faster measured on the card (as the CPU probe takes the
// faster there), bf16 on CUDA; a precision without rows falls back to all the card's rows and says so.
TEST(Estimate, UsesTheRowsOfTheChosenPrecision) {
    auto preset = [](const std::string& precision) {
        return config::load_config_file(fs::path(LLMT_SOURCE_DIR) / "configs/presets/gpt2_tiny_cpu.yaml",
                                        {"trainer.max_steps=100", "run.threads=1", "trainer.precision=" + precision});
    };
    const double fpt = models::Gpt2Config::from(preset("fp32").model).flops_per_token(256);
    auto as_bf16 = [](std::string r) { return r.replace(r.find("\"fp32\""), 6, "\"bf16\""); };
    auto table_of = [&](const std::string& name, double fp32_tps, double bf16_tps) {
        return ThroughputTable{load_throughput(write_rows(name, row("cpu", "c", 1, 1, fpt, fp32_tps) +
                                                                     as_bf16(row("cpu", "c", 1, 1, fpt, bf16_tps)))),
                               "rows.jsonl", ""};
    };
    const ThroughputTable bf16_faster = table_of("bf16_faster", 1000, 1500),
                          fp32_faster = table_of("fp32_faster", 1000, 500);
    auto tps = [&](const std::string& precision, const ThroughputTable& t) {
        nlohmann::json e = estimate_job(JobSpec{}, preset(precision), Rates{}, t);
        EXPECT_EQ(e["source"], "measured") << e.dump(2);
        EXPECT_EQ(e["rows_used"].size(), 1u) << e.dump(2);
        return e["tokens_per_s"].get<double>();
    };
    EXPECT_DOUBLE_EQ(tps("fp32", bf16_faster), 1000);
    EXPECT_DOUBLE_EQ(tps("bf16", bf16_faster), 1500);
    EXPECT_DOUBLE_EQ(tps("auto", bf16_faster), 1500);
    EXPECT_DOUBLE_EQ(tps("bf16", fp32_faster), 500);
    EXPECT_DOUBLE_EQ(tps("auto", fp32_faster), 1000);
    const std::string basis = estimate_job(JobSpec{}, preset("auto"), Rates{}, fp32_faster)["basis"]["rate"];
    EXPECT_NE(basis.find("trainer.precision auto: the fp32 rows (the faster measured on this card)"),
              std::string::npos)
        << basis;
    // Only fp32 rows: bf16 is estimated from them, and says so.
    ThroughputTable fp32_only{load_throughput(write_rows("fp32_only", row("cpu", "c", 1, 1, fpt, 1000))), "rows.jsonl",
                              ""};
    const nlohmann::json e = estimate_job(JobSpec{}, preset("bf16"), Rates{}, fp32_only);
    EXPECT_DOUBLE_EQ(e["tokens_per_s"].get<double>(), 1000);
    EXPECT_NE(e["basis"]["rate"].get<std::string>().find("no trainer.precision bf16 rows"), std::string::npos);
}

// The table in the repository (written by bench/ runs) loads and covers the default preset on the CPU.
TEST(Estimate, RepositoryTableCoversTheCpuPresets) {
    ThroughputTable table;
    table.path = (fs::path(LLMT_SOURCE_DIR) / "configs/throughput.jsonl").string();
    table.rows = load_throughput(table.path);
    config::Config cfg = config::load_config_file(fs::path(LLMT_SOURCE_DIR) / "configs/presets/gpt2_tiny_cpu.yaml");
    JobSpec spec;
    nlohmann::json e = estimate_job(spec, cfg, Rates{}, table);
    EXPECT_EQ(e["source"], "measured") << e.dump(2);
}

// `llmtrain estimate` over the repository's table: one row per world size, W=1 at speedup 1, and the
// rows it used named; a bad --throughput-file is exit 2 naming the file and line.
TEST(EstimateCli, PrintsWorldSizesFromMeasuredRows) {
    const std::string preset = std::string(LLMT_SOURCE_DIR) + "/configs/presets/gpt2_tiny_cpu.yaml";
    auto r = llmt::testing::run_process({llmt::testing::llmtrain_bin(), "estimate", "--config", preset,
                                         "--nproc-per-node", "2", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["source"], "measured");
    ASSERT_EQ(j["worlds"].size(), 2u);
    EXPECT_DOUBLE_EQ(j["worlds"][0]["speedup"].get<double>(), 1);
    EXPECT_FALSE(j["rows_used"].empty());

    auto human = llmt::testing::run_process({llmt::testing::llmtrain_bin(), "estimate", "--config", preset});
    ASSERT_EQ(human.exit_code, 0) << human.err;
    EXPECT_NE(human.out.find("measured rows used"), std::string::npos) << human.out;

    fs::path bad = write_rows("cli_bad", row("cpu", "c", 1, 1, 1e8, 1000) + "{\"device\": 3}\n");
    auto b = llmt::testing::run_process(
        {llmt::testing::llmtrain_bin(), "estimate", "--config", preset, "--throughput-file", bad.string()});
    EXPECT_EQ(b.exit_code, 2);
    EXPECT_NE(b.err.find(bad.string() + ":2"), std::string::npos) << b.err;
}

// Image-classifier rows (images_per_s, flops_per_image, arch) and the estimates built on them
// (server/estimate/estimate_classifier.h).
namespace {

std::string image_row(const std::string& arch, double fpi, double ips, int world = 1, int threads = 2, int batch = 128,
                      const std::string& card = "epyc x2") {
    return "{\"device\":\"cpu\",\"card\":\"" + card + "\",\"world_size\":" + std::to_string(world) +
           ",\"threads_per_rank\":" + std::to_string(threads) + ",\"arch\":\"" + arch +
           "\",\"flops_per_image\":" + std::to_string(fpi) + ",\"images_per_s\":" + std::to_string(ips) +
           ",\"micro_batch_size\":" + std::to_string(batch) +
           ",\"date\":\"2026-11-27\",\"machine\":\"test\",\"command\":\"hand-written\",\"model\":\"m\","
           "\"precision\":\"fp32\"}\n";
}

// An IDX file of n 28x28 images (only its header is read by an estimate), so the epoch size is known
// without the installed dataset.
fs::path tiny_idx_images(int n) {
    fs::path p = fs::temp_directory_path() / ("llmt_estimate_images_" + std::to_string(::getpid()) + ".idx");
    std::ofstream f(p, std::ios::binary);
    const unsigned char head[16] = {0,
                                    0,
                                    8,
                                    3,
                                    static_cast<unsigned char>(n >> 24),
                                    static_cast<unsigned char>(n >> 16),
                                    static_cast<unsigned char>(n >> 8),
                                    static_cast<unsigned char>(n),
                                    0,
                                    0,
                                    0,
                                    28,
                                    0,
                                    0,
                                    0,
                                    28};
    f.write(reinterpret_cast<const char*>(head), 16);
    f << std::string(static_cast<size_t>(n) * 28 * 28, '\0');
    return p;
}

config::Config classifier_config(const std::string& preset, std::vector<std::string> sets) {
    sets.push_back("data.train_images=" + tiny_idx_images(1200).string());
    sets.push_back("run.device=cpu");
    return config::load_config_file(fs::path(LLMT_SOURCE_DIR) / "configs/presets" / (preset + ".yaml"), sets);
}

double fpi_of(const config::Config& cfg) { return models::ClassifierConfig::from(cfg).train_flops_per_image(); }

}  // namespace

TEST(Throughput, ClassifierRowsLoadApartFromTheLanguageModels) {
    auto rows =
        load_throughput(write_rows("images", row("cpu", "xeon x2", 1, 1, 1e8, 1000) + image_row("cnn", 3e7, 5000)));
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_FALSE(rows[0].images());
    EXPECT_TRUE(rows[1].images());
    EXPECT_EQ(rows[1].arch, "cnn");
    EXPECT_DOUBLE_EQ(rows[1].tokens_per_s, 5000);  // images/s in the rate field
    EXPECT_EQ(rows[1].micro_batch_size, 128);
    EXPECT_EQ(rows[1].to_json()["images_per_s"], 5000.0);
    EXPECT_FALSE(rows[1].to_json().contains("tokens_per_s"));
    // A language model's estimate never reads the images/s row (a newer card of the same device).
    config::Config lm = config::load_config_file(fs::path(LLMT_SOURCE_DIR) / "configs/presets/gpt2_tiny_cpu.yaml",
                                                 {"run.threads=1"});
    ThroughputTable table{rows, "rows.jsonl", ""};
    nlohmann::json lm_est = estimate_job(JobSpec{}, lm, Rates{}, table);
    EXPECT_EQ(lm_est["card"], "xeon x2") << lm_est.dump(2);
    EXPECT_EQ(lm_est["rows_used"].size(), 1u) << lm_est.dump(2);

    auto expect_error = [](const std::string& text, const std::string& needle) {
        try {
            load_throughput(write_rows("bad_images", text));
            ADD_FAILURE() << "accepted: " << text;
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    std::string no_arch = image_row("cnn", 3e7, 5000);
    no_arch.replace(no_arch.find("\"arch\":\"cnn\","), 13, "");
    expect_error(no_arch, ":1: missing field 'arch'");
    expect_error(image_row("resnet", 3e7, 5000),
                 "field 'arch' must be the model.arch of an image classifier, got \"resnet\"");
    expect_error(image_row("cnn", 3e7, -1), "'images_per_s' must be > 0");
    std::string both = image_row("cnn", 3e7, 5000);
    both.insert(1, "\"tokens_per_s\":5,");
    expect_error(both, "not both");
}

// fashion_mnist_cnn (5 epochs, micro-batch 128) on a 1,200-image training file: the split keeps
// 1200 - round(1200 x 0.0833333) = 1100 images, so 5 epochs are 5,500 images; at the row's 1,000
// images/s that is 5.5 s, 1.1 s per epoch. Two ranks: 550 each, the rows' efficiency 0.9.
TEST(Estimate, ClassifierFromImagesRows) {
    config::Config cfg = classifier_config("fashion_mnist_cnn", {});
    const double fpi = fpi_of(cfg);
    ThroughputTable table{load_throughput(write_rows("cnn", image_row("cnn", fpi, 1000) +
                                                               image_row("cnn", fpi, 1800, 2, 1) +
                                                               image_row("cnn", fpi, 1000, 1, 1))),
                          "rows.jsonl", ""};
    JobSpec one;
    nlohmann::json e = estimate_job(one, cfg, Rates{0.5, 3.0}, table);
    ASSERT_EQ(e["source"], "measured") << e.dump(2);
    EXPECT_EQ(e["workload"], "image_classifier");
    EXPECT_EQ(e["model"], "cnn 28x28x1 c32,64 h128 k10");
    EXPECT_EQ(e["images_per_epoch"], 1100);
    EXPECT_DOUBLE_EQ(e["images"].get<double>(), 5500);
    EXPECT_DOUBLE_EQ(e["images_per_s"].get<double>(), 1000);  // the row's rate
    EXPECT_NEAR(e["duration_s"].get<double>(), 5.5, 1e-9);
    EXPECT_NEAR(e["seconds_per_epoch"].get<double>(), 1.1, 1e-9);
    EXPECT_NEAR(e["cost_usd"].get<double>(), 5.5 / 3600 * 0.5, 1e-12);
    EXPECT_EQ(e["steps"], 5 * 9);  // ceil(1100 / 128) = 9 micro-batches an epoch
    EXPECT_NE(e["basis"]["rate"].get<std::string>().find("measured for this shape"), std::string::npos) << e.dump(2);
    EXPECT_EQ(e["rows_used"].size(), 1u);
    EXPECT_FALSE(e.contains("tokens"));

    JobSpec two;
    two.nproc_per_node = 2;
    nlohmann::json sc = estimate_scaling(two, cfg, Rates{}, table, 2);
    ASSERT_EQ(sc["source"], "measured") << sc.dump(2);
    ASSERT_EQ(sc["worlds"].size(), 2u);
    EXPECT_NEAR(sc["worlds"][1]["images_per_s"].get<double>(), 1800, 1e-9);  // 2 x 1000 x (1800 / (2 x 1000))
    EXPECT_NEAR(sc["worlds"][1]["duration_s"].get<double>(), 5500 / 1800.0, 1e-9);
    EXPECT_EQ(sc["worlds"][1]["steps"], 5 * 5);  // ceil(550 / 128) = 5 an epoch on each rank

    // Without trainer.epochs, max_steps of the global batch: 100 x 128 images.
    config::Config steps = classifier_config("fashion_mnist_cnn", {"trainer.epochs=0", "trainer.max_steps=100"});
    nlohmann::json s = estimate_job(one, steps, Rates{}, table);
    EXPECT_DOUBLE_EQ(s["images"].get<double>(), 12800);
    EXPECT_NEAR(s["duration_s"].get<double>(), 12.8, 1e-9);
}

// A shape with no row of its own says so and is sized by the achieved FLOP/s of its arch's rows, as the
// language models are; an arch with no row at all is unmeasured, and the reason names it.
TEST(Estimate, ClassifierShapeWithoutARowSaysWhy) {
    config::Config cfg = classifier_config("fashion_mnist_cnn", {});
    const double fpi = fpi_of(cfg);
    ThroughputTable table{load_throughput(write_rows("cnn_only", image_row("cnn", fpi, 1000))), "rows.jsonl", ""};
    config::Config wide = classifier_config("fashion_mnist_cnn", {"model.conv_channels=[64,128]"});
    nlohmann::json e = estimate_job(JobSpec{}, wide, Rates{}, table);
    ASSERT_EQ(e["source"], "measured") << e.dump(2);
    const std::string basis = e["basis"]["rate"];
    EXPECT_NE(basis.find("no row of this shape (cnn 28x28x1 c64,128 h128 k10)"), std::string::npos) << basis;
    EXPECT_NE(basis.find("FLOP/image"), std::string::npos) << basis;
    // Same achieved FLOP/s: 1000 x fpi / fpi(wide).
    EXPECT_NEAR(e["images_per_s"].get<double>(), 1000 * fpi / fpi_of(wide), 1e-6);

    config::Config mlp = classifier_config("fashion_mnist_mlp", {});
    nlohmann::json m = estimate_job(JobSpec{}, mlp, Rates{}, table);
    EXPECT_EQ(m["source"], "unmeasured");
    EXPECT_TRUE(m["duration_s"].is_null());
    EXPECT_NE(m["reason"].get<std::string>().find("no world-size-1 images/s row of model.arch mlp for device cpu"),
              std::string::npos)
        << m.dump(2);
    // A micro-batch no row has: the rows of another batch, and the basis says so.
    config::Config b64 = classifier_config("fashion_mnist_cnn", {"trainer.micro_batch_size=64"});
    EXPECT_NE(estimate_job(JobSpec{}, b64, Rates{}, table)["basis"]["rate"].get<std::string>().find(
                  "no row at the job's micro_batch_size 64"),
              std::string::npos);
    // trainer.epochs with a training file the server cannot read: no figure, and why.
    config::Config missing =
        config::load_config_file(fs::path(LLMT_SOURCE_DIR) / "configs/presets/fashion_mnist_cnn.yaml",
                                 {"data.train_images=/nonexistent/train.idx", "run.device=cpu"});
    nlohmann::json x = estimate_job(JobSpec{}, missing, Rates{}, table);
    EXPECT_EQ(x["source"], "unmeasured");
    EXPECT_NE(x["reason"].get<std::string>().find("trainer.epochs 5 needs the training set's size"), std::string::npos)
        << x.dump(2);
}

// The repository's table (bench/train_classifier and the transcribed H100 rows) sizes both presets on the
// CPU and the H100: the rate is the median of the rows it names, all of the preset's shape, world size 1
// and micro-batch.
TEST(Estimate, RepositoryTableSizesTheClassifierPresets) {
    ThroughputTable table;
    table.path = (fs::path(LLMT_SOURCE_DIR) / "configs/throughput.jsonl").string();
    table.rows = load_throughput(table.path);
    auto check = [&](const std::string& preset, const std::string& arch, int gpus, int batch) {
        config::Config cfg = classifier_config(preset, {"trainer.micro_batch_size=" + std::to_string(batch)});
        JobSpec spec;
        spec.gpus_per_node = gpus;
        nlohmann::json e = estimate_job(spec, cfg, Rates{}, table);
        ASSERT_EQ(e["source"], "measured") << preset << e.dump(2);
        EXPECT_EQ(e["basis"]["rate"].get<std::string>().rfind("measured for this shape", 0), 0u) << e.dump(2);
        std::vector<double> rates;
        for (const auto& r : e["rows_used"]) {
            EXPECT_EQ(r["arch"], arch);
            EXPECT_EQ(r["device"], gpus > 0 ? "cuda" : "cpu");
            EXPECT_EQ(r["world_size"], 1);
            EXPECT_EQ(r["micro_batch_size"], batch);
            rates.push_back(r["images_per_s"]);
        }
        ASSERT_FALSE(rates.empty());
        std::sort(rates.begin(), rates.end());
        const size_t n = rates.size();
        const double median = n % 2 ? rates[n / 2] : 0.5 * (rates[n / 2 - 1] + rates[n / 2]);
        EXPECT_DOUBLE_EQ(e["images_per_s"].get<double>(), median) << e.dump(2);
    };
    check("fashion_mnist_cnn", "cnn", 0, 128);
    check("fashion_mnist_mlp", "mlp", 0, 128);
    check("fashion_mnist_cnn", "cnn", 1, 512);
    check("fashion_mnist_mlp", "mlp", 1, 512);
}
