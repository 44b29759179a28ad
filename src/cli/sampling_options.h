// The sampling flags `generate` and `chat` share (--max-new-tokens, --temperature, --top-k, --top-p,
// --seed; models/sampler.h), declared once; each command keeps its own defaults.
#pragma once

#include <string>

#include "models/sampler.h"

namespace CLI {
class App;
}

namespace llmt::cli {

struct SamplingOptions {
    int max_new_tokens = 100;
    models::SamplerOptions sampler;  // temperature, top_k, seed, top_p
};

// Adds the five flags to `cmd`, bound to `o` (which must outlive the parse); their defaults are o's values
// when called. `max_new_tokens_help` says what the limit ends (a text, an answer).
void add_sampling_options(CLI::App& cmd, SamplingOptions& o, const std::string& max_new_tokens_help);

}  // namespace llmt::cli
