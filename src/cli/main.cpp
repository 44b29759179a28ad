// llmtrain: the one binary. Parses the command line, runs one subcommand, and maps errors to exit
// codes: 0 ok, 2 invalid input (config, arguments, data), 1 runtime failure, 130/143 on SIGINT/SIGTERM.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <exception>

#include "cli/command.h"
#include "cli/did_you_mean.h"
#include "core/error.h"
#include "core/knobs.h"
#include "core/omp_wait.h"

namespace {

constexpr const char* kFooter = R"(Exit codes:
  0    success
  1    runtime failure (I/O, device, distributed peer lost, internal error)
  2    invalid input: bad arguments, config keys/values, data or checkpoint files
  130  interrupted by SIGINT (after writing a checkpoint, for train)
  143  terminated by SIGTERM (after writing a checkpoint, for train)

Run `llmtrain <command> --help` for the options of a command.)";

}  // namespace

int main(int argc, char** argv) {
    llmt::limit_omp_spinning(argc, argv);  // first: may re-execute the binary (core/omp_wait.h)
    llmt::cli::Runtime rt;
    rt.argv.assign(argv, argv + argc);

    CLI::App app{"llmtrain: train GPT-style language models, from a laptop to a Kubernetes cluster"};
    app.footer(kFooter);
    app.require_subcommand(1);
    app.fallthrough(false);
    llmt::cli::register_version(app, rt);
    llmt::cli::register_validate(app, rt);
    llmt::cli::register_print_config(app, rt);
    llmt::cli::register_data(app, rt);
    llmt::cli::register_tokenize(app, rt);
    llmt::cli::register_train(app, rt);
    llmt::cli::register_eval(app, rt);
    llmt::cli::register_generate(app, rt);
    llmt::cli::register_chat(app, rt);
    llmt::cli::register_export(app, rt);
    llmt::cli::register_predict(app, rt);
    llmt::cli::register_merge(app, rt);
    llmt::cli::register_serve(app, rt);
    llmt::cli::register_k8s(app, rt);
    llmt::cli::register_launch(app, rt);
    llmt::cli::register_estimate(app, rt);

    try {
        llmt::check_knobs();  // a mistyped LLMTRAIN_* value fails here, not silently as its default
        llmt::cli::check_command_names(app, {rt.argv.begin() + 1, rt.argv.end()});  // before "X is required"
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e);  // prints the message and usage hint to stderr
        return 2;
    } catch (const llmt::InputError& e) {
        std::fprintf(stderr, "llmtrain: error: %s\n", e.what());
        return 2;
    } catch (const llmt::Error& e) {
        std::fprintf(stderr, "llmtrain: error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "llmtrain: internal error: %s\n", e.what());
        return 1;
    }
    return rt.exit_code;
}
