// The kubernetes executor against tests/k8s/kubectl_double.sh — a TEST DOUBLE for kubectl that records
// each argv and serves canned status; it is not a cluster. Checks what the executor asks kubectl to do
// (render + apply, delete before a retry, graceful and forced stop, logs per rank) and how it reads the
// canned Job/pod status (complete, failed with the container's exit code, gone, API unreachable).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"
#include "server/scheduler/kubernetes_executor.h"
#include "server_fixture.h"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using llmt::server::AttemptStatus;

const fs::path kSrc = LLMT_SOURCE_DIR;

class KubernetesExecutorTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("llmt_kexec_" + std::to_string(getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_ / "double");
        fs::create_directories(dir_ / "jobs/7");
        ::setenv("KUBECTL", (kSrc / "tests/k8s/kubectl_double.sh").c_str(), 1);
        ::setenv("KDOUBLE_DIR", (dir_ / "double").c_str(), 1);
        llmt::write_file_atomic(dir_ / "jobs/7/config.yaml", llmt::read_file(kSrc / "deploy/examples/config.yaml"));
    }
    void TearDown() override {
        ::unsetenv("KUBECTL");
        ::unsetenv("KDOUBLE_DIR");
        fs::remove_all(dir_);
    }
    std::vector<std::string> calls() {
        std::ifstream in(dir_ / "double/argv.log");
        std::vector<std::string> out;
        for (std::string l; std::getline(in, l);) {
            while (!l.empty() && l.back() == ' ') l.pop_back();
            out.push_back(l);
        }
        return out;
    }
    void put(const std::string& name, const std::string& text) { std::ofstream(dir_ / "double" / name) << text; }
    llmt::server::AttemptRequest request(int attempt) {
        llmt::server::AttemptRequest r;
        r.job_id = 7;
        r.attempt = attempt;
        r.job_dir = dir_ / "jobs/7";
        r.config_path = dir_ / "jobs/7/config.yaml";
        r.spec.name = "tiny";
        r.spec.nodes = 2;
        return r;
    }
    llmt::server::KubernetesExecutor exec() {
        llmt::server::KubernetesOptions o;
        o.namespace_ = "ml";
        o.image = "llmtrain:0.1.0";
        o.output_pvc = "outputs";
        return llmt::server::KubernetesExecutor(o);
    }
    fs::path dir_;
};

Json pod(const std::string& name, int index, const std::string& phase, const std::string& created,
         int exit_code = -1) {
    Json cs = {{"restartCount", 0}};
    if (exit_code >= 0)
        cs["state"] = {{"terminated", {{"exitCode", exit_code}, {"reason", exit_code ? "Error" : "Completed"}}}};
    return {{"metadata",
             {{"name", name},
              {"creationTimestamp", created},
              {"annotations", {{"batch.kubernetes.io/job-completion-index", std::to_string(index)}}}}},
            {"spec", {{"nodeName", "node-" + std::to_string(index)}}},
            {"status", {{"phase", phase}, {"containerStatuses", {cs}}}}};
}
Json job_with(const std::string& type, const std::string& reason = "") {
    return {
        {"status", {{"conditions", {{{"type", type}, {"status", "True"}, {"reason", reason}, {"message", "m"}}}}}}};
}

TEST_F(KubernetesExecutorTest, StartAppliesTheRenderedIndexedJobAndRecordsTheHandle) {
    auto e = exec();
    std::string recorded;
    const std::string h = e.start(request(1), [&](const std::string& x) { recorded = x; });
    EXPECT_EQ(h, recorded);
    EXPECT_EQ(Json::parse(h), (Json{{"name", "tiny-7"}, {"namespace", "ml"}, {"kind", "indexed-job"}}));
    ASSERT_EQ(calls(), std::vector<std::string>{"--namespace ml apply -f -"});
    const std::string applied = llmt::read_file(dir_ / "double/applied.0.yaml");
    EXPECT_NE(applied.find("kind: Job"), std::string::npos) << applied;
    EXPECT_NE(applied.find("completionMode: Indexed"), std::string::npos);
    EXPECT_NE(applied.find("- output.run_id=tiny-7"), std::string::npos);
    EXPECT_NE(applied.find("claimName: outputs"), std::string::npos);
    // Retries are the server's attempts: the workload itself does not retry a failed index.
    EXPECT_NE(applied.find("backoffLimitPerIndex: 0"), std::string::npos) << applied;

    // A retry removes the failed workload first, then applies the same name (resume from /out/tiny-7).
    e.start(request(2), [](const std::string&) {});
    const auto c = calls();
    ASSERT_EQ(c.size(), 3u);
    EXPECT_EQ(c[1], "--namespace ml delete --ignore-not-found --cascade=foreground --wait=true job.batch/tiny-7");
    EXPECT_EQ(c[2], "--namespace ml apply -f -");
}

