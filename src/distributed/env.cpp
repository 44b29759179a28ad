// Worker-level environment parsing (torchrun's contract; docs/design.md §4).
#include "distributed/env.h"

#include <fmt/format.h>

#include <charconv>
#include <optional>
#include <string_view>

#include "core/error.h"

namespace llmt::dist {
namespace {

using Getenv = std::function<const char*(const char*)>;

// nullopt when unset or empty (torchrun treats an empty variable as unset).
std::optional<std::string> read_var(const Getenv& getenv_fn, const char* name) {
    const char* v = getenv_fn(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
}

std::optional<int> read_int(const Getenv& getenv_fn, const char* name) {
    auto s = read_var(getenv_fn, name);
    if (!s) return std::nullopt;
    std::string_view t = *s;
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
    int value = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
    if (t.empty() || ec != std::errc() || p != t.data() + t.size()) {
        throw UsageError(fmt::format("environment variable {}='{}' is not an integer", name, *s));
    }
    if (value < 0) {
        throw UsageError(fmt::format("environment variable {}={} is negative", name, value));
    }
    return value;
}

}  // namespace

WorkerEnv worker_env_from(const Getenv& getenv_fn) {
    WorkerEnv env;
    auto rank = read_int(getenv_fn, "RANK");
    auto world = read_int(getenv_fn, "WORLD_SIZE");
    auto local_rank = read_int(getenv_fn, "LOCAL_RANK");
    auto local_world = read_int(getenv_fn, "LOCAL_WORLD_SIZE");
    auto port = read_int(getenv_fn, "MASTER_PORT");
    auto restarts = read_int(getenv_fn, "TORCHELASTIC_RESTART_COUNT");

    if (rank && !world) {
        throw UsageError(fmt::format("RANK={} is set but WORLD_SIZE is not; set both (or neither)", *rank));
    }
    if (world && *world == 0) throw UsageError("WORLD_SIZE=0: the world needs at least one process");
    env.world_size = world.value_or(1);
    env.rank = rank.value_or(0);
    if (env.rank >= env.world_size) {
        throw UsageError(fmt::format("RANK={} is not below WORLD_SIZE={} (ranks are 0..WORLD_SIZE-1)",
                                     env.rank, env.world_size));
    }
    if (local_world && *local_world == 0) {
        throw UsageError("LOCAL_WORLD_SIZE=0: a node runs at least one process");
    }
    env.local_world_size = local_world.value_or(local_rank ? env.world_size : 1);
    env.local_rank = local_rank.value_or(env.world_size == 1 ? 0 : env.rank % env.local_world_size);
    if (env.local_world_size > env.world_size) {
        throw UsageError(fmt::format("LOCAL_WORLD_SIZE={} is larger than WORLD_SIZE={}",
                                     env.local_world_size, env.world_size));
    }
    if (env.local_rank >= env.local_world_size) {
        throw UsageError(fmt::format("LOCAL_RANK={} is not below LOCAL_WORLD_SIZE={}", env.local_rank,
                                     env.local_world_size));
    }
    if (env.local_rank > env.rank) {
        throw UsageError(fmt::format("LOCAL_RANK={} is larger than RANK={}", env.local_rank, env.rank));
    }

    auto addr = read_var(getenv_fn, "MASTER_ADDR");
    if (env.world_size > 1) {
        if (!addr && !port) {
            throw UsageError(fmt::format(
                "WORLD_SIZE={} but MASTER_ADDR and MASTER_PORT are not set (rank 0 serves the rendezvous "
                "store at MASTER_ADDR:MASTER_PORT)\nhint: start workers with `llmtrain launch`",
                env.world_size));
        }
        if (!addr) throw UsageError(fmt::format("WORLD_SIZE={} but MASTER_ADDR is not set", env.world_size));
        if (!port) throw UsageError(fmt::format("WORLD_SIZE={} but MASTER_PORT is not set", env.world_size));
    }
    if (port && (*port < 1 || *port > 65535)) {
        throw UsageError(fmt::format("MASTER_PORT={} is not a TCP port (1..65535)", *port));
    }
    env.master_addr = addr.value_or("");
    env.master_port = port.value_or(0);
    env.restart_count = restarts.value_or(0);
    // torch's env:// rendezvous takes exactly "True" (rendezvous.py, _torchelastic_use_agent_store):
    // the torchrun agent serves the store at MASTER_ADDR:MASTER_PORT and no worker hosts one.
    env.use_agent_store = read_var(getenv_fn, "TORCHELASTIC_USE_AGENT_STORE") == std::optional<std::string>("True");
    if (env.use_agent_store && env.distributed() && !restarts) {
        throw UsageError(
            "TORCHELASTIC_USE_AGENT_STORE=True but TORCHELASTIC_RESTART_COUNT is not set (torchrun sets both; "
            "workers use it to keep each restart's rendezvous keys apart)");
    }
    return env;
}

}  // namespace llmt::dist
