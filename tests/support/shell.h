// Test support: a shell command line (pipes, redirections) run to its end, with its exit status and its
// output, stderr folded into stdout. For a process with given stdin, separate streams or a timeout:
// support/subprocess.h.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace llmt::testing {

// rc: the exit status of `sh -c cmd`; -1 when the shell could not start or did not exit normally.
struct ShellResult {
    int rc = -1;
    std::string out;
};

inline ShellResult run_shell(const std::string& cmd) {
    ShellResult r;
    FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
    if (!p) return r;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = ::pclose(p);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

}  // namespace llmt::testing
