// TensorBoard event files and MLflow (file store and REST), checked by readers independent of
// the writer: read_tfevents.py (python3-protobuf with message definitions written from the public
// spec, its own CRC-32C), read_mlflow_filestore.py (written from MLflow's FileStore), and an MLflow
// server started here that checks every request against the REST API 2.0 (mlflow_test_server.h).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/fs.h"
#include "support/subprocess.h"
#include "support/tiny_run.h"
#include "tracking/mlflow_batches.h"
#include "tracking/mlflow_rest_store.h"
#include "tracking/mlflow_sink.h"
#include "tracking/tfrecord.h"
#include "tracking/tracker.h"
#include "tracking/mlflow_test_server.h"
#include "train/signals.h"

namespace {

namespace fs = std::filesystem;
using llmt::testing::MlflowTestServer;
using llmt::testing::TinyRun;
using nlohmann::json;

struct PyResult {
    int exit_code;
    std::string out;
};

// Runs one of the readers beside this file; stderr goes to the test log.
PyResult run_reader(const char* script, const fs::path& arg) {
    const std::string cmd = std::string("/usr/bin/python3 " LLMT_SOURCE_DIR "/tests/tracking/") + script + " '" +
                            arg.string() + "'";
    std::FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return {-1, ""};
    std::string out;
    char buf[65536];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    const int status = ::pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

json read_json(const char* script, const fs::path& arg) {
    auto r = run_reader(script, arg);
    EXPECT_EQ(r.exit_code, 0) << script << " " << arg << " (python3-protobuf, python3-yaml: scripts/setup.sh)";
    return json::parse(r.out.empty() ? "null" : r.out);
}

std::vector<fs::path> event_files(const fs::path& dir) {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

// (key, step) -> value of every numeric field of metrics.jsonl: what each tracker must hold.
std::map<std::pair<std::string, int64_t>, double> expected_points(const std::vector<json>& lines) {
    std::map<std::pair<std::string, int64_t>, double> out;
    for (const auto& l : lines)
        for (auto it = l.begin(); it != l.end(); ++it)
            if (it.key() != "step" && it.value().is_number()) out[{it.key(), l["step"].get<int64_t>()}] = it.value();
    return out;
}

// ---- TensorBoard ----

TEST(TensorBoard, EventFileDecodesWithAnIndependentReaderAndEqualsMetricsJsonl) {
    TinyRun t("tb");
    const fs::path tb = t.root() / "tb";
    auto summary = t.train({"tracking.tensorboard_dir=" + tb.string(), "trainer.max_steps=6",
                            "trainer.eval_every_steps=3", "trainer.log_every_steps=2"});
    const std::string run_id = summary["run_id"];
    const auto files = event_files(tb / run_id);
    ASSERT_EQ(files.size(), 1u) << "one event file per process start, in <tensorboard_dir>/<run id>/";
    json ev = read_json("read_tfevents.py", files[0]);
    EXPECT_EQ(ev["file_version"], "brain.Event:2");
    ASSERT_EQ(ev["texts"].size(), 1u);
    EXPECT_EQ(ev["texts"][0]["tag"], "config");
    EXPECT_EQ(ev["texts"][0]["plugin"], "text");
    EXPECT_EQ(ev["texts"][0]["dtype"], 7);  // DT_STRING
    EXPECT_NE(ev["texts"][0]["text"].get<std::string>().find("tensorboard_dir: "), std::string::npos);

    const auto want = expected_points(t.metrics(summary));
    std::map<std::pair<std::string, int64_t>, double> got;
    for (const auto& s : ev["scalars"]) got[{s["tag"], s["step"]}] = s["value"];
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [k, v] : want) {
        ASSERT_TRUE(got.count(k)) << k.first << " at step " << k.second;
        // simple_value is a float32 in summary.proto: the exact float rounding of the JSON double.
        EXPECT_EQ(got[k], static_cast<double>(static_cast<float>(v))) << k.first << " at step " << k.second;
    }
    for (const char* tag : {"loss", "val_loss", "lr", "grad_norm", "tokens_per_sec"})
        EXPECT_TRUE(std::any_of(got.begin(), got.end(), [&](const auto& kv) { return kv.first.first == tag; })) << tag;
}

TEST(TensorBoard, ACorruptedRecordIsDetected) {
    TinyRun t("tbcrc");
    const fs::path tb = t.root() / "tb";
    auto summary = t.train({"tracking.tensorboard_dir=" + tb.string()});
    const fs::path file = event_files(tb / summary["run_id"].get<std::string>()).at(0);
    std::string bytes = llmt::read_file(file);
    ASSERT_GT(bytes.size(), 200u);
    EXPECT_NO_THROW(llmt::tracking::tfrecord_read_all(bytes, file.string()));
    bytes[bytes.size() / 2] ^= 0x10;  // one bit inside a record's data
    llmt::write_file_atomic(file, bytes);
    auto r = run_reader("read_tfevents.py", file);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_THROW(llmt::tracking::tfrecord_read_all(bytes, file.string()), llmt::FormatError);
}

TEST(TensorBoard, MaskedCrcMatchesTheTfRecordReference) {
    // The masked CRC-32C of the 8 zero bytes of an empty record's length, as TensorFlow's record writer
    // computes it: crc32c(8 x 0x00) = 0x8c28b28a, masked = rotr15 + 0xa282ead8.
    const uint32_t crc = 0x8c28b28au;
    EXPECT_EQ(llmt::tracking::masked_crc32c(std::string(8, '\0')), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST(TensorBoard, ARestartedRunAppendsANewFileInTheSameDirectory) {
    TinyRun t("tbresume");
    const fs::path tb = t.root() / "tb";
    auto cfg = t.config({"tracking.tensorboard_dir=" + tb.string(), "trainer.max_steps=4", "output.run_id=r1"});
    llmt::train::TrainOptions o;
    o.cfg = cfg;
    o.progress = false;
    o.stop_at_step = 2;
    llmt::train::run_training(o);
    o.stop_at_step = 0;
    o.resume = "r1";
    llmt::train::run_training(o);
    const auto files = event_files(tb / "r1");
    ASSERT_EQ(files.size(), 2u);
    std::set<int64_t> steps;
    for (const auto& f : files) {
        const json ev = read_json("read_tfevents.py", f);  // held: a range-for over a temporary's member dangles
        for (const auto& s : ev["scalars"]) steps.insert(s["step"].get<int64_t>());
    }
    EXPECT_EQ(steps, (std::set<int64_t>{1, 2, 3, 4}));
}

// ---- MLflow file store ----

json only_run(const json& store, const std::string& experiment) {
    for (const auto& e : store["experiments"])
        if (e["name"] == experiment) {
            EXPECT_EQ(e["runs"].size(), 1u);
            return e["runs"].empty() ? json() : e["runs"][0];
        }
    ADD_FAILURE() << "no experiment " << experiment << " in " << store.dump();
    return json();
}

void expect_metrics_equal(const json& run, const std::vector<json>& lines) {
    const auto want = expected_points(lines);
    std::map<std::pair<std::string, int64_t>, double> got;
    size_t points = 0;
    for (auto it = run["metrics"].begin(); it != run["metrics"].end(); ++it)
        for (const auto& p : it.value()) {
            got[{it.key(), p[2].get<int64_t>()}] = p[1].get<double>();
            ++points;
        }
    EXPECT_EQ(points, want.size()) << "each point once";
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [k, v] : want)
        EXPECT_EQ(got[k], v) << k.first << " at step " << k.second;  // shortest round-trip text
}

TEST(MlflowFileStore, ARunReadsBackThroughAFileStoreReader) {
    TinyRun t("mlfs");
    const fs::path store = t.root() / "mlruns";
    auto summary = t.train({"tracking.mlflow.uri=file://" + store.string(), "tracking.mlflow.experiment=tiny-exp",
                            "trainer.max_steps=6", "trainer.eval_every_steps=3"});
    json s = read_json("read_mlflow_filestore.py", store);
    EXPECT_TRUE(s["default_experiment_ok"]) << "a new store has the Default experiment 0, as FileStore makes it";
    EXPECT_TRUE(s["trash_exists"]);
    json run = only_run(s, "tiny-exp");
    ASSERT_TRUE(run.is_object());
    EXPECT_EQ(run["status"], "FINISHED");
    EXPECT_EQ(run["run_name"], summary["run_id"]);
    EXPECT_EQ(run["tags"]["mlflow.runName"], summary["run_id"]);
    EXPECT_TRUE(run["end_time"].is_number_integer());
    EXPECT_GE(run["end_time"].get<int64_t>(), run["start_time"].get<int64_t>());
    EXPECT_EQ(run["params"]["trainer.lr"], "0.01");
    EXPECT_EQ(run["params"]["model.n_layer"], "2");
    EXPECT_EQ(run["params"]["tracking.mlflow.experiment"], "tiny-exp");
    expect_metrics_equal(run, t.metrics(summary));
    // The run directory records the MLflow run (resume continues it).
    auto rec = json::parse(llmt::read_file(t.run_dir(summary) / llmt::tracking::kMlflowRunFile));
    EXPECT_EQ(rec["run_id"], run["run_id"]);
}

TEST(MlflowFileStore, AResumedRunContinuesTheSameMlflowRun) {
    TinyRun t("mlresume");
    const fs::path store = t.root() / "mlruns";
    auto cfg = t.config({"tracking.mlflow.uri=" + store.string(), "trainer.max_steps=4", "output.run_id=r1"});
    llmt::train::TrainOptions o;
    o.cfg = cfg;
    o.progress = false;
    o.stop_at_step = 2;
    llmt::train::run_training(o);
    json first = only_run(read_json("read_mlflow_filestore.py", store), "Default");
    EXPECT_EQ(first["status"], "FINISHED");  // --stop-at-step ends the process cleanly
    o.stop_at_step = 0;
    o.resume = "r1";
    auto summary = llmt::train::run_training(o).summary;
    json run = only_run(read_json("read_mlflow_filestore.py", store), "Default");
    EXPECT_EQ(run["run_id"], first["run_id"]);
    EXPECT_EQ(run["status"], "FINISHED");
    expect_metrics_equal(run, t.metrics(summary));
}

TEST(MlflowConfig, MlflowDirIsAnErrorPointingToTheUri) {
    TinyRun t("mldir");
    try {
        t.config({"tracking.mlflow_dir=mlruns"});
        FAIL() << "tracking.mlflow_dir was accepted";
    } catch (const llmt::config::ConfigValidationError& e) {
        EXPECT_NE(std::string(e.what()).find("tracking.mlflow.uri"), std::string::npos) << e.what();
    }
    EXPECT_THROW(t.config({"tracking.mlflow.uri=s3://bucket/mlruns"}), llmt::config::ConfigValidationError);
    EXPECT_NO_THROW(t.config({"tracking.mlflow.uri=https://mlflow.example"}));
}

// An empty tracking.mlflow.uri falls back to MLFLOW_TRACKING_URI, as the mlflow client does; a scheme
// this version does not speak there is refused when the run starts, naming the variable.
TEST(MlflowConfig, AnEmptyUriFallsBackToMlflowTrackingUri) {
    TinyRun t("mlenv");
    const fs::path store = t.root() / "env_mlruns";
    ::setenv("MLFLOW_TRACKING_URI", ("file:" + store.string()).c_str(), 1);
    auto summary = t.train({"tracking.mlflow.experiment=from-env"});
    ::setenv("MLFLOW_TRACKING_URI", "databricks://profile", 1);
    try {
        t.train(std::vector<std::string>{});
        ADD_FAILURE() << "MLFLOW_TRACKING_URI=databricks://profile was accepted";
    } catch (const llmt::ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find("MLFLOW_TRACKING_URI"), std::string::npos) << e.what();
    }
    ::unsetenv("MLFLOW_TRACKING_URI");
    json run = only_run(read_json("read_mlflow_filestore.py", store), "from-env");
    ASSERT_TRUE(run.is_object());
    expect_metrics_equal(run, t.metrics(summary));
}

// ---- MLflow REST ----

TEST(MlflowRest, ARunIsLoggedThroughTheDocumentedApi) {
    MlflowTestServer srv("tok-123");
    ::setenv("MLFLOW_TRACKING_TOKEN", "tok-123", 1);
    TinyRun t("mlrest");
    auto summary = t.train({"tracking.mlflow.uri=" + srv.url(), "tracking.mlflow.experiment=rest-exp",
                            "tracking.mlflow.run_name=first", "trainer.max_steps=6", "trainer.eval_every_steps=3"});
    ::unsetenv("MLFLOW_TRACKING_TOKEN");
    EXPECT_EQ(srv.violations(), std::vector<std::string>{});
    ASSERT_EQ(srv.experiments().count("rest-exp"), 1u);
    auto runs = srv.runs();
    ASSERT_EQ(runs.size(), 1u);
    const auto& run = runs[0];
    EXPECT_EQ(run.run_name, "first");
    EXPECT_EQ(run.status, "FINISHED");
    EXPECT_GT(run.end_time, 0);
    EXPECT_EQ(run.params.at("trainer.max_steps"), "6");
    EXPECT_EQ(run.tags.at("llmtrain.run_id"), summary["run_id"]);
    const auto want = expected_points(t.metrics(summary));
    std::map<std::pair<std::string, int64_t>, double> got;
    for (const auto& p : run.metrics) got[{p.key, p.step}] = p.value;
    EXPECT_EQ(run.metrics.size(), want.size());
    EXPECT_EQ(got, want);
}

TEST(MlflowRest, BatchesStayWithinTheLogBatchLimits) {
    std::vector<llmt::tracking::Metric> m(2500, {"loss", 1.0, 1, 5});
    std::vector<llmt::tracking::KeyValue> p(250, {"k", "v"}), tg(130, {"t", "v"});
    const auto batches = llmt::tracking::split_into_batches(m, p, tg);
    size_t nm = 0, np = 0, nt = 0;
    for (const auto& b : batches) {
        EXPECT_LE(b.metrics.size(), 1000u);
        EXPECT_LE(b.params.size(), 100u);
        EXPECT_LE(b.tags.size(), 100u);
        EXPECT_LE(b.metrics.size() + b.params.size() + b.tags.size(), 1000u);
        nm += b.metrics.size(), np += b.params.size(), nt += b.tags.size();
    }
    EXPECT_EQ(nm, 2500u);
    EXPECT_EQ(np, 250u);
    EXPECT_EQ(nt, 130u);

    // Through the server: 2500 points and 250 params arrive whole, every request within the limits.
    MlflowTestServer srv;
    llmt::tracking::MlflowRunSpec spec;
    spec.experiment = "limits";
    spec.run_name = "r";
    for (int i = 0; i < 250; ++i) spec.params.push_back({"p" + std::to_string(i), std::to_string(i)});
    {
        llmt::tracking::MlflowSink sink(
            std::make_unique<llmt::tracking::MlflowRestStore>(srv.url(), llmt::tracking::RestAuth{}), spec);
        std::vector<llmt::tracking::Metric> pts;
        for (int i = 0; i < 2500; ++i) pts.push_back({"m", static_cast<double>(i), i, 1000 + i});
        sink.log(pts);
        EXPECT_EQ(sink.finish(llmt::tracking::RunStatus::kFinished, 60), 0u);
    }
    EXPECT_EQ(srv.violations(), std::vector<std::string>{});
    ASSERT_EQ(srv.runs().size(), 1u);
    EXPECT_EQ(srv.runs()[0].metrics.size(), 2500u);
    EXPECT_EQ(srv.runs()[0].params.size(), 250u);
    for (const auto& b : srv.batches()) EXPECT_LE(b.metrics + b.params + b.tags, 1000u);
}

// The server goes down for 30 s in the middle of a run (its listening socket closed after the first
// batch) while training goes on, comes back, and the run then stops on SIGTERM: every point of
// metrics.jsonl is in the server once, including the ones logged during the outage.
TEST(MlflowRest, AServerDownFor30SecondsMidRunLosesNothing) {
    llmt::train::install_stop_handlers();  // before any thread: SIGTERM goes to the trainer's watcher
    MlflowTestServer srv;
    TinyRun t("mldown");
    auto cfg = t.config({"tracking.mlflow.uri=" + srv.url(), "trainer.max_steps=100000000",
                         "trainer.log_every_steps=10", "output.run_id=down"});
    const fs::path jsonl = t.root() / "runs/down/metrics.jsonl";
    auto lines = [&] { return fs::exists(jsonl) ? llmt::read_file(jsonl).size() : 0u; };  // bytes: grows per line
    size_t before = 0, after = 0;
    std::thread outage([&] {
        while (srv.batches().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        srv.down();
        before = lines();
        std::this_thread::sleep_for(std::chrono::seconds(30));
        after = lines();
        srv.up();
        std::this_thread::sleep_for(std::chrono::seconds(2));  // training goes on with the server back
        ::kill(::getpid(), SIGTERM);
    });
    auto result = llmt::train::run_training([&] {
        llmt::train::TrainOptions o;
        o.cfg = cfg;
        o.progress = false;
        return o;
    }());
    outage.join();
    llmt::train::reset_stop_signal();
    EXPECT_EQ(result.exit_code, 128 + SIGTERM);
    EXPECT_GT(after, before + 1000) << "training stalled while the server was down";
    EXPECT_EQ(srv.violations(), std::vector<std::string>{});
    const auto runs = srv.runs();  // held: a range-for over a temporary's member dangles
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, "KILLED");
    const auto want = expected_points(t.metrics(result.summary));
    std::map<std::pair<std::string, int64_t>, double> got;
    for (const auto& p : runs[0].metrics) got[{p.key, p.step}] = p.value;
    EXPECT_EQ(runs[0].metrics.size(), want.size()) << "each point once";
    EXPECT_EQ(got.size(), want.size()) << "points lost in the outage";
    EXPECT_EQ(got, want);
}

TEST(MlflowRest, LogNeverWaitsForADownServer) {
    MlflowTestServer srv;
    srv.down();
    llmt::tracking::MlflowRunSpec spec;
    spec.run_name = "r";
    spec.backoff_first_s = 0.2;
    spec.backoff_max_s = 1;
    std::vector<std::string> warnings;
    std::mutex wmu;
    spec.warn = [&](const std::string& m) {
        std::lock_guard<std::mutex> lk(wmu);
        warnings.push_back(m);
    };
    llmt::tracking::MlflowSink sink(
        std::make_unique<llmt::tracking::MlflowRestStore>(srv.url(), llmt::tracking::RestAuth{}), spec);
    double worst = 0;
    for (int i = 1; i <= 200; ++i) {
        const auto a = std::chrono::steady_clock::now();
        sink.log({{"loss", 1.0 / i, i, 1000 + i}});
        worst = std::max(worst, std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // A queue append under a mutex: microseconds; 50 ms would mean log() waited on the network.
    EXPECT_LT(worst, 0.05);
    srv.up();
    EXPECT_EQ(sink.finish(llmt::tracking::RunStatus::kFinished, 30), 0u);
    ASSERT_EQ(srv.runs().size(), 1u);
    EXPECT_EQ(srv.runs()[0].metrics.size(), 200u);
    std::lock_guard<std::mutex> lk(wmu);
    ASSERT_FALSE(warnings.empty());
    EXPECT_NE(warnings[0].find("training continues"), std::string::npos) << warnings[0];
}

TEST(MlflowRest, AResumedRunContinuesTheSameServerRun) {
    MlflowTestServer srv;
    TinyRun t("mlrestresume");
    llmt::train::TrainOptions o;
    o.cfg = t.config({"tracking.mlflow.uri=" + srv.url(), "trainer.max_steps=4", "output.run_id=r1"});
    o.progress = false;
    o.stop_at_step = 2;
    llmt::train::run_training(o);
    o.stop_at_step = 0;
    o.resume = "r1";
    auto summary = llmt::train::run_training(o).summary;
    EXPECT_EQ(srv.violations(), std::vector<std::string>{});
    const auto runs = srv.runs();
    ASSERT_EQ(runs.size(), 1u) << "the resumed process started a second MLflow run";
    EXPECT_EQ(runs[0].status, "FINISHED");
    std::map<std::pair<std::string, int64_t>, double> got;
    for (const auto& p : runs[0].metrics) got[{p.key, p.step}] = p.value;
    EXPECT_EQ(got, expected_points(t.metrics(summary)));
}

// SIGTERM mid-run (what Kubernetes and launchers send): the trainer checkpoints and exits 143, and the
// tracker delivers every queued point and marks the run KILLED before the process ends.
TEST(MlflowRest, SigtermFlushesEverythingAndMarksTheRunKilled) {
    MlflowTestServer srv;
    TinyRun t("mlterm");
    const fs::path yaml = t.root() / "tiny.yaml";
    std::ofstream(yaml) << t.base_yaml() << "tracking: {mlflow: {uri: \"" << srv.url() << "\"}}\n";
    const std::vector<std::string> argv = {llmt::testing::llmtrain_bin(), "train", "--config", yaml.string(), "--set",
                                           "trainer.max_steps=1000000", "--set", "output.run_id=term"};
    const pid_t pid = ::fork();
    if (pid == 0) {
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        ::execv(args[0], args.data());
        _exit(127);
    }
    const fs::path jsonl = t.root() / "runs/term/metrics.jsonl";
    auto lines = [&] { return fs::exists(jsonl) ? llmt::testing::read_metrics(jsonl).size() : 0u; };
    for (int i = 0; i < 6000 && lines() < 20; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_GE(lines(), 20u) << "the run did not log";
    ::kill(pid, SIGTERM);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 143);
    EXPECT_EQ(srv.violations(), std::vector<std::string>{});
    ASSERT_EQ(srv.runs().size(), 1u);
    EXPECT_EQ(srv.runs()[0].status, "KILLED");
    const auto want = expected_points(llmt::testing::read_metrics(jsonl));
    std::map<std::pair<std::string, int64_t>, double> got;
    const auto runs = srv.runs();  // held: a range-for over a temporary's member dangles
    for (const auto& p : runs[0].metrics) got[{p.key, p.step}] = p.value;
    EXPECT_EQ(got, want);
}

// ---- rank 0 only ----

// Two processes under `llmtrain launch`: one MLflow run and one TensorBoard file, both written by rank 0.
TEST(Rank0, ATwoProcessRunLogsOneMlflowRunAndOneTensorBoardFile) {
    TinyRun t("rank0");
    const fs::path store = t.root() / "mlruns", tb = t.root() / "tb", yaml = t.root() / "tiny.yaml";
    {
        std::ofstream(yaml) << t.base_yaml() << "dist: {timeout_sec: 60}\n"
                            << "tracking: {tensorboard_dir: " << tb.string() << ", mlflow: {uri: " << store.string()
                            << ", experiment: two-ranks}}\n";
    }
    auto r = llmt::testing::run_process({llmt::testing::llmtrain_bin(), "launch", "--standalone", "--nproc-per-node",
                                         "2", "--", "train", "--config", yaml.string(), "--set", "output.run_id=r2"},
                                        "", 300);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(event_files(tb / "r2").size(), 1u);
    size_t tb_files = 0;
    for (const auto& e : fs::recursive_directory_iterator(tb))
        tb_files += e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
    EXPECT_EQ(tb_files, 1u);
    json s = read_json("read_mlflow_filestore.py", store);
    size_t runs = 0;
    for (const auto& e : s["experiments"]) runs += e["runs"].size();
    EXPECT_EQ(runs, 1u) << s.dump();
    json run = only_run(s, "two-ranks");
    ASSERT_TRUE(run.is_object());
    EXPECT_EQ(run["status"], "FINISHED");
    expect_metrics_equal(run, llmt::testing::read_metrics(t.root() / "runs/r2/metrics.jsonl"));
}

}  // namespace
