// The worker level of the environment contract (worker_env.h), after torchrun's local elastic agent
// (torch/distributed/elastic/agent/server/local_elastic_agent.py, _start_workers).
#include "launch/worker_env.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

namespace llmt::launch {

std::string agent_store_env_value(WorkerKind kind) {
    return kind == WorkerKind::kProgram ? "False" : "";
}

std::vector<std::pair<std::string, std::string>> worker_env(const NodeEnv& node, const WorkerGroupEnv& group,
                                                            const WorkerSlot& slot) {
    const std::string world = std::to_string(node.world_size());
    const std::string rank = std::to_string(node.first_rank() + slot.local_rank);
    std::vector<std::pair<std::string, std::string>> env = {
        {"RANK", rank},
        {"LOCAL_RANK", std::to_string(slot.local_rank)},
        {"WORLD_SIZE", world},
        {"LOCAL_WORLD_SIZE", std::to_string(node.nproc_per_node.value)},
        {"GROUP_RANK", std::to_string(node.node_rank.value)},
        {"GROUP_WORLD_SIZE", std::to_string(node.nnodes.value)},
        {"ROLE_NAME", "default"},
        {"ROLE_RANK", rank},
        {"ROLE_WORLD_SIZE", world},
        {"MASTER_ADDR", node.master_addr.value},
        {"MASTER_PORT", std::to_string(slot.master_port)},
        {"TORCHELASTIC_RESTART_COUNT", std::to_string(slot.restart_count)},
        {"TORCHELASTIC_MAX_RESTARTS", std::to_string(group.max_restarts)},
        {"TORCHELASTIC_RUN_ID", group.run_id},
        {"TORCHELASTIC_USE_AGENT_STORE", agent_store_env_value(group.kind)},
        {"TORCHELASTIC_ERROR_FILE", slot.error_file},
    };
    // torch 2.x's name; the agent keeps a value the launcher's environment already has.
    const char* nccl_async = std::getenv("TORCH_NCCL_ASYNC_ERROR_HANDLING");
    env.emplace_back("TORCH_NCCL_ASYNC_ERROR_HANDLING", nccl_async && *nccl_async ? nccl_async : "1");
    if (group.omp_threads) env.emplace_back("OMP_NUM_THREADS", std::to_string(*group.omp_threads));
    return env;
}

std::optional<int> default_omp_threads(WorkerKind kind, int cpu_count, int nproc_per_node) {
    if (std::getenv("OMP_NUM_THREADS")) {
        // torchrun tests presence; for our engine an empty value counts as unset.
        if (kind == WorkerKind::kProgram || *std::getenv("OMP_NUM_THREADS")) return std::nullopt;
    }
    if (kind == WorkerKind::kProgram) return nproc_per_node > 1 ? std::optional<int>(1) : std::nullopt;
    return std::max(1, cpu_count / std::max(1, nproc_per_node));
}

std::string omp_threads_warning(WorkerKind kind, const std::optional<int>& omp_threads) {
    if (kind != WorkerKind::kProgram || !omp_threads) return "";
    return fmt::format(
        "OMP_NUM_THREADS is not set: each worker gets OMP_NUM_THREADS={} (torchrun's default for several "
        "workers per node), so that they do not oversubscribe the CPUs; set OMP_NUM_THREADS to tune it",
        *omp_threads);
}

}  // namespace llmt::launch
