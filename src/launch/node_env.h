// The node level of the distributed environment contract (docs/design.md §4, docs/distributed.md "Launcher"):
// what one `llmtrain launch` (one per node or pod) needs to set the worker level — node count, node rank,
// processes per node, master address and port — and where each value came from.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace llmt::launch {

// The launcher's own flags, as given on the command line (nullopt = not given). Strings, so that the
// flags and the environment variables share one parser and one kind of error message.
struct NodeFlags {
    std::optional<std::string> nnodes, node_rank, nproc_per_node, master_addr, master_port;
    // torchrun's --rdzv-endpoint HOST[:PORT]: the master address and port (port default 29400, as torchrun's
    // c10d rendezvous). Exclusive with --master-addr/--master-port.
    std::optional<std::string> rdzv_endpoint;
    bool standalone = false;  // torchrun's --standalone: one node, master 127.0.0.1, a free port
};

// What the machine says about itself; passed in so that resolve_node_env is a pure function.
struct HostInfo {
    std::string hostname;
    int cpu_count = 1;  // CPUs this process may run on (for --nproc-per-node auto|cpu)
};

// One resolved value and its origin ("--nnodes", "PET_NNODES", "hostname 'job-3'", "default", ...).
template <typename T>
struct Sourced {
    T value{};
    std::string source;
};

struct NodeEnv {
    Sourced<int> nnodes, node_rank, nproc_per_node;
    Sourced<std::string> master_addr;
    Sourced<int> master_port;  // 0: the launcher picks a free port (one node only)

    int world_size() const { return nnodes.value * nproc_per_node.value; }
    int first_rank() const { return node_rank.value * nproc_per_node.value; }
    // One line for the start-up log: every value with its source.
    std::string describe() const;
};

// Looks up an environment variable; nullopt when unset. Empty values count as unset (Kubernetes
// renders an absent downward-API field as "").
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// A StatefulSet pod's ordinal is read from LLMTRAIN_POD_INDEX (core/knobs.h, Location::kPodIndex): fill it from
// the pod label `apps.kubernetes.io/pod-index` with the downward API (fieldRef
// metadata.labels['apps.kubernetes.io/pod-index']).
inline constexpr int kDefaultMasterPort = 29500;  // torchrun's default
inline constexpr int kDefaultRdzvPort = 29400;    // torchrun's default port of an --rdzv-endpoint

// Resolves the node level. Per value, the first source that is present wins:
//   nnodes:         --nnodes, PET_NNODES ("N" or "N:N"), WORLD_SIZE (PyTorchJob, counts pods), 1
//   node rank:      --node-rank, PET_NODE_RANK, JOB_COMPLETION_INDEX, LLMTRAIN_POD_INDEX,
//                   RANK (PyTorchJob, with WORLD_SIZE), the hostname's trailing -N (only when nnodes > 1), 0
//   nproc per node: --nproc-per-node, PET_NPROC_PER_NODE (a number, "auto" or "cpu" = cpu_count), 1
//   master addr:    --master-addr or --rdzv-endpoint, PET_MASTER_ADDR, MASTER_ADDR, 127.0.0.1 (one node only)
//   master port:    --master-port or --rdzv-endpoint, PET_MASTER_PORT, MASTER_PORT, 29500 with nnodes > 1,
//                   else 0 (a free port picked at launch, so two one-node launches do not collide)
// --standalone fixes one node, rank 0, 127.0.0.1 and a free port.
// Throws UsageError naming the flags/variables involved for: a non-integer or out-of-range value, node rank
// >= nnodes, --rdzv-endpoint together with --master-addr/--master-port or with a bad port, nnodes > 1 without a master
// address or without any node rank source, port 0 with nnodes > 1, an elastic PET_NNODES range, --standalone with
// conflicting flags, and LOCAL_RANK already set (this process is itself a worker of another launcher, so
// RANK/WORLD_SIZE are not the node level).
NodeEnv resolve_node_env(const NodeFlags& flags, const EnvLookup& env, const HostInfo& host);

// The process environment and this machine (gethostname, sched_getaffinity).
EnvLookup process_env();
HostInfo this_host();

}  // namespace llmt::launch
