// Node-level environment resolution (src/launch/node_env.h): the precedence of flags, Kubeflow's PET_*,
// the Indexed Job / StatefulSet index, PyTorchJob's RANK/WORLD_SIZE and the hostname; every error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"
#include "launch/launcher.h"
#include "launch/error_file.h"
#include "launch/node_env.h"
#include "launch/worker_env.h"
#include "launch/worker_logs.h"

namespace llmt::launch {
namespace {

using Env = std::map<std::string, std::string>;

EnvLookup lookup(const Env& env) {
    return [env](const std::string& k) -> std::optional<std::string> {
        auto it = env.find(k);
        if (it == env.end()) return std::nullopt;
        return it->second;
    };
}

NodeEnv resolve(const NodeFlags& f, const Env& env = {}, const std::string& hostname = "laptop", int cpus = 8) {
    return resolve_node_env(f, lookup(env), HostInfo{hostname, cpus});
}

// The UsageError's message, which must name every listed flag or variable.
std::string usage_error(const NodeFlags& f, const Env& env = {}, const std::string& hostname = "laptop") {
    try {
        resolve(f, env, hostname);
    } catch (const UsageError& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected a UsageError";
    return "";
}

#define EXPECT_MENTIONS(msg, text) EXPECT_NE((msg).find(text), std::string::npos) << "message: " << (msg)

NodeFlags multi_node_flags() {
    NodeFlags f;
    f.nnodes = "2";
    f.master_addr = "host-0";
    return f;
}

TEST(NodeEnv, DefaultsToOneLocalNode) {
    auto n = resolve({});
    EXPECT_EQ(n.nnodes.value, 1);
    EXPECT_EQ(n.nnodes.source, "default");
    EXPECT_EQ(n.node_rank.value, 0);
    EXPECT_EQ(n.nproc_per_node.value, 1);
    EXPECT_EQ(n.master_addr.value, "127.0.0.1");
    // One node picks a free port (0 here, chosen at launch): two launches on one host must not both take
    // torchrun's 29500.
    EXPECT_EQ(n.master_port.value, 0);
    EXPECT_EQ(n.world_size(), 1);
}

TEST(NodeEnv, SeveralNodesDefaultToTorchrunsPort) {
    NodeFlags f;
    f.nnodes = "2";
    f.node_rank = "1";
    f.master_addr = "host-0";
    EXPECT_EQ(resolve(f).master_port.value, kDefaultMasterPort);
}

TEST(NodeEnv, FlagsBeatEveryVariable) {
    NodeFlags f;
    f.nnodes = "4";
    f.node_rank = "2";
    f.nproc_per_node = "3";
    f.master_addr = "flag-host";
    f.master_port = "1234";
    Env env = {{"PET_NNODES", "8"},         {"PET_NODE_RANK", "7"},   {"PET_NPROC_PER_NODE", "5"},
               {"PET_MASTER_ADDR", "pet"},  {"PET_MASTER_PORT", "9"}, {"JOB_COMPLETION_INDEX", "1"},
               {"LLMTRAIN_POD_INDEX", "1"}, {"RANK", "1"},            {"WORLD_SIZE", "8"},
               {"MASTER_ADDR", "pyt"},      {"MASTER_PORT", "10"}};
    auto n = resolve(f, env, "pod-5");
    EXPECT_EQ(n.nnodes.value, 4);
    EXPECT_EQ(n.nnodes.source, "--nnodes");
    EXPECT_EQ(n.node_rank.value, 2);
    EXPECT_EQ(n.node_rank.source, "--node-rank");
    EXPECT_EQ(n.nproc_per_node.value, 3);
    EXPECT_EQ(n.master_addr.value, "flag-host");
    EXPECT_EQ(n.master_port.value, 1234);
    EXPECT_EQ(n.world_size(), 12);
    EXPECT_EQ(n.first_rank(), 6);
}

TEST(NodeEnv, KubeflowPetVariablesBeatTheRest) {
    Env env = {{"PET_NNODES", "3"},          {"PET_NODE_RANK", "2"},  {"PET_NPROC_PER_NODE", "4"},
               {"PET_MASTER_ADDR", "job-0"}, {"PET_MASTER_PORT", "23456"}, {"JOB_COMPLETION_INDEX", "1"},
               {"RANK", "1"},                {"WORLD_SIZE", "5"},     {"MASTER_ADDR", "other"}, {"MASTER_PORT", "1"}};
    auto n = resolve({}, env);
    EXPECT_EQ(n.nnodes.value, 3);
    EXPECT_EQ(n.nnodes.source, "PET_NNODES");
    EXPECT_EQ(n.node_rank.value, 2);
    EXPECT_EQ(n.node_rank.source, "PET_NODE_RANK");
    EXPECT_EQ(n.nproc_per_node.value, 4);
    EXPECT_EQ(n.nproc_per_node.source, "PET_NPROC_PER_NODE");
    EXPECT_EQ(n.master_addr.value, "job-0");
    EXPECT_EQ(n.master_port.value, 23456);
    EXPECT_EQ(n.master_port.source, "PET_MASTER_PORT");
}

TEST(NodeEnv, PetNnodesAcceptsAFixedRangeOnly) {
    auto n = resolve({}, {{"PET_NNODES", "2:2"}, {"PET_NODE_RANK", "1"}, {"PET_MASTER_ADDR", "m"}});
    EXPECT_EQ(n.nnodes.value, 2);
    auto msg = usage_error({}, {{"PET_NNODES", "1:4"}, {"PET_NODE_RANK", "0"}, {"PET_MASTER_ADDR", "m"}});
    EXPECT_MENTIONS(msg, "PET_NNODES='1:4'");
    EXPECT_MENTIONS(msg, "elastic");
}

TEST(NodeEnv, IndexedJobCompletionIndexIsTheNodeRank) {
    auto n = resolve(multi_node_flags(), {{"JOB_COMPLETION_INDEX", "1"}, {"LLMTRAIN_POD_INDEX", "0"}}, "job-0");
    EXPECT_EQ(n.node_rank.value, 1);
    EXPECT_EQ(n.node_rank.source, "JOB_COMPLETION_INDEX");
}

TEST(NodeEnv, StatefulSetPodIndexThenHostname) {
    auto n = resolve(multi_node_flags(), {{"LLMTRAIN_POD_INDEX", "1"}}, "trainer-0");
    EXPECT_EQ(n.node_rank.value, 1);
    EXPECT_EQ(n.node_rank.source, "LLMTRAIN_POD_INDEX");
    n = resolve(multi_node_flags(), {}, "trainer-1.trainer.default.svc.cluster.local");
    EXPECT_EQ(n.node_rank.value, 1);
    EXPECT_MENTIONS(n.node_rank.source, "hostname 'trainer-1.trainer");
}

TEST(NodeEnv, HostnameIsIgnoredOnOneNode) {
    // A workstation named like a pod must not become node 3 of a 1-node job.
    auto n = resolve({}, {}, "dev-3");
    EXPECT_EQ(n.node_rank.value, 0);
    EXPECT_EQ(n.node_rank.source, "default");
}

TEST(NodeEnv, PyTorchJobRankAndWorldSizeCountPods) {
    Env env = {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "job-master-0"}, {"MASTER_PORT", "23456"}};
    // PyTorchJob pods are <job>-master-0, <job>-worker-0, ...: RANK, not the hostname, is the node rank.
    auto n = resolve({}, env, "job-worker-0");
    EXPECT_EQ(n.nnodes.value, 2);
    EXPECT_EQ(n.nnodes.source, "WORLD_SIZE (PyTorchJob)");
    EXPECT_EQ(n.node_rank.value, 1);
    EXPECT_EQ(n.node_rank.source, "RANK (PyTorchJob)");
    EXPECT_EQ(n.master_addr.value, "job-master-0");
    EXPECT_EQ(n.master_port.value, 23456);
}

TEST(NodeEnv, EmptyVariablesCountAsUnset) {
    auto n = resolve({}, {{"PET_NNODES", ""}, {"JOB_COMPLETION_INDEX", ""}, {"MASTER_ADDR", ""}});
    EXPECT_EQ(n.nnodes.source, "default");
    EXPECT_EQ(n.node_rank.source, "default");
    EXPECT_EQ(n.master_addr.value, "127.0.0.1");
}

TEST(NodeEnv, NprocAutoAndCpuMeanOneWorkerPerCpu) {
    NodeFlags f;
    f.nproc_per_node = "auto";
    EXPECT_EQ(resolve(f, {}, "h", 6).nproc_per_node.value, 6);
    auto n = resolve({}, {{"PET_NPROC_PER_NODE", "cpu"}}, "h", 3);
    EXPECT_EQ(n.nproc_per_node.value, 3);
    EXPECT_MENTIONS(n.nproc_per_node.source, "PET_NPROC_PER_NODE");
    f.nproc_per_node = "gpu";
    EXPECT_MENTIONS(usage_error(f), "--nproc-per-node 'gpu'");
}

TEST(NodeEnv, Standalone) {
    NodeFlags f;
    f.standalone = true;
    auto n = resolve(f, {{"PET_NNODES", "4"}, {"MASTER_ADDR", "x"}});
    EXPECT_EQ(n.nnodes.value, 1);
    EXPECT_EQ(n.master_addr.value, "127.0.0.1");
    EXPECT_EQ(n.master_port.value, 0);  // a free port, picked at launch
    f.nnodes = "2";
    EXPECT_MENTIONS(usage_error(f), "--nnodes");
    f.nnodes.reset();
    f.master_port = "5";
    EXPECT_MENTIONS(usage_error(f), "--master-port");
    f.master_port.reset();
    f.node_rank = "1";
    EXPECT_MENTIONS(usage_error(f), "--node-rank");
}

TEST(NodeEnv, NodeRankMustBeBelowNnodes) {
    NodeFlags f = multi_node_flags();
    auto msg = usage_error(f, {{"JOB_COMPLETION_INDEX", "2"}});
    EXPECT_MENTIONS(msg, "JOB_COMPLETION_INDEX");
    EXPECT_MENTIONS(msg, "--nnodes");
    msg = usage_error({}, {{"PET_NODE_RANK", "1"}});  // nnodes defaults to 1
    EXPECT_MENTIONS(msg, "PET_NODE_RANK");
    EXPECT_MENTIONS(msg, "nnodes 1 (from default)");
}

TEST(NodeEnv, SeveralNodesNeedAMasterAddress) {
    NodeFlags f;
    f.nnodes = "2";
    f.node_rank = "0";
    auto msg = usage_error(f);
    EXPECT_MENTIONS(msg, "--master-addr");
    EXPECT_MENTIONS(msg, "PET_MASTER_ADDR");
    EXPECT_MENTIONS(msg, "MASTER_ADDR");
}

TEST(NodeEnv, SeveralNodesNeedANodeRank) {
    auto msg = usage_error(multi_node_flags(), {}, "laptop");
    EXPECT_MENTIONS(msg, "--node-rank");
    EXPECT_MENTIONS(msg, "JOB_COMPLETION_INDEX");
    EXPECT_MENTIONS(msg, "LLMTRAIN_POD_INDEX");
    EXPECT_MENTIONS(msg, "hostname 'laptop'");
}

TEST(NodeEnv, NonIntegersAndRangesAreNamed) {
    NodeFlags f;
    f.nnodes = "two";
    EXPECT_MENTIONS(usage_error(f), "--nnodes 'two'");
    EXPECT_MENTIONS(usage_error({}, {{"PET_NPROC_PER_NODE", "2x"}}), "PET_NPROC_PER_NODE='2x'");
    EXPECT_MENTIONS(usage_error(multi_node_flags(), {{"JOB_COMPLETION_INDEX", "-1"}}), "JOB_COMPLETION_INDEX='-1'");
    EXPECT_MENTIONS(usage_error({}, {{"MASTER_PORT", "70000"}}), "MASTER_PORT='70000'");
    EXPECT_MENTIONS(usage_error({}, {{"MASTER_PORT", " 1"}}), "MASTER_PORT=' 1'");
    f.nnodes = "0";
    EXPECT_MENTIONS(usage_error(f), "--nnodes '0'");
    f.nnodes.reset();
    f.nproc_per_node = "0";
    EXPECT_MENTIONS(usage_error(f), "--nproc-per-node '0'");
    f.nproc_per_node.reset();
    f.master_addr = "bad host";
    EXPECT_MENTIONS(usage_error(f), "--master-addr 'bad host'");
}

TEST(NodeEnv, PortZeroOnlyOnOneNode) {
    NodeFlags f;
    f.master_port = "0";
    EXPECT_EQ(resolve(f).master_port.value, 0);
    f = multi_node_flags();
    f.node_rank = "0";
    f.master_port = "0";
    EXPECT_MENTIONS(usage_error(f), "--master-port");
}

TEST(NodeEnv, WorkerLevelRankUnderAnotherLauncherIsRefused) {
    // Inside a torchrun worker RANK/WORLD_SIZE count workers, not pods.
    auto msg = usage_error({}, {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "m"}});
    EXPECT_MENTIONS(msg, "LOCAL_RANK='1'");
    EXPECT_MENTIONS(msg, "WORLD_SIZE='2'");
    // Given explicitly, the node level does not read them.
    NodeFlags f;
    f.nnodes = "1";
    f.node_rank = "0";
    EXPECT_EQ(resolve(f, {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}}).world_size(), 1);
}

