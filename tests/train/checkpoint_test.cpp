// Checkpoint directories: layout, load by step dir / checkpoints dir / run dir, keep_last + best,
// re-saving a step, and crash safety — a child process killed (_exit) at every stage of a save leaves
// the previous checkpoint and `latest` intact, and the next save removes its leftovers.
#include "train/checkpoint.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>

#include "core/error.h"
#include "core/fs.h"
#include "train/train_state.h"

namespace fs = std::filesystem;
using namespace llmt;
using namespace llmt::train;

namespace {

class CheckpointTest : public ::testing::Test {
protected:
    void SetUp() override {
        run_ =
            fs::temp_directory_path() / fmt::format("llmt_ckpt_{}_{}", ::getpid(),
                                                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(run_);
        root_ = run_ / "checkpoints";
    }
    void TearDown() override { fs::remove_all(run_); }

    // Model tensors whose values encode the step, so a load shows which save it came from.
    fs::path save(std::int64_t step, SaveOptions opts = {}, bool with_optimizer = true) {
        w_.assign(12, static_cast<float>(step));
        b_.assign(3, -static_cast<float>(step));
        m_.assign(12, 0.5f * static_cast<float>(step));
        std::vector<TensorRef> model = {{"transformer.h.0.attn.c_attn.weight", StDType::kF32, {3, 4}, w_.data()},
                                        {"transformer.h.0.attn.c_attn.bias", StDType::kF32, {3}, b_.data()}};
        std::vector<TensorRef> optim;
        if (with_optimizer) optim = {{"transformer.h.0.attn.c_attn.weight.exp_avg", StDType::kF32, {3, 4}, m_.data()}};
        return save_checkpoint(root_, step, model, optim, {{"tokens_seen", step * 1000}, {"rng", {1, 2, 3}}}, opts);
    }

    static float weight_value(const Checkpoint& ck) {
        float w[12];
        ck.model.read_f32("transformer.h.0.attn.c_attn.weight", w, {3, 4});
        return w[0];
    }

    std::vector<std::string> leftovers() const {
        std::vector<std::string> out;
        for (const auto& e : fs::directory_iterator(root_)) {
            std::string n = e.path().filename().string();
            if (n[0] == '.') out.push_back(n);
        }
        return out;
    }

    fs::path run_, root_;
    std::vector<float> w_, b_, m_;
};

}  // namespace

TEST_F(CheckpointTest, SaveWritesTheLayoutAndLoadFindsIt) {
    fs::path dir = save(5);
    EXPECT_EQ(dir, root_ / "step_5");
    for (const char* f : {"model.safetensors", "optimizer.safetensors", "state.json"}) {
        EXPECT_TRUE(fs::is_regular_file(dir / f)) << f;
    }
    EXPECT_EQ(read_file(root_ / "latest"), "step_5\n");
    EXPECT_TRUE(leftovers().empty());
    EXPECT_EQ(latest_step(root_), 5);
    EXPECT_EQ(best_step(root_), std::nullopt);

    for (const fs::path& p : {dir, root_, run_, fs::path(root_.string() + "/"), fs::path(dir.string() + "/")}) {
        Checkpoint ck = load_checkpoint(p);
        EXPECT_EQ(ck.step, 5) << p;
        EXPECT_EQ(ck.dir, dir) << p;
        EXPECT_EQ(weight_value(ck), 5.0f);
        EXPECT_EQ(ck.state["tokens_seen"], 5000);
        EXPECT_EQ(ck.state["step"], 5);
        ASSERT_TRUE(ck.optimizer.has_value());
        EXPECT_TRUE(ck.optimizer->contains("transformer.h.0.attn.c_attn.weight.exp_avg"));
        EXPECT_EQ(ck.model.files().at(0).metadata().at("format"),
                  "pt");  // what transformers expects of PyTorch weights
    }
    save(6, {}, /*with_optimizer=*/false);
    Checkpoint ck = load_checkpoint(run_);
    EXPECT_EQ(ck.step, 6);
    EXPECT_FALSE(ck.optimizer.has_value());
}

TEST_F(CheckpointTest, KeepLastPrunesButNeverBestOrLatest) {
    SaveOptions keep2;
    keep2.keep_last = 2;
    save(1, keep2);
    SaveOptions best = keep2;
    best.mark_best = true;
    save(2, best);
    for (int s = 3; s <= 6; ++s) save(s, keep2);
    EXPECT_EQ(list_checkpoint_steps(root_), (std::vector<std::int64_t>{2, 5, 6}));
    EXPECT_EQ(best_step(root_), 2);
    EXPECT_EQ(latest_step(root_), 6);
    set_best(root_, 5);
    prune_checkpoints(root_, 2);
    EXPECT_EQ(list_checkpoint_steps(root_), (std::vector<std::int64_t>{5, 6}));
    EXPECT_THROW(set_best(root_, 3), CheckpointError);
    // keep_last 0 keeps everything.
    for (int s = 7; s <= 9; ++s) save(s);
    EXPECT_EQ(list_checkpoint_steps(root_).size(), 5u);
    // latest pointing at an older step (a run resumed from there) protects it too.
    write_file_atomic(root_ / "latest", "step_5\n");
    prune_checkpoints(root_, 1);
    EXPECT_EQ(list_checkpoint_steps(root_), (std::vector<std::int64_t>{5, 9}));
    EXPECT_TRUE(leftovers().empty());
}

TEST_F(CheckpointTest, ResavingAStepReplacesItAtomically) {
    save(3);
    w_.clear();
    // Same step, new contents (a resumed run saving at the step it resumed from).
    std::vector<float> w(12, 42.0f), b(3, 0.0f);
    save_checkpoint(root_, 3,
                    {{"transformer.h.0.attn.c_attn.weight", StDType::kF32, {3, 4}, w.data()},
                     {"transformer.h.0.attn.c_attn.bias", StDType::kF32, {3}, b.data()}},
                    {}, nlohmann::json::object());
    Checkpoint ck = load_checkpoint(root_);
    EXPECT_EQ(weight_value(ck), 42.0f);
    EXPECT_FALSE(ck.optimizer.has_value());  // the old directory is gone, not merged
    EXPECT_TRUE(leftovers().empty());
}

TEST_F(CheckpointTest, ExceptionMidSaveLeavesPreviousCheckpoint) {
    save(1);
    for (const char* stage : {"after:model.safetensors", "after:optimizer.safetensors", "after:state.json",
                              "before_rename"}) {
        SaveOptions opts;
        opts.fault_hook = [&](std::string_view s) {
            if (s == stage) throw IoError(std::string("injected failure at ") + stage);
        };
        EXPECT_THROW(save(2, opts), IoError) << stage;
        EXPECT_EQ(latest_step(root_), 1) << stage;
        EXPECT_EQ(list_checkpoint_steps(root_), std::vector<std::int64_t>{1}) << stage;
        EXPECT_TRUE(leftovers().empty()) << stage << ": the temp dir is removed on unwind";
        EXPECT_EQ(weight_value(load_checkpoint(root_)), 1.0f);
    }
}

// A real crash: the child process dies with _exit at the stage, so no destructor runs.
TEST_F(CheckpointTest, CrashAtEveryStageLeavesALoadableCheckpoint) {
    struct Case {
        const char* stage;
        std::int64_t latest_after;  // what `latest` names after the crash
        bool step2_dir;             // whether step_2 exists after the crash
    };
    const Case cases[] = {
        {"after:model.safetensors", 1, false}, {"after:optimizer.safetensors", 1, false},
        {"after:state.json", 1, false},        {"before_rename", 1, false},
        {"before_latest", 1, true},            {"before_prune", 2, true},
    };
    for (const Case& c : cases) {
        fs::remove_all(root_);
        SaveOptions keep1;
        keep1.keep_last = 1;
        save(1, keep1);
        std::fflush(nullptr);
        pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            SaveOptions opts = keep1;
            opts.fault_hook = [&](std::string_view s) {
                if (s == c.stage) ::_exit(7);
            };
            try {
                save(2, opts);
            } catch (...) {
                ::_exit(3);
            }
            ::_exit(0);
        }
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status));
        ASSERT_EQ(WEXITSTATUS(status), 7) << c.stage << ": the hook was not reached";

        EXPECT_EQ(latest_step(root_), c.latest_after) << c.stage;
        EXPECT_EQ(fs::exists(root_ / "step_2"), c.step2_dir) << c.stage;
        EXPECT_TRUE(fs::exists(root_ / "step_1")) << c.stage << ": pruning must not run before latest moves";
        Checkpoint ck = load_checkpoint(root_);
        EXPECT_EQ(ck.step, c.latest_after) << c.stage;
        EXPECT_EQ(weight_value(ck), static_cast<float>(c.latest_after)) << c.stage;
        if (!c.step2_dir) {
            EXPECT_EQ(leftovers(), std::vector<std::string>{fmt::format(".tmp-step_2-{}", pid)}) << c.stage;
        }
        // The next save cleans up and moves on.
        save(3, keep1);
        EXPECT_TRUE(leftovers().empty()) << c.stage;
        EXPECT_EQ(list_checkpoint_steps(root_), std::vector<std::int64_t>{3}) << c.stage;
        EXPECT_EQ(load_checkpoint(root_).step, 3);
    }
}

