// Measured-throughput table and its interpolation (server/throughput.h), and the estimates built on it
// (server/estimate.h), on hand-written rows whose expected figures are worked out in the comments, and
// the `llmtrain estimate` command over the repository's table.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "config/loader.h"
#include "core/error.h"
#include "models/gpt2.h"
#include "server/estimate.h"
#include "server/throughput.h"
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
    auto rows = load_throughput(write_rows("threads", row("cpu", "c", 1, 2, 1e8, 1900) + row("cpu", "c", 1, 1, 1e8, 1000) +
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
    auto rows = load_throughput(write_rows("samerun", row("cuda", "H100", 1, 0, 1e9, 1000, "2026-11-26", "bench A") +
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
    table.rows = load_throughput(write_rows("job", row("cpu", "c", 1, 1, fpt, 1000) + row("cpu", "c", 2, 1, fpt, 1800)));
    table.path = "rows.jsonl";
    JobSpec spec;
    spec.nproc_per_node = 2;
    Rates rates{0.5, 3.0};

    const double tokens = 100.0 * cfg.trainer.micro_batch_size * cfg.trainer.grad_accum_steps * cfg.model.block_size * 2;
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
