// Findings 6 and 7 of docs/security.md's Tests list (integrity and unclear or hanging inputs), replayed
// through the real `llmtrain` binary, every run bounded by a timeout: a checkpoint with a bit flipped in a
// tensor, one with NaN weights and a state.json with a wrong type are refused by eval and train --resume
// (exit 2, naming the tensor or field); a 5x10^13-parameter model is refused by validate and train --dry-run
// with its memory figures; a FIFO as config, shard or --resume is refused at once; --resume "" is an error
// instead of a fresh run.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/crc32c.h"
#include "core/fs.h"
#include "core/safetensors.h"
#include "data/shards/shard_writer.h"
#include "support/subprocess.h"

namespace fs = std::filesystem;
using llmt::testing::llmtrain_bin;
using llmt::testing::ProcResult;
using llmt::testing::run_process;

namespace {

constexpr double kTimeoutS = 60;
constexpr int kVocab = 64;

fs::path g_root;     // shards, configs, the trained run
fs::path g_run;      // the run every test copies
std::string g_yaml;  // the tiny config's text

std::string tiny_yaml(const fs::path& root, const std::string& train_shards) {
    return R"(schema_version: 1
run: {name: tiny, seed: 7, device: cpu, threads: 1}
model: {arch: gpt2, n_layer: 2, n_head: 2, d_model: 16, block_size: 8, vocab_size: 64, vocab_pad_multiple: 64}
trainer: {max_steps: 3, micro_batch_size: 2, lr: 1.0e-2, warmup_steps: 1, log_every_steps: 1,
          eval_every_steps: 0, eval_steps: 2, save_every_steps: 3, keep_last: 1}
data: {source: shards, train_shards: ")" +
           train_shards + R"(", val_shards: ")" + (root / "shards/val_*.bin").string() + R"("}
output: {root_dir: ")" + (root / "runs").string() + R"("}
)";
}

ProcResult llmtrain(std::vector<std::string> args) {
    args.insert(args.begin(), llmtrain_bin());
    return run_process(args, "", kTimeoutS);
}

// A run that must end with exit 2 (never time out or crash) and say `needle` on stderr.
void expect_refused(const ProcResult& r, const std::string& needle, const std::string& what) {
    EXPECT_FALSE(r.timed_out) << what << ": still running after " << kTimeoutS << " s";
    EXPECT_FALSE(r.signaled) << what << ": killed by signal " << r.signal;
    EXPECT_EQ(r.exit_code, 2) << what << "\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << what << ": expected '" << needle << "' in:\n" << r.err;
}

class IntegrityTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        g_root = fs::temp_directory_path() / ("llmt_security_integrity_" + std::to_string(::getpid()));
        fs::remove_all(g_root);
        fs::create_directories(g_root / "shards");
        std::vector<std::uint32_t> train(4096), val(512);
        for (std::size_t i = 0; i < train.size(); ++i)
            train[i] = static_cast<std::uint32_t>((i * 7 + i / 13) % kVocab);
        for (std::size_t i = 0; i < val.size(); ++i) val[i] = static_cast<std::uint32_t>((i * 5 + i / 11) % kVocab);
        llmt::data::write_shard_file(g_root / "shards/train_000000.bin", train, kVocab);
        llmt::data::write_shard_file(g_root / "shards/val_000000.bin", val, kVocab);
        g_yaml = tiny_yaml(g_root, (g_root / "shards/train_*.bin").string());
        llmt::write_file_atomic(g_root / "tiny.yaml", g_yaml);
        const ProcResult r = llmtrain({"train", "--config", (g_root / "tiny.yaml").string()});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        for (const auto& e : fs::directory_iterator(g_root / "runs")) g_run = e.path();
        ASSERT_TRUE(fs::exists(g_run / "checkpoints/step_3/model.safetensors")) << g_run;
    }
    static void TearDownTestSuite() { fs::remove_all(g_root); }

    void SetUp() override {
        const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
        dir_ = g_root / ("t_" + name);
        fs::create_directories(dir_);
        run_ = g_root / "runs" / ("copy_" + name);
        fs::copy(g_run, run_, fs::copy_options::recursive);
        step_ = run_ / "checkpoints/step_3";
        config_ = (g_root / "tiny.yaml").string();
    }

    ProcResult eval() { return llmtrain({"eval", "--config", config_, "--checkpoint", step_.string()}); }
    ProcResult resume() { return llmtrain({"train", "--config", config_, "--resume", run_.string()}); }

    // Rewrites model.safetensors through our writer (valid checksums) after `edit` changed the tensors.
    template <typename Edit>
    void rewrite_model(Edit&& edit) {
        const fs::path p = step_ / "model.safetensors";
        std::vector<std::vector<std::uint8_t>> bytes;
        std::vector<llmt::TensorRef> refs;
        {
            const auto f = llmt::SafetensorsFile::open(p);
            for (const auto& name : f.names()) {
                const auto& info = f.info(name);
                bytes.emplace_back(f.raw(name), f.raw(name) + info.nbytes);
                refs.push_back({name, info.dtype, info.shape, nullptr});
            }
            for (std::size_t i = 0; i < refs.size(); ++i) edit(refs[i].name, bytes[i]);
            for (std::size_t i = 0; i < refs.size(); ++i) refs[i].data = bytes[i].data();
        }
        llmt::write_safetensors(p, refs, {{"format", "pt"}});
    }

    // Rewrites state.json with `edit` applied, and its checksum recomputed unless `keep_old_checksum`.
    template <typename Edit>
    void rewrite_state(Edit&& edit, bool keep_old_checksum = false) {
        const fs::path p = step_ / "state.json";
        auto s = nlohmann::json::parse(llmt::read_file(p));
        const auto old = s["checksum"];
        s.erase("checksum");
        edit(s);
        s["checksum"] = keep_old_checksum ? old : nlohmann::json(llmt::crc32c_text(llmt::crc32c(s.dump())));
        llmt::write_file_atomic(p, s.dump(2));
    }

    fs::path dir_, run_, step_;
    std::string config_;
};

}  // namespace

TEST_F(IntegrityTest, IntactCheckpointEvaluates) {
    const ProcResult r = eval();
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("val_loss"), std::string::npos) << r.out;
}

TEST_F(IntegrityTest, BitFlippedTensorIsRefused) {
    const fs::path p = step_ / "model.safetensors";
    std::string bytes = llmt::read_file(p);
    const auto off = llmt::SafetensorsFile::open(p).info("transformer.h.1.mlp.c_fc.weight").offset;
    bytes[off + 2] ^= 0x04;  // a mantissa bit: the weight stays finite, only the checksum can tell
    llmt::write_file_atomic(p, bytes);
    const std::string needle = "tensor 'transformer.h.1.mlp.c_fc.weight' fails its checksum";
    expect_refused(eval(), needle, "eval");
    expect_refused(resume(), needle, "train --resume");
}

TEST_F(IntegrityTest, NanWeightsAreRefused) {
    rewrite_model([](const std::string& name, std::vector<std::uint8_t>& b) {
        if (name != "transformer.h.0.attn.c_proj.weight") return;
        const float nan = std::nanf("");
        for (std::size_t i = 5 * sizeof(float); i < b.size(); i += sizeof(float)) std::memcpy(&b[i], &nan, sizeof nan);
    });
    const std::string needle =
        "tensor 'transformer.h.0.attn.c_proj.weight' (F32 [16, 16]) holds a non-finite value (nan) at flat index 5";
    expect_refused(eval(), needle, "eval");
    expect_refused(resume(), needle, "train --resume");
    // The same file as model.init_from (a file from elsewhere: checked for NaN/inf too).
    const std::string init = "model.init_from=" + (step_ / "model.safetensors").string();
    expect_refused(llmtrain({"eval", "--config", config_, "--set", init}), needle, "eval with model.init_from");
    expect_refused(llmtrain({"train", "--config", config_, "--set", init}), needle, "train with model.init_from");
}