TEST_F(CheckpointTest, LoadErrorsSayWhatWasLookedFor) {
    auto expect_msg = [](const fs::path& p, const std::string& needle) {
        try {
            load_checkpoint(p);
            ADD_FAILURE() << "no error for " << p;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    expect_msg(run_ / "nope", "does not exist");
    fs::create_directories(run_);
    expect_msg(run_, "looked for");
    save(4);
    fs::remove(root_ / "latest");
    expect_msg(run_, "hint: '" + root_.string() + "' has step directories but no 'latest' file");
    write_file_atomic(root_ / "latest", "step_9\n");
    expect_msg(root_, "names step_9 but");
    write_file_atomic(root_ / "latest", "../../etc\n");
    expect_msg(root_, "expected 'step_<N>'");
    write_file_atomic(root_ / "latest", "step_4\n");

    fs::path dir = root_ / "step_4";
    std::string model = read_file(dir / "model.safetensors");
    write_file_atomic(dir / "model.safetensors", model.substr(0, model.size() - 4));
    EXPECT_THROW(load_checkpoint(root_), FormatError);  // truncated: FormatError, not a crash
    write_file_atomic(dir / "model.safetensors", model);

    write_file_atomic(dir / "state.json", "{\"step\": 4,");
    EXPECT_THROW(load_checkpoint(dir), FormatError);
    write_file_atomic(dir / "state.json", "{\"step\": 3}");
    expect_msg(dir, "state.json says step 3 but the directory is step_4");
    fs::remove(dir / "state.json");
    expect_msg(dir, "incomplete: missing state.json");
    fs::remove(dir / "model.safetensors");
    expect_msg(dir, "looked for");  // nothing of a checkpoint is left there
}

TEST_F(CheckpointTest, CheckTensorsListsEveryDifference) {
    save(1);
    Checkpoint ck = load_checkpoint(root_);
    try {
        check_tensors(ck.model.files().at(0),
                      {{"transformer.h.0.attn.c_attn.weight", StDType::kF32, {4, 3}},
                       {"transformer.h.0.ln_1.weight", StDType::kF32, {4}}},
                      "model");
        FAIL();
    } catch (const CheckpointError& e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find("model tensors in"), std::string::npos) << msg;
        EXPECT_NE(msg.find("3 differences"), std::string::npos) << msg;
        EXPECT_NE(msg.find("has shape [3, 4], expected [4, 3]"), std::string::npos) << msg;
        EXPECT_NE(msg.find("missing tensor 'transformer.h.0.ln_1.weight'"), std::string::npos) << msg;
        EXPECT_NE(msg.find("unexpected tensor 'transformer.h.0.attn.c_attn.bias'"), std::string::npos) << msg;
    }
    EXPECT_NO_THROW(check_tensors(ck.model.files().at(0),
                                  {{"transformer.h.0.attn.c_attn.weight", StDType::kF32, {3, 4}},
                                   {"transformer.h.0.attn.c_attn.bias", StDType::kF32, {3}}},
                                  "model"));
}

TEST(CheckpointNames, StepDirNames) {
    EXPECT_EQ(step_dir_name(120), "step_120");
    EXPECT_EQ(parse_step_dir_name("step_0"), 0);
    EXPECT_EQ(parse_step_dir_name("step_120"), 120);
    for (const char* bad : {"step_", "step_01", "step_-1", "step_1x", "Step_1", "step_1 ", "latest",
                            "step_9999999999999999999"}) {
        EXPECT_EQ(parse_step_dir_name(bad), std::nullopt) << bad;
    }
}

// Integrity: state.json and every tensor carry a checksum; a flipped bit, an edited value or a NaN is
// refused at load naming the file and the tensor or field, while a reformatted state.json and a
// checkpoint without checksums (the older format) still load.
TEST_F(CheckpointTest, IntegrityIsCheckedAtLoad) {
    const fs::path dir = save(5);
    {
        Checkpoint ck = load_checkpoint(dir);
        EXPECT_TRUE(ck.checksummed);
        EXPECT_FALSE(ck.state.contains(kStateChecksumKey));
    }
    auto expect_format_error = [&](const std::string& needle) {
        try {
            load_checkpoint(dir);
            ADD_FAILURE() << "loaded despite: " << needle;
        } catch (const FormatError& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    // A bit flipped in a weight (a mantissa bit: the value stays finite).
    const std::string model = read_file(dir / kModelFile);
    const auto off = SafetensorsFile::open(dir / kModelFile).info("transformer.h.0.attn.c_attn.bias").offset;
    std::string flipped = model;
    flipped[off] ^= 0x01;
    write_file_atomic(dir / kModelFile, flipped);
    expect_format_error("tensor 'transformer.h.0.attn.c_attn.bias' fails its checksum");
    write_file_atomic(dir / kModelFile, model);

    // NaN in the optimizer state, with a valid checksum (written by our writer).
    std::vector<float> m(12, 0.25f);
    m[7] = std::nanf("");
    write_safetensors(dir / kOptimizerFile,
                      {{"transformer.h.0.attn.c_attn.weight.exp_avg", StDType::kF32, {3, 4}, m.data()}});
    expect_format_error(
        "'transformer.h.0.attn.c_attn.weight.exp_avg' (F32 [3, 4]) holds a non-finite value (nan) at flat index 7");
    m[7] = 0.f;
    write_safetensors(dir / kOptimizerFile,
                      {{"transformer.h.0.attn.c_attn.weight.exp_avg", StDType::kF32, {3, 4}, m.data()}});

    // state.json: an edited value fails the checksum; reformatting does not.
    const std::string state_text = read_file(dir / kStateFile);
    auto state = nlohmann::json::parse(state_text);
    write_file_atomic(dir / kStateFile, state.dump(4));
    EXPECT_EQ(load_checkpoint(dir).step, 5);
    state["tokens_seen"] = 1;
    write_file_atomic(dir / kStateFile, state.dump(2));
    expect_format_error("state.json' fails its checksum");

    // A checkpoint from before checksums: loads (tensors still checked for NaN), marked unverified.
    state.erase(kStateChecksumKey);
    write_file_atomic(dir / kStateFile, state.dump(2));
    Checkpoint old = load_checkpoint(dir);
    EXPECT_FALSE(old.checksummed);
    EXPECT_EQ(old.state["tokens_seen"], 1);

    // A wrong type of "step" names the field.
    state["step"] = "5";
    write_file_atomic(dir / kStateFile, state.dump(2));
    expect_format_error("field \"step\" must be an integer >= 0 in a JSON object, found \"5\"");
}

TEST(TrainState, EveryFieldIsTyped) {
    const nlohmann::json good = {{"step", 3},          {"tokens", 96},     {"loader", {{"kind", "x"}}},
                                 {"best_val_loss", nullptr}, {"world_size", 2}, {"zero_stage", 1},
                                 {"wall_s", 1.5},      {"config", {{"model", nlohmann::json::object()}}}};
    const TrainState s = parse_train_state(good, "ck/state.json");
    EXPECT_EQ(s.step, 3);
    EXPECT_EQ(s.tokens, 96);
    EXPECT_FALSE(s.best_val_loss.has_value());
    EXPECT_EQ(s.world_size, 2);
    EXPECT_EQ(s.zero_stage, 1);
    EXPECT_DOUBLE_EQ(s.wall_s, 1.5);
    // Optional fields may be absent (older checkpoints).
    nlohmann::json minimal = {{"step", 0}, {"loader", nlohmann::json::object()}, {"config", nlohmann::json::object()}};
    EXPECT_EQ(parse_train_state(minimal, "s").world_size, 1);

    auto expect_field_error = [&](const char* field, nlohmann::json value, const std::string& needle) {
        nlohmann::json bad = good;
        if (value.is_discarded()) bad.erase(field);
        else bad[field] = value;
        try {
            parse_train_state(bad, "ck/state.json");
            ADD_FAILURE() << field;
        } catch (const CheckpointError& e) {
            EXPECT_NE(std::string(e.what()).find("'ck/state.json': field \"" + std::string(field) + "\" " + needle),
                      std::string::npos)
                << e.what();
        }
    };
    const nlohmann::json missing = nlohmann::json::value_t::discarded;
    expect_field_error("tokens", "many", "must be an integer >= 0, found string");
    expect_field_error("tokens", -1, "must be an integer >= 0, found -1");
    expect_field_error("tokens", 1.5, "must be an integer >= 0, found 1.5");
    expect_field_error("step", missing, "is missing, expected an integer >= 0");
    expect_field_error("loader", missing, "is missing, expected an object");
    expect_field_error("loader", nlohmann::json::array(), "must be an object, found array");
    expect_field_error("config", "x", "must be an object, found string");
    expect_field_error("best_val_loss", "low", "must be a number or null, found string");
    expect_field_error("world_size", 0, "must be an integer >= 1, found 0");
    expect_field_error("zero_stage", 2, "must be 0, 1 or 3, found 2");
    expect_field_error("zero_stage", 4, "must be 0, 1 or 3, found 4");
    expect_field_error("wall_s", true, "must be a number >= 0, found true");
    expect_field_error("step", 18446744073709551615ull, "must be an integer >= 0, found 18446744073709551615");
}
