// `llmtrain k8s submit|status|logs|cancel|fetch` against tests/k8s/kubectl_double.sh, a TEST DOUBLE
// that records argv and prints canned answers. No cluster is reachable here: these tests check the
// kubectl commands llmtrain builds and that kubectl's own errors surface with its message and exit
// code. They say nothing about a live API server.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/subprocess.h"

namespace fs = std::filesystem;
using llmt::testing::llmtrain_bin;
using llmt::testing::run_process;
using Json = nlohmann::json;

namespace {

const fs::path kSrc = LLMT_SOURCE_DIR;

class K8sKubectl : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("llmt_kdouble_" + std::to_string(getpid()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    llmt::testing::ProcResult k8s(std::vector<std::string> args) {
        args.insert(args.begin(), {llmtrain_bin(), "k8s"});
        return run_process(
            args, "", 60,
            {"KUBECTL=" + (kSrc / "tests/k8s/kubectl_double.sh").string(), "KDOUBLE_DIR=" + dir_.string()});
    }
    std::vector<std::string> calls() {
        std::ifstream in(dir_ / "argv.log");
        std::vector<std::string> out;
        for (std::string l; std::getline(in, l);) {
            while (!l.empty() && l.back() == ' ') l.pop_back();
            out.push_back(l);
        }
        return out;
    }
    void put(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
    std::string get(const std::string& name) {
        std::ifstream in(dir_ / name);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }

    fs::path dir_;
};

Json pod(const std::string& name, int index, const std::string& phase, const std::string& created, int restarts = 0) {
    return {{"metadata",
             {{"name", name},
              {"creationTimestamp", created},
              {"annotations", {{"batch.kubernetes.io/job-completion-index", std::to_string(index)}}}}},
            {"spec", {{"nodeName", "node-" + std::to_string(index)}}},
            {"status", {{"phase", phase}, {"containerStatuses", {{{"restartCount", restarts}}}}}}};
}

const std::string kCfg = (kSrc / "deploy/examples/config.yaml").string();

TEST_F(K8sKubectl, SubmitAppliesExactlyWhatRenderPrints) {
    auto r = k8s({"submit", "--config", kCfg, "--nodes", "2", "--name", "tiny", "--namespace", "ml", "--output-pvc",
                  "outputs"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(calls(), std::vector<std::string>{"--namespace ml apply -f -"});
    auto rendered = run_process({llmtrain_bin(), "k8s", "render", "--config", kCfg, "--nodes", "2", "--name", "tiny",
                                 "--namespace", "ml", "--output-pvc", "outputs"});
    // render adds a two-line comment header; the objects are the same bytes.
    std::string body = rendered.out.substr(rendered.out.find("\napiVersion") + 1);
    EXPECT_EQ(get("applied.0.yaml"), body);
    auto dry = k8s({"submit", "--config", kCfg, "--nodes", "1", "--name", "tiny", "--dry-run", "--context", "kind-x"});
    ASSERT_EQ(dry.exit_code, 0) << dry.err;
    EXPECT_EQ(calls().back(), "--context kind-x apply -f - --dry-run=server");
}

TEST_F(K8sKubectl, KubectlErrorsKeepTheirMessageAndExitCode) {
    put("fail", "1\nerror: the server doesn't have a resource type \"jobsets\"\n");
    auto r = k8s({"status", "tiny", "--kind", "jobset"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("the server doesn't have a resource type \"jobsets\""), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("get jobset.jobset.x-k8s.io tiny -o json"), std::string::npos)
        << "names the command: " << r.err;
    put("fail",
        "7\nThe connection to the server localhost:8080 was refused - did you specify the right host or port?\n");
    r = k8s({"cancel", "tiny"});
    EXPECT_EQ(r.exit_code, 7) << "kubectl's exit code, not ours";
    EXPECT_NE(r.err.find("connection to the server localhost:8080 was refused"), std::string::npos) << r.err;
    r = k8s({"submit", "--config", kCfg, "--nodes", "1", "--name", "tiny"});
    EXPECT_EQ(r.exit_code, 7);
}

TEST_F(K8sKubectl, MissingKubectlIsReported) {
    auto r = run_process({llmtrain_bin(), "k8s", "cancel", "tiny"}, "", 60, {"KUBECTL=/nonexistent/kubectl"});
    EXPECT_EQ(r.exit_code, 127);
    EXPECT_NE(r.err.find("cannot run /nonexistent/kubectl"), std::string::npos) << r.err;
}

TEST_F(K8sKubectl, StatusShowsRanksConditionAndMetrics) {
    put("workload.json", Json{{"status", {{"conditions", {{{"type", "Suspended"}, {"status", "False"}}}}}}}.dump());
    put("pods.json", Json{{"items", {pod("tiny-1-b", 1, "Running", "2026-11-26T06:00:01Z", 2),
                                     pod("tiny-0-a", 0, "Running", "2026-11-26T06:00:00Z")}}}.dump());
    auto r = k8s({"status", "tiny", "-n", "ml"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("indexed-job tiny: Running"), std::string::npos) << r.out;
    EXPECT_LT(r.out.find("tiny-0-a"), r.out.find("tiny-1-b")) << "sorted by rank: " << r.out;
    EXPECT_NE(r.out.find("metrics (rank 0): {\"step\":120,\"loss\":3.25}"), std::string::npos) << r.out;
    auto c = calls();
    ASSERT_EQ(c.size(), 3u);
    EXPECT_EQ(c[0], "--namespace ml get job.batch tiny -o json");
    EXPECT_EQ(c[1], "--namespace ml get pods -l app.kubernetes.io/instance=tiny -o json");
    EXPECT_EQ(c[2], "--namespace ml exec tiny-0-a -c trainer -- tail -n 1 /out/tiny/metrics.jsonl");
    auto j = k8s({"status", "tiny", "--json"});
    ASSERT_EQ(j.exit_code, 0) << j.err;
    Json doc = Json::parse(j.out);
    EXPECT_EQ(doc["pods"][1]["restarts"], 2);
    EXPECT_EQ(doc["pods"][1]["node"], "node-1");
}

TEST_F(K8sKubectl, LogsMergeRanksByTimeWithPrefixes) {
    put("pods.json",
        Json{{"items", {pod("tiny-0-a", 0, "Running", "t0"), pod("tiny-1-b", 1, "Running", "t0")}}}.dump());
    put("logs.tiny-0-a", "2026-11-26T06:00:01.000000000Z step 1\n2026-11-26T06:00:03.000000000Z step 2\n");
    put("logs.tiny-1-b", "2026-11-26T06:00:02.000000000Z joined\n");
    auto r = k8s({"logs", "tiny"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "[rank 0] step 1\n[rank 1] joined\n[rank 0] step 2\n");
    r = k8s({"logs", "tiny", "--rank", "1"});
    EXPECT_EQ(r.out, "[rank 1] joined\n");
    r = k8s({"logs", "tiny", "--follow"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("[rank 0] step 1\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("[rank 1] joined\n"), std::string::npos) << r.out;
    EXPECT_NE(get("argv.log").find("logs --follow tiny-1-b -c trainer"), std::string::npos);
    r = k8s({"logs", "tiny", "--rank", "5"});
    EXPECT_EQ(r.exit_code, 2) << "no such rank is bad input";
}

TEST_F(K8sKubectl, CancelDeletesWhatSubmitCreated) {
    ASSERT_EQ(k8s({"cancel", "tiny"}).exit_code, 0);
    ASSERT_EQ(k8s({"cancel", "tiny", "--kind", "trainjob"}).exit_code, 0);
    auto c = calls();
    EXPECT_EQ(c[0], "delete --ignore-not-found --wait=false job.batch/tiny service/tiny configmap/tiny-config");
    EXPECT_EQ(c[1], "delete --ignore-not-found --wait=false trainjob.trainer.kubeflow.org/tiny configmap/tiny-config");
}

TEST_F(K8sKubectl, FetchFromARunningPodOrThroughAHelperPod) {
    put("pods.json", Json{{"items", {pod("tiny-0-a", 0, "Running", "t0")}}}.dump());
    fs::path dest = dir_ / "local";
    auto r = k8s({"fetch", "tiny", "-n", "ml", "--dest", dest.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(calls().back(), "--namespace ml cp -c trainer ml/tiny-0-a:/out/tiny " + (dest / "tiny").string());
    EXPECT_TRUE(fs::exists(dest / "tiny/summary.json"));

    fs::remove(dir_ / "argv.log");
    put("pods.json", Json{{"items", {pod("tiny-0-a", 0, "Succeeded", "t0")}}}.dump());
    put("pod.json", Json{{"spec",
                          {{"containers", {{{"name", "trainer"}, {"image", "llmtrain:0.1.0"}}}},
                           {"volumes", {{{"name", "out"}, {"persistentVolumeClaim", {{"claimName", "outputs"}}}}}}}}}
                        .dump());
    r = k8s({"fetch", "tiny", "--dest", dest.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto c = calls();
    ASSERT_EQ(c.size(), 6u) << get("argv.log");
    EXPECT_EQ(c[1], "get pod tiny-0-a -o json");
    EXPECT_EQ(c[2], "apply -f -");
    EXPECT_EQ(c[3], "wait --for=condition=Ready pod/tiny-fetch --timeout=300s");
    EXPECT_EQ(c[4], "cp -c fetch tiny-fetch:/out/tiny " + (dest / "tiny").string());
    EXPECT_EQ(c[5], "delete pod tiny-fetch --ignore-not-found --wait=false");
    std::string helper = get("applied.0.yaml");
    EXPECT_NE(helper.find("claimName: outputs"), std::string::npos) << helper;
    EXPECT_NE(helper.find("image: llmtrain:0.1.0"), std::string::npos) << helper;
}

TEST_F(K8sKubectl, FetchRefusesAnEmptyDirRun) {
    put("pods.json", Json{{"items", {pod("tiny-0-a", 0, "Failed", "t0")}}}.dump());
    put("pod.json",
        Json{{"spec", {{"containers", Json::array()}, {"volumes", {{{"name", "out"}, {"emptyDir", Json::object()}}}}}}}
            .dump());
    auto r = k8s({"fetch", "tiny", "--dest", (dir_ / "local").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("without --output-pvc"), std::string::npos) << r.err;
}

}  // namespace