TEST_F(IntegrityTest, StateJsonWithWrongTypeIsRefused) {
    rewrite_state([](nlohmann::json& s) { s["tokens"] = "many"; });
    expect_refused(resume(), "state.json': field \"tokens\" must be an integer >= 0, found string", "train --resume");
    rewrite_state([](nlohmann::json& s) {
        s["tokens"] = 96;
        s["step"] = "3";
    });
    expect_refused(eval(), "state.json': field \"step\" must be an integer >= 0", "eval");
    expect_refused(resume(), "state.json': field \"step\" must be an integer >= 0", "train --resume");
    // Edited without updating its checksum.
    rewrite_state([](nlohmann::json& s) { s["step"] = 3; }, /*keep_old_checksum=*/true);
    expect_refused(eval(), "state.json' fails its checksum", "eval");
}

TEST_F(IntegrityTest, HugeModelIsRefusedBeforeAllocation) {
    // 12 x 1024 x 65536^2 = 5.3e13 parameters: 200 TB of fp32 weights alone.
    const std::string cfg = (dir_ / "huge.yaml").string();
    llmt::write_file_atomic(cfg, g_yaml + "\n");
    const std::vector<std::string> sets = {"--set", "model.n_layer=1024", "--set", "model.d_model=65536",
                                           "--set", "model.n_head=64"};
    auto with = [&](std::vector<std::string> args) {
        args.insert(args.end(), sets.begin(), sets.end());
        return llmtrain(args);
    };
    expect_refused(with({"validate", "--config", cfg}), "model does not fit: training needs", "validate");
    const ProcResult v = with({"validate", "--config", cfg, "--max-memory", "64GiB"});
    expect_refused(v, "--max-memory is 64.00 GiB", "validate --max-memory");
    EXPECT_NE(v.err.find("GiB per process (parameters"), std::string::npos) << v.err;
    expect_refused(with({"train", "--dry-run", "--config", cfg}), "model does not fit", "train --dry-run");
    expect_refused(with({"train", "--config", cfg}), "model does not fit", "train");
    // The tiny model fits; a limit below it is refused.
    EXPECT_EQ(llmtrain({"validate", "--config", config_}).exit_code, 0);
    expect_refused(llmtrain({"validate", "--config", config_, "--max-memory", "1KiB"}), "model does not fit",
                   "validate --max-memory 1KiB");
}

TEST_F(IntegrityTest, FifoIsRefusedPromptly) {
    const fs::path fifo = dir_ / "fifo.yaml";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const auto t0 = std::chrono::steady_clock::now();
    expect_refused(llmtrain({"validate", "--config", fifo.string()}),
                   "is a FIFO (named pipe), expected a regular file", "FIFO as config");
    expect_refused(llmtrain({"train", "--config", fifo.string()}), "is a FIFO", "FIFO as train config");
    // A FIFO as the training shard.
    const fs::path shard = dir_ / "train_fifo.bin";
    ASSERT_EQ(::mkfifo(shard.c_str(), 0600), 0);
    const std::string cfg = (dir_ / "fifo_shard.yaml").string();
    llmt::write_file_atomic(cfg, tiny_yaml(g_root, shard.string()));
    expect_refused(llmtrain({"train", "--config", cfg}), "is a FIFO (named pipe), expected a regular file (shard)",
                   "FIFO as shard");
    // A FIFO as --resume.
    expect_refused(llmtrain({"train", "--config", config_, "--resume", fifo.string()}), "is a FIFO (named pipe)",
                   "FIFO as --resume");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
}

TEST_F(IntegrityTest, EmptyResumeIsAnError) {
    auto runs = [] { return std::distance(fs::directory_iterator(g_root / "runs"), fs::directory_iterator()); };
    const auto before = runs();
    const ProcResult r = llmtrain({"train", "--config", config_, "--resume", ""});
    expect_refused(r, "--resume needs a path, a run id or 'auto'", "--resume \"\"");
    EXPECT_EQ(runs(), before) << "a fresh run was started";
}