// A command job runs in its own pod with its own image and only the job's volumes (no config, no host path).
TEST_F(KubernetesExecutorTest, CommandJobRunsTheProgramInItsOwnPodWithItsImage) {
    auto e = exec();
    auto req = request(1);
    req.spec.command = {"python3", "train.py", "--epochs", "3"};
    req.spec.image = "registry.example.com/team/mnist:1.0";
    req.config_path.clear();  // a command job has none
    e.start(req, [](const std::string&) {});
    const std::string applied = llmt::read_file(dir_ / "double/applied.0.yaml");
    EXPECT_NE(applied.find("image: registry.example.com/team/mnist:1.0"), std::string::npos) << applied;
    EXPECT_NE(applied.find("- --no-python\n"), std::string::npos) << applied;
    EXPECT_NE(applied.find("- train.py\n"), std::string::npos) << applied;
    EXPECT_NE(applied.find("value: /out/tiny-7/metrics.jsonl"), std::string::npos) << applied;
    EXPECT_EQ(applied.find("kind: ConfigMap"), std::string::npos) << applied;
    EXPECT_EQ(applied.find("hostPath"), std::string::npos) << applied;
    EXPECT_NE(applied.find("claimName: outputs"), std::string::npos) << applied;
}

TEST_F(KubernetesExecutorTest, PollReadsConditionsAndTheFailedContainersExitCode) {
    auto e = exec();
    const std::string h = Json{{"name", "tiny-7"}, {"namespace", "ml"}, {"kind", "indexed-job"}}.dump();
    put("workload.json", Json{{"status", Json::object()}}.dump());
    EXPECT_EQ(e.poll(h).kind, AttemptStatus::kRunning);
    put("workload.json", job_with("Complete").dump());
    auto st = e.poll(h);
    EXPECT_EQ(st.kind, AttemptStatus::kExited);
    EXPECT_EQ(st.exit_code, 0);
    // Failed by the podFailurePolicy on exit code 2: the server must see 2 (bad input, no retry).
    put("workload.json", job_with("Failed", "PodFailurePolicy").dump());
    put("pods.json", Json{{"items", {pod("tiny-7-0-a", 0, "Failed", "2026-11-26T06:00:00Z", 2),
                                     pod("tiny-7-1-b", 1, "Failed", "2026-11-26T06:00:01Z", 143)}}}
                         .dump());
    st = e.poll(h);
    EXPECT_EQ(st.kind, AttemptStatus::kExited);
    EXPECT_EQ(st.exit_code, 143);  // the newest failed container's code
    put("pods.json", Json{{"items", {pod("tiny-7-0-a", 0, "Failed", "2026-11-26T06:00:02Z", 2),
                                     pod("tiny-7-1-b", 1, "Succeeded", "2026-11-26T06:00:01Z", 0)}}}
                         .dump());
    st = e.poll(h);
    EXPECT_EQ(st.exit_code, 2);
    EXPECT_NE(st.detail.find("PodFailurePolicy"), std::string::npos) << st.detail;
    // kubectl's answers: NotFound is a lost attempt; any other error is not the job's end.
    put("fail", "1\nError from server (NotFound): jobs.batch \"tiny-7\" not found\n");
    EXPECT_EQ(e.poll(h).kind, AttemptStatus::kLost);
    put("fail", "1\nThe connection to the server localhost:8080 was refused\n");
    st = e.poll(h);
    EXPECT_EQ(st.kind, AttemptStatus::kRunning);
    EXPECT_NE(st.detail.find("refused"), std::string::npos);
}

TEST_F(KubernetesExecutorTest, StopDeletesGracefullyOrForcesThePods) {
    auto e = exec();
    const std::string h = Json{{"name", "tiny-7"}, {"namespace", "ml"}, {"kind", "indexed-job"}}.dump();
    e.stop(h, false);
    e.stop(h, true);
    const auto c = calls();
    ASSERT_EQ(c.size(), 3u);
    EXPECT_EQ(c[0],
              "--namespace ml delete --ignore-not-found --wait=false job.batch/tiny-7 service/tiny-7 "
              "configmap/tiny-7-config");
    EXPECT_EQ(c[1],
              "--namespace ml delete pods -l app.kubernetes.io/instance=tiny-7 --grace-period=0 --force --wait=false");
    EXPECT_EQ(c[2], c[0]);
}

TEST_F(KubernetesExecutorTest, RankLogsComeFromEachRanksNewestPod) {
    auto e = exec();
    put("pods.json", Json{{"items", {pod("tiny-7-0-a", 0, "Running", "2026-11-26T06:00:00Z"),
                                     pod("tiny-7-1-old", 1, "Failed", "2026-11-26T06:00:00Z", 137),
                                     pod("tiny-7-1-new", 1, "Running", "2026-11-26T06:00:05Z")}}}
                         .dump());
    put("logs.tiny-7-0-a", "2026-11-26T06:00:01.000000000Z step 1\n");
    put("logs.tiny-7-1-new", "2026-11-26T06:00:06.000000000Z resume: /out/tiny-7/checkpoints/step_10 at step 10\n");
    llmt::server::JobSpec spec;
    spec.name = "tiny";
    spec.nodes = 2;
    const auto logs = e.rank_logs(dir_ / "jobs/7", spec);
    ASSERT_EQ(logs.size(), 2u);
    EXPECT_EQ(llmt::read_file(logs[0].path), "step 1\n");
    EXPECT_EQ(llmt::read_file(logs[1].path), "resume: /out/tiny-7/checkpoints/step_10 at step 10\n");
    EXPECT_EQ(calls().back(), "--namespace ml logs --timestamps tiny-7-1-new");
}

