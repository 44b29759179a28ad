// Node-level environment resolution (node_env.h): flags, then Kubeflow's PET_*, then the Job/StatefulSet
// index, then PyTorchJob's per-pod RANK/WORLD_SIZE, each value tagged with its source.
#include "launch/node_env.h"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "core/knobs.h"

namespace llmt::launch {
namespace {

// A candidate value: its text and where it came from.
struct Raw {
    std::string text;
    std::string source;
    bool is_flag = false;
};

std::string quote_source(const Raw& r) {
    return r.is_flag ? fmt::format("{} '{}'", r.source, r.text) : fmt::format("{}='{}'", r.source, r.text);
}

std::optional<Raw> from_flag(const std::optional<std::string>& v, const char* name) {
    if (!v) return std::nullopt;
    return Raw{*v, name, true};
}

std::optional<Raw> from_env(const EnvLookup& env, const char* name) {
    auto v = env(name);
    if (!v || v->empty()) return std::nullopt;
    return Raw{*v, name, false};
}

// Strict decimal integer in [lo, hi]: no sign other than '-', no spaces, no trailing text.
int parse_int(const Raw& r, int lo, int hi, const char* what) {
    const std::string& s = r.text;
    long long v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size()) {
        throw UsageError(fmt::format("{}: expected an integer ({}), got a non-integer", quote_source(r), what));
    }
    if (v < lo || v > hi) {
        throw UsageError(fmt::format("{}: {} must be in [{}, {}]", quote_source(r), what, lo, hi));
    }
    return static_cast<int>(v);
}

// "N" or torchrun's elastic "MIN:MAX" with MIN == MAX (a fixed node count is all we support).
int parse_nnodes(const Raw& r) {
    auto colon = r.text.find(':');
    if (colon == std::string::npos) return parse_int(r, 1, 65536, "the number of nodes");
    Raw lo{r.text.substr(0, colon), r.source, r.is_flag}, hi{r.text.substr(colon + 1), r.source, r.is_flag};
    int a = parse_int(lo, 1, 65536, "the minimum number of nodes");
    int b = parse_int(hi, 1, 65536, "the maximum number of nodes");
    if (a != b) {
        throw UsageError(fmt::format("{}: elastic node ranges are not supported; give a fixed count (e.g. '{}')",
                                     quote_source(r), b));
    }
    return a;
}

// The hostname's trailing "-N" (a StatefulSet pod is <statefulset>-<ordinal>), if any.
std::optional<Raw> hostname_ordinal(const std::string& hostname) {
    // A FQDN's first label is the pod name.
    std::string pod = hostname.substr(0, hostname.find('.'));
    auto dash = pod.rfind('-');
    if (dash == std::string::npos || dash + 1 == pod.size()) return std::nullopt;
    std::string digits = pod.substr(dash + 1);
    for (char c : digits) {
        if (c < '0' || c > '9') return std::nullopt;
    }
    return Raw{digits, fmt::format("hostname '{}'", hostname), false};
}

// RANK/WORLD_SIZE count pods only under a PyTorchJob; under another launcher they count workers, which
// a set LOCAL_RANK gives away.
void refuse_if_nested(const EnvLookup& env, const Raw& r) {
    if (auto lr = from_env(env, "LOCAL_RANK")) {
        throw UsageError(fmt::format(
            "{} would be read as the node level (PyTorchJob), but LOCAL_RANK='{}' is also set: this process looks "
            "like a worker of another launcher (torchrun or llmtrain launch), where RANK/WORLD_SIZE count workers.\n"
            "hint: run llmtrain launch once per node, or give --nnodes/--node-rank explicitly",
            quote_source(r), lr->text));
    }
}

// --rdzv-endpoint HOST[:PORT] split into the master address and port flags; [v6]:PORT keeps its brackets off.
NodeFlags with_rdzv_endpoint(const NodeFlags& flags) {
    if (!flags.rdzv_endpoint) return flags;
    if (flags.master_addr || flags.master_port) {
        throw UsageError(fmt::format("--rdzv-endpoint '{}' names the master already: drop --master-addr/--master-port",
                                     *flags.rdzv_endpoint));
    }
    NodeFlags f = flags;
    const std::string& e = *flags.rdzv_endpoint;
    std::string host = e, port = std::to_string(kDefaultRdzvPort);
    if (!e.empty() && e.front() == '[') {
        auto close = e.find(']');
        if (close == std::string::npos) throw UsageError(fmt::format("--rdzv-endpoint '{}': unclosed '['", e));
        host = e.substr(1, close - 1);
        if (close + 1 < e.size()) {
            if (e[close + 1] != ':') throw UsageError(fmt::format("--rdzv-endpoint '{}': expected [HOST]:PORT", e));
            port = e.substr(close + 2);
        }
    } else if (auto colon = e.rfind(':'); colon != std::string::npos) {
        host = e.substr(0, colon);
        port = e.substr(colon + 1);
    }
    if (host.empty()) throw UsageError(fmt::format("--rdzv-endpoint '{}': expected HOST[:PORT]", e));
    f.master_addr = host;
    f.master_port = port;
    return f;
}

}  // namespace

