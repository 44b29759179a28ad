// Test support: run a shell command on N "hosts" (network namespaces on a bridge, own IP, hostname and
// /etc/hosts) through tests/support/netns_hosts.sh, which documents the environment the command sees.
// Use: auto r = run_on_hosts("llmtrain launch --nnodes 2 --node-rank $NETNS_HOST_INDEX ...");
//      if (r.skipped) GTEST_SKIP() << r.skip_reason;
#pragma once

#include <string>
#include <vector>

#include "support/subprocess.h"

namespace llmt::testing {

struct HostsResult {
    ProcResult proc;  // proc.out: every host's output, lines prefixed "[host-i] "; exit code: first failing host's
    bool skipped = false;     // network namespaces are not available here (not root, or the kernel refuses)
    std::string skip_reason;  // the harness's "SKIP: ..." line
};

// `command` runs with bash -c in every host at once; variables like $NETNS_HOST_INDEX expand per host.
// `aliases` are extra /etc/hosts names, printf formats of the index (e.g. "job-%d.job-svc").
inline HostsResult run_on_hosts(const std::string& command, int hosts = 2, int timeout_s = 120,
                                const std::vector<std::string>& aliases = {}) {
    std::vector<std::string> argv = {"bash", std::string(LLMT_SOURCE_DIR) + "/tests/support/netns_hosts.sh", "-n",
                                     std::to_string(hosts), "-t", std::to_string(timeout_s)};
    for (const auto& a : aliases) {
        argv.push_back("-a");
        argv.push_back(a);
    }
    argv.push_back("--");
    argv.push_back(command);
    HostsResult r;
    // The harness's own limit plus time for setup and cleanup.
    r.proc = run_process(argv, "", timeout_s + 60);
    if (!r.proc.signaled && r.proc.exit_code == 77) {
        r.skipped = true;
        auto p = r.proc.out.find("SKIP: ");
        r.skip_reason = p == std::string::npos ? r.proc.out : r.proc.out.substr(p);
    }
    return r;
}

}  // namespace llmt::testing