TEST(NodeEnv, DescribeNamesEverySource) {
    auto n = resolve(multi_node_flags(), {{"JOB_COMPLETION_INDEX", "1"}, {"PET_NPROC_PER_NODE", "2"}});
    auto d = n.describe();
    EXPECT_MENTIONS(d, "nnodes=2 (--nnodes)");
    EXPECT_MENTIONS(d, "node_rank=1 (JOB_COMPLETION_INDEX)");
    EXPECT_MENTIONS(d, "nproc_per_node=2 (PET_NPROC_PER_NODE)");
    EXPECT_MENTIONS(d, "master=host-0:29500 (--master-addr; default)");
    EXPECT_MENTIONS(d, "world_size=4 ranks=2..3");
}

TEST(LaunchArgs, ResumeAutoIsAppendedToTrainOnRestartsOnly) {
    LaunchOptions opt;
    opt.worker_args = {"train", "--config", "c.yaml"};
    EXPECT_EQ(worker_args_for_attempt(opt, 0), opt.worker_args);
    std::vector<std::string> resumed = {"train", "--config", "c.yaml", "--resume", "auto"};
    EXPECT_EQ(worker_args_for_attempt(opt, 1), resumed);
    opt.worker_args = {"train", "--config", "c.yaml", "--resume=runs/x"};
    EXPECT_EQ(worker_args_for_attempt(opt, 2), opt.worker_args);
    opt.worker_args = {"eval", "--config", "c.yaml"};
    EXPECT_EQ(worker_args_for_attempt(opt, 1), opt.worker_args);
    opt.worker_args = {"train"};
    opt.exec_program = "/bin/echo";  // another program: its arguments are its own
    EXPECT_EQ(worker_args_for_attempt(opt, 1), opt.worker_args);
}