std::string NodeEnv::describe() const {
    return fmt::format(
        "nnodes={} ({}) node_rank={} ({}) nproc_per_node={} ({}) master={}:{} ({}; {}) world_size={} ranks={}..{}",
        nnodes.value, nnodes.source, node_rank.value, node_rank.source, nproc_per_node.value, nproc_per_node.source,
        master_addr.value, master_port.value == 0 ? std::string("<free port>") : std::to_string(master_port.value),
        master_addr.source, master_port.source, world_size(), first_rank(), first_rank() + nproc_per_node.value - 1);
}

NodeEnv resolve_node_env(const NodeFlags& given_flags, const EnvLookup& env, const HostInfo& host) {
    const NodeFlags flags = with_rdzv_endpoint(given_flags);
    const char* addr_flag = given_flags.rdzv_endpoint ? "--rdzv-endpoint" : "--master-addr";
    const char* port_flag = given_flags.rdzv_endpoint ? "--rdzv-endpoint" : "--master-port";
    NodeEnv n;

    if (flags.standalone) {
        if (flags.nnodes && flags.nnodes != "1") {
            throw UsageError(fmt::format("--standalone runs one node, but --nnodes is '{}'", *flags.nnodes));
        }
        if (flags.node_rank && flags.node_rank != "0") {
            throw UsageError(
                fmt::format("--standalone runs one node (rank 0), but --node-rank is '{}'", *flags.node_rank));
        }
        if (flags.master_addr || flags.master_port || flags.rdzv_endpoint) {
            throw UsageError(
                "--standalone picks its own master (127.0.0.1, a free port): drop --master-addr/--master-port/"
                "--rdzv-endpoint");
        }
        n.nnodes = {1, "--standalone"};
        n.node_rank = {0, "--standalone"};
        n.master_addr = {"127.0.0.1", "--standalone"};
        n.master_port = {0, "--standalone"};
    } else {
        // nnodes
        if (auto r = from_flag(flags.nnodes, "--nnodes")) {
            n.nnodes = {parse_nnodes(*r), r->source};
        } else if (auto p = from_env(env, "PET_NNODES")) {
            n.nnodes = {parse_nnodes(*p), p->source};
        } else if (auto w = from_env(env, "WORLD_SIZE")) {
            refuse_if_nested(env, *w);
            n.nnodes = {parse_int(*w, 1, 65536, "the number of nodes (pods)"), "WORLD_SIZE (PyTorchJob)"};
        } else {
            n.nnodes = {1, "default"};
        }

        // node rank
        std::optional<Raw> rank;
        bool pytorchjob_rank = false;
        if ((rank = from_flag(flags.node_rank, "--node-rank"))) {
        } else if ((rank = from_env(env, "PET_NODE_RANK"))) {
        } else if ((rank = from_env(env, "JOB_COMPLETION_INDEX"))) {
        } else if ((rank = from_env(env, location_name(Location::kPodIndex)))) {
        } else if ((rank = from_env(env, "RANK"))) {
            refuse_if_nested(env, *rank);
            pytorchjob_rank = true;
        } else if (n.nnodes.value > 1) {
            // The hostname is a guess, so only a multi-node job relies on it: a laptop called "dev-3"
            // running one node stays rank 0.
            rank = hostname_ordinal(host.hostname);
        }
        if (rank) {
            int v = parse_int(*rank, 0, 65535, "the node rank");
            n.node_rank = {v, pytorchjob_rank ? std::string("RANK (PyTorchJob)") : rank->source};
        } else if (n.nnodes.value > 1) {
            throw UsageError(fmt::format(
                "nnodes is {} ({}) but nothing gives this node's rank: give --node-rank, or set PET_NODE_RANK, "
                "JOB_COMPLETION_INDEX, {} or RANK (the hostname '{}' has no trailing -N)",
                n.nnodes.value, n.nnodes.source, location_name(Location::kPodIndex), host.hostname));
        } else {
            n.node_rank = {0, "default"};
        }
        if (n.node_rank.value >= n.nnodes.value) {
            throw UsageError(fmt::format("node rank {} (from {}) must be < nnodes {} (from {})", n.node_rank.value,
                                         n.node_rank.source, n.nnodes.value, n.nnodes.source));
        }

        // master address
        std::optional<Raw> addr;
        if (!(addr = from_flag(flags.master_addr, addr_flag)) && !(addr = from_env(env, "PET_MASTER_ADDR"))) {
            addr = from_env(env, "MASTER_ADDR");
        }
        if (addr) {
            for (char c : addr->text) {
                if (c == ' ' || c == '\t' || c == '\n' || c == '/') {
                    throw UsageError(fmt::format("{}: expected a host name or IP address", quote_source(*addr)));
                }
            }
            n.master_addr = {addr->text, addr->source};
        } else if (n.nnodes.value > 1) {
            throw UsageError(fmt::format(
                "nnodes is {} ({}) but no master address is given: pass --master-addr (the host of node 0) or set "
                "PET_MASTER_ADDR or MASTER_ADDR",
                n.nnodes.value, n.nnodes.source));
        } else {
            n.master_addr = {"127.0.0.1", "default"};
        }

        // master port
        std::optional<Raw> port;
        if (!(port = from_flag(flags.master_port, port_flag)) && !(port = from_env(env, "PET_MASTER_PORT"))) {
            port = from_env(env, "MASTER_PORT");
        }
        if (port) {
            n.master_port = {parse_int(*port, 0, 65535, "a TCP port, 0 = pick a free one"), port->source};
        } else if (n.nnodes.value == 1) {
            // One node: a free port, so two launches side by side do not collide (as --standalone).
            n.master_port = {0, "default: a free port on one node"};
        } else {
            n.master_port = {kDefaultMasterPort, "default"};
        }
        if (n.master_port.value == 0 && n.nnodes.value > 1) {
            throw UsageError(fmt::format(
                "master port 0 (from {}) means a free port picked on this node, which the other {} nodes cannot "
                "know: give a fixed --master-port",
                n.master_port.source, n.nnodes.value - 1));
        }
    }

    // processes per node
    std::optional<Raw> np;
    if (!(np = from_flag(flags.nproc_per_node, "--nproc-per-node"))) np = from_env(env, "PET_NPROC_PER_NODE");
    if (!np) {
        n.nproc_per_node = {1, "default"};
    } else if (np->text == "auto" || np->text == "cpu") {
        // torchrun: auto = the GPU count if CUDA is available, else the CPU count. The launcher does not
        // probe devices, so both mean one worker per CPU here.
        n.nproc_per_node = {std::max(1, host.cpu_count), fmt::format("{}={} CPUs", np->source, np->text)};
    } else if (np->text == "gpu") {
        throw UsageError(fmt::format("{}: the launcher does not count GPUs; give the number of processes",
                                     quote_source(*np)));
    } else {
        n.nproc_per_node = {parse_int(*np, 1, 4096, "processes per node, or auto|cpu"), np->source};
    }
    return n;
}

EnvLookup process_env() {
    return [](const std::string& name) -> std::optional<std::string> {
        const char* v = std::getenv(name.c_str());
        if (!v) return std::nullopt;
        return std::string(v);
    };
}

HostInfo this_host() {
    HostInfo h;
    char buf[HOST_NAME_MAX + 1] = {};
    if (gethostname(buf, sizeof buf - 1) == 0) h.hostname = buf;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        h.cpu_count = CPU_COUNT(&set);
    } else {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        h.cpu_count = c > 0 ? static_cast<int>(c) : 1;
    }
    return h;
}

}  // namespace llmt::launch
