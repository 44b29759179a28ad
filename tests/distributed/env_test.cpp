// Worker environment parsing (distributed/env.h): defaults, every variable, every contradiction named.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.h"
#include "distributed/env.h"

namespace llmt::dist {
namespace {

using Vars = std::map<std::string, std::string>;

WorkerEnv parse(const Vars& vars) {
    return worker_env_from([&](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
    });
}

// The UsageError message for vars; fails the test when parsing succeeds.
std::string error_of(const Vars& vars) {
    try {
        parse(vars);
    } catch (const UsageError& e) {
        return e.what();
    }
    ADD_FAILURE() << "no UsageError";
    return {};
}

const Vars kTwo = {{"RANK", "1"},       {"LOCAL_RANK", "1"},        {"WORLD_SIZE", "2"},
                   {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "host-0"}, {"MASTER_PORT", "29500"}};

TEST(WorkerEnv, EmptyEnvironmentIsOneProcess) {
    WorkerEnv e = parse({});
    EXPECT_EQ(e.rank, 0);
    EXPECT_EQ(e.world_size, 1);
    EXPECT_EQ(e.local_rank, 0);
    EXPECT_EQ(e.local_world_size, 1);
    EXPECT_EQ(e.restart_count, 0);
    EXPECT_FALSE(e.distributed());
}

TEST(WorkerEnv, ReadsEveryVariable) {
    Vars v = {{"RANK", "5"},        {"LOCAL_RANK", "1"},     {"WORLD_SIZE", "8"},
              {"LOCAL_WORLD_SIZE", "4"}, {"MASTER_ADDR", "job-0.svc"}, {"MASTER_PORT", "29400"},
              {"TORCHELASTIC_RESTART_COUNT", "3"}};
    WorkerEnv e = parse(v);
    EXPECT_EQ(e.rank, 5);
    EXPECT_EQ(e.local_rank, 1);
    EXPECT_EQ(e.world_size, 8);
    EXPECT_EQ(e.local_world_size, 4);
    EXPECT_EQ(e.master_addr, "job-0.svc");
    EXPECT_EQ(e.master_port, 29400);
    EXPECT_EQ(e.restart_count, 3);
    EXPECT_TRUE(e.distributed());
}

TEST(WorkerEnv, WorldSizeOneNeedsNoMaster) {
    WorkerEnv e = parse({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
    EXPECT_FALSE(e.distributed());
    EXPECT_EQ(e.master_port, 0);
}

TEST(WorkerEnv, AgentStoreIsTorchrunsExactTrue) {
    Vars v = kTwo;
    v["TORCHELASTIC_USE_AGENT_STORE"] = "True";
    v["TORCHELASTIC_RESTART_COUNT"] = "2";
    WorkerEnv e = parse(v);
    EXPECT_TRUE(e.use_agent_store);
    EXPECT_EQ(e.restart_count, 2);
    // torch's env:// rendezvous compares with str(True): any other spelling is no agent store
    for (const char* other : {"False", "true", "1", ""}) {
        v["TORCHELASTIC_USE_AGENT_STORE"] = other;
        EXPECT_FALSE(parse(v).use_agent_store) << other;
    }
}

TEST(WorkerEnv, AgentStoreWithoutRestartCountIsNamed) {
    Vars v = kTwo;
    v["TORCHELASTIC_USE_AGENT_STORE"] = "True";
    std::string m = error_of(v);
    EXPECT_NE(m.find("TORCHELASTIC_RESTART_COUNT"), std::string::npos) << m;
}

struct BadCase {
    const char* name;
    Vars vars;
    std::vector<std::string> must_name;
};

class WorkerEnvBad : public ::testing::TestWithParam<BadCase> {};

TEST_P(WorkerEnvBad, ThrowsUsageErrorNamingVariables) {
    const BadCase& c = GetParam();
    std::string m = error_of(c.vars);
    for (const auto& s : c.must_name) EXPECT_NE(m.find(s), std::string::npos) << c.name << ": " << m;
}

Vars with(Vars v, const std::string& k, const std::string& val) {
    if (val.empty()) {
        v.erase(k);
    } else {
        v[k] = val;
    }
    return v;
}

INSTANTIATE_TEST_SUITE_P(
    Contradictions, WorkerEnvBad,
    ::testing::Values(
        BadCase{"rank_ge_world", with(kTwo, "RANK", "2"), {"RANK=2", "WORLD_SIZE=2"}},
        BadCase{"rank_not_int", with(kTwo, "RANK", "one"), {"RANK", "'one'", "not an integer"}},
        BadCase{"rank_trailing", with(kTwo, "RANK", "1x"), {"RANK", "not an integer"}},
        BadCase{"rank_negative", with(kTwo, "RANK", "-1"), {"RANK=-1", "negative"}},
        BadCase{"world_not_int", with(kTwo, "WORLD_SIZE", "2.0"), {"WORLD_SIZE", "not an integer"}},
        BadCase{"world_zero", with(kTwo, "WORLD_SIZE", "0"), {"WORLD_SIZE=0"}},
        BadCase{"rank_without_world", with(with(kTwo, "WORLD_SIZE", ""), "LOCAL_WORLD_SIZE", ""),
                {"RANK", "WORLD_SIZE"}},
        BadCase{"local_rank_ge_local_world", with(kTwo, "LOCAL_RANK", "2"), {"LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2"}},
        BadCase{"local_rank_negative", with(kTwo, "LOCAL_RANK", "-3"), {"LOCAL_RANK=-3"}},
        BadCase{"local_world_gt_world", with(kTwo, "LOCAL_WORLD_SIZE", "4"), {"LOCAL_WORLD_SIZE=4", "WORLD_SIZE=2"}},
        BadCase{"local_world_zero", with(kTwo, "LOCAL_WORLD_SIZE", "0"), {"LOCAL_WORLD_SIZE=0"}},
        BadCase{"local_rank_gt_rank", with(with(kTwo, "RANK", "0"), "LOCAL_RANK", "1"), {"LOCAL_RANK=1", "RANK=0"}},
        BadCase{"no_master_addr", with(kTwo, "MASTER_ADDR", ""), {"MASTER_ADDR", "WORLD_SIZE=2"}},
        BadCase{"no_master_port", with(kTwo, "MASTER_PORT", ""), {"MASTER_PORT", "WORLD_SIZE=2"}},
        BadCase{"no_master", with(with(kTwo, "MASTER_PORT", ""), "MASTER_ADDR", ""), {"MASTER_ADDR", "MASTER_PORT"}},
        BadCase{"port_not_int", with(kTwo, "MASTER_PORT", "http"), {"MASTER_PORT", "'http'"}},
        BadCase{"port_too_big", with(kTwo, "MASTER_PORT", "70000"), {"MASTER_PORT=70000"}},
        BadCase{"port_zero", with(kTwo, "MASTER_PORT", "0"), {"MASTER_PORT=0"}},
        BadCase{"restart_not_int", with(kTwo, "TORCHELASTIC_RESTART_COUNT", "x"), {"TORCHELASTIC_RESTART_COUNT"}},
        BadCase{"agent_store_no_restart_count", with(kTwo, "TORCHELASTIC_USE_AGENT_STORE", "True"),
                {"TORCHELASTIC_RESTART_COUNT"}}),
    [](const auto& tp) { return std::string(tp.param.name); });

}  // namespace
}  // namespace llmt::dist