TEST(NodeEnv, RdzvEndpointGivesMasterAddressAndPort) {
    NodeFlags f = multi_node_flags();
    f.master_addr.reset();
    f.node_rank = "1";
    f.rdzv_endpoint = "job-0.svc:29401";
    auto n = resolve(f, {{"MASTER_ADDR", "ignored"}});
    EXPECT_EQ(n.master_addr.value, "job-0.svc");
    EXPECT_EQ(n.master_addr.source, "--rdzv-endpoint");
    EXPECT_EQ(n.master_port.value, 29401);
    f.rdzv_endpoint = "job-0.svc";  // no port: torchrun's rendezvous default
    EXPECT_EQ(resolve(f).master_port.value, kDefaultRdzvPort);
    f.rdzv_endpoint = "[fd00::1]:1234";
    EXPECT_EQ(resolve(f).master_addr.value, "fd00::1");
    f.rdzv_endpoint = "h:notaport";
    EXPECT_MENTIONS(usage_error(f), "--rdzv-endpoint 'notaport'");
    f.rdzv_endpoint = "h:1";
    f.master_port = "2";
    EXPECT_MENTIONS(usage_error(f), "drop --master-addr/--master-port");
}

TEST(WorkerEnv, ProgramsGetTorchrunsEnvironmentAndTheAgentStoreChoice) {
    NodeFlags f = multi_node_flags();
    f.node_rank = "1";
    f.nproc_per_node = "2";
    f.master_port = "1234";
    auto n = resolve(f);
    WorkerGroupEnv g{WorkerKind::kProgram, 3, "job", 1};
    std::map<std::string, std::string> env;
    for (auto& [k, v] : worker_env(n, g, WorkerSlot{1, 1234, 2, "/l/error.json"})) env[k] = v;
    EXPECT_EQ(env["RANK"], "3");
    EXPECT_EQ(env["LOCAL_RANK"], "1");
    EXPECT_EQ(env["WORLD_SIZE"], "4");
    EXPECT_EQ(env["GROUP_RANK"], "1");
    EXPECT_EQ(env["ROLE_RANK"], "3");
    EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "2");
    EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "3");
    EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "job");
    EXPECT_EQ(env["TORCHELASTIC_ERROR_FILE"], "/l/error.json");
    EXPECT_EQ(env["TORCHELASTIC_USE_AGENT_STORE"], agent_store_env_value(WorkerKind::kProgram));
    EXPECT_EQ(env["OMP_NUM_THREADS"], "1");
    // Until the launcher serves torch's store, a script's rank 0 hosts it (False) and our engine gets none.
    EXPECT_EQ(agent_store_env_value(WorkerKind::kProgram), "False");
    EXPECT_EQ(agent_store_env_value(WorkerKind::kEngine), "");
}

