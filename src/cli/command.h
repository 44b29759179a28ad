// Subcommand registration. Each src/cli/<name>.cpp defines one register_<name>() that adds a CLI11
// subcommand whose callback calls into a layer and prints (human, or one JSON document with --json).
// Callbacks throw llmt::Error subclasses; main.cpp maps them to exit codes (README "Exit codes").
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace llmt::cli {

// Shared by all subcommands of one invocation.
struct Runtime {
    int exit_code = 0;              // set by a callback that finishes without throwing
    std::vector<std::string> argv;  // the process's argv, for run metadata
};

void register_version(CLI::App& app, Runtime& rt);
void register_validate(CLI::App& app, Runtime& rt);
void register_print_config(CLI::App& app, Runtime& rt);
void register_data(CLI::App& app, Runtime& rt);
void register_data_chat(CLI::App& data, Runtime& rt);  // `data chat`, `data chat-example`: under `data`
void register_tokenize(CLI::App& app, Runtime& rt);  // tokenize + detokenize
void register_train(CLI::App& app, Runtime& rt);
void register_eval(CLI::App& app, Runtime& rt);
void register_generate(CLI::App& app, Runtime& rt);
void register_chat(CLI::App& app, Runtime& rt);
void register_export(CLI::App& app, Runtime& rt);
void register_predict(CLI::App& app, Runtime& rt);  // image classifiers
void register_merge(CLI::App& app, Runtime& rt);
void register_serve(CLI::App& app, Runtime& rt);
void register_k8s(CLI::App& app, Runtime& rt);  // k8s render|submit|status|logs|cancel|fetch
void register_launch(CLI::App& app, Runtime& rt);
void register_estimate(CLI::App& app, Runtime& rt);

}  // namespace llmt::cli
