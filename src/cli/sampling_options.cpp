#include "cli/sampling_options.h"

#include <CLI/CLI.hpp>

namespace llmt::cli {

void add_sampling_options(CLI::App& cmd, SamplingOptions& o, const std::string& max_new_tokens_help) {
    cmd.add_option("--max-new-tokens,-n", o.max_new_tokens, max_new_tokens_help)->capture_default_str();
    cmd.add_option("--temperature,-t", o.sampler.temperature, "softmax temperature; 0 = greedy")
        ->capture_default_str();
    cmd.add_option("--top-k,-k", o.sampler.top_k, "sample among the k most likely tokens; 0 = all")
        ->capture_default_str();
    cmd.add_option("--top-p", o.sampler.top_p,
                   "then among the most likely tokens whose probability reaches p (nucleus); 1 = off")
        ->capture_default_str();
    cmd.add_option("--seed", o.sampler.seed, "random seed: the same seed and input give the same output")
        ->capture_default_str();
}

}  // namespace llmt::cli
