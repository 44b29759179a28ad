// Runs kubectl for `llmtrain k8s submit|status|logs|cancel|fetch` against the user's current context.
// The binary is $KUBECTL if set (tests point it at a recording script), else `kubectl` on PATH.
// kubectl's own failures are not reinterpreted: KubectlError carries its stderr and exit code, and
// the CLI exits with that code.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace llmt::k8s {

struct KubectlResult {
    int exit_code = 0;
    std::string out, err;
};

class KubectlError : public Error {
public:
    KubectlError(std::string msg, int exit_code) : Error(std::move(msg)), exit_code_(exit_code) {}
    int exit_code() const { return exit_code_; }

private:
    int exit_code_;
};

class Kubectl {
public:
    // Empty namespace/context: kubectl's current ones.
    Kubectl(std::string namespace_, std::string context);

    // The full argv for `args`: binary, --context, --namespace, then args.
    std::vector<std::string> argv(const std::vector<std::string>& args) const;

    // Runs and captures stdout/stderr; `input` goes to stdin. Never throws on a non-zero exit.
    KubectlResult run(const std::vector<std::string>& args, const std::string& input = "") const;

    // run(), then throws KubectlError (kubectl's stderr, its exit code) unless it exited 0. Returns stdout.
    std::string check(const std::vector<std::string>& args, const std::string& input = "") const;

    // Several kubectl commands at once (e.g. `logs -f` of each rank); every line of their stdout and
    // stderr is written to `out` as "<prefix><line>" as it arrives. Returns the first non-zero exit
    // code, or 0.
    int stream_prefixed(const std::vector<std::pair<std::string, std::vector<std::string>>>& commands,
                        std::FILE* out) const;

    const std::string& binary() const { return bin_; }
    const std::string& namespace_name() const { return ns_; }

private:
    std::string bin_, ns_, context_;
};

// "kubectl get pods ..." for messages (arguments with spaces quoted).
std::string format_command(const std::vector<std::string>& argv);

}  // namespace llmt::k8s