TEST(WorkerLogs, StdSpecsAreTorchrunsForm) {
    EXPECT_EQ(parse_std_spec("3", 2, "--tee"), (std::vector<int>{3, 3}));
    EXPECT_EQ(parse_std_spec("0:1,2:2", 3, "--tee"), (std::vector<int>{1, 0, 2}));
    for (const char* bad : {"4", "x", "0:4", "3:1", "a:1", ":1", ""}) {
        try {
            parse_std_spec(bad, 3, "--redirects");
            ADD_FAILURE() << "accepted " << bad;
        } catch (const UsageError& e) {
            EXPECT_MENTIONS(std::string(e.what()), "--redirects");
        }
    }
}

TEST(ErrorFile, TorchsRecordFormatIsReadBack) {
    const auto path = std::filesystem::temp_directory_path() / ("llmt_error_file_" + std::to_string(getpid()));
    EXPECT_EQ(read_error_file(path.string()), std::nullopt);
    std::ofstream(path)
        << R"({"message": {"message": "ValueError: bad lr", )"
        << R"("extraInfo": {"py_callstack": "Traceback x\n", "timestamp": "1"}}})";
    EXPECT_EQ(read_error_file(path.string()), std::optional<std::string>("ValueError: bad lr\nTraceback x"));
    std::ofstream(path) << R"({"message": "plain"})";
    EXPECT_EQ(read_error_file(path.string()), std::optional<std::string>("plain"));
    std::ofstream(path) << "not json";
    EXPECT_MENTIONS(*read_error_file(path.string()), "not torch's JSON");
    WorkerFailure f{1, 1, 42, 137, 0, path.string()};
    auto d = describe_failure(f, "host");
    EXPECT_MENTIONS(d, "worker rank 1 (local rank 1, pid 42) on host failed at 1970-01-01T00:00:00Z with signal 9");
    std::filesystem::remove(path);
}

}  // namespace
}  // namespace llmt::launch