TEST(KubernetesExecutorOptions, ParsesTheExecutorFlag) {
    auto o = llmt::server::parse_kubernetes_options("kubernetes:namespace=ml,image=reg/llmtrain:1,output-pvc=outputs");
    EXPECT_EQ(o.namespace_, "ml");
    EXPECT_EQ(o.image, "reg/llmtrain:1");
    EXPECT_EQ(o.output_pvc, "outputs");
    EXPECT_EQ(o.kind, "indexed-job");
    EXPECT_EQ(llmt::server::parse_kubernetes_options("kubernetes:s3-secret=team-s3").s3_secret, "team-s3");
    EXPECT_EQ(llmt::server::parse_kubernetes_options("kubernetes").image, "llmtrain:latest");
    EXPECT_THROW(llmt::server::parse_kubernetes_options("kubernetes:nope=1"), llmt::UsageError);
    EXPECT_THROW(llmt::server::parse_kubernetes_options("kubernetes:kind=deployment"), llmt::UsageError);
}

// `llmtrain serve --executor kubernetes:...` end to end with the kubectl double: a submitted job is applied
// and runs while the Job has no condition; the server is killed -9 and restarted; the new process re-finds
// the attempt from its handle and finishes it when the Job reports Complete. Nothing is applied twice.
TEST_F(KubernetesExecutorTest, ServeRunsAJobThroughKubectlAndReFindsItAfterARestart) {
    using namespace llmt::testing;
    put("workload.json", Json{{"status", Json::object()}}.dump());
    put("pods.json", Json{{"items", Json::array()}}.dump());
    const std::vector<std::string> flags = {
        "--executor", "kubernetes:namespace=ml,output-pvc=outputs,data-pvc=datasets", "--capacity", "cpus=4,gpus=0"};
    auto server = std::make_unique<ServeProcess>(dir_ / "serve", flags);
    Api bob(server->port(), kSubmitterToken);
    auto r = bob.post("/v1/jobs", Json{{"name", "tiny"}, {"nodes", 2},
                                       {"config", tiny_config("/data/shards", 20, 5)}});
    ASSERT_EQ(r.status, 201) << r.text;
    const int64_t id = r.body["id"];
    auto state = [&](Api& a) { return a.get("/v1/jobs/" + std::to_string(id)).body.value("state", ""); };
    ASSERT_TRUE(wait_for([&] { return state(bob) == "running"; }, 60)) << server->log();
    const std::string name = "tiny-" + std::to_string(id);
    // The job view may ask for pods (per-rank status) before the apply has returned.
    // (The job view may ask for pods, per-rank status, before the apply has returned.) The Job is the
    // last object of the stream the double saves as it reads it.
    const fs::path applied = dir_ / "double/applied.0.yaml";
    ASSERT_TRUE(wait_for(
        [&] { return fs::exists(applied) && llmt::read_file(applied).find("kind: Job") != std::string::npos; }, 30))
        << server->log();
    EXPECT_NE(llmt::read_file(applied).find("- output.run_id=" + name), std::string::npos);

    server->kill9();
    server = std::make_unique<ServeProcess>(dir_ / "serve", flags);
    Api bob2(server->port(), kSubmitterToken);
    EXPECT_EQ(state(bob2), "running") << server->log();
    put("workload.json", job_with("Complete").dump());
    ASSERT_TRUE(wait_for([&] { return state(bob2) == "succeeded"; }, 60)) << server->log();
    int applies = 0;
    for (const auto& c : calls()) applies += c.find(" apply ") != std::string::npos;
    EXPECT_EQ(applies, 1);
    for (const auto& c : calls())
        if (c.find(" get ") != std::string::npos) {
            EXPECT_NE(c.find(name), std::string::npos) << c;
        }
}

TEST(KubernetesExecutorName, FitsTheLongestPodHostName) {
    EXPECT_EQ(llmt::server::KubernetesExecutor::object_name("tiny", 7, 2), "tiny-7");
    EXPECT_EQ(llmt::server::KubernetesExecutor::object_name("0abc", 12, 1), "j0abc-12");
    const std::string n = llmt::server::KubernetesExecutor::object_name(std::string(63, 'a'), 123456, 1000);
    EXPECT_LE(n.size() + std::string("-node-0-999").size(), 52u);
    EXPECT_EQ(n.substr(n.size() - 7), "-123456");
}

}  // namespace
