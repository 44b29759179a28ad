// `llmtrain chat`: a conversation with a checkpoint's model. Each user turn is appended to the
// conversation, which the model's chat template (data/chat/chat_template.h, from tokenizer_config.json beside
// the tokenizer) renders to the prompt; the answer is sampled with the KV-cache decoder and streamed until
// an end-of-turn id (the template's <|eot_id|>, generation_config.json's eos ids, end-of-text).
// Interactive on a terminal ("> " prompts on stderr); on a pipe every input line is one user turn and
// every answer one output line (an answer that holds newlines spans several). --print-prompt renders a
// conversation given as JSON on stdin without a model, to compare with transformers' apply_chat_template.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "cli/checkpoint_model.h"
#include "cli/command.h"
#include "cli/generation_stop.h"
#include "cli/hub_revision.h"
#include "cli/sampling_options.h"
#include "core/check.h"
#include "core/error.h"
#include "core/json_parse.h"
#include "data/chat/chat_template.h"
#include "data/tokenizer/tokenizer.h"
#include "kernels/ops.h"
#include "models/hf_resolve.h"
#include "models/language_model.h"
#include "models/sampler.h"
#include "models/utf8_stream.h"

namespace llmt::cli {
namespace {

struct ChatOptions {
    std::string model, config, tokenizer, chat_template, system, date, revision = "main";
    std::vector<std::string> sets;
    // Llama 3's generation_config.json: temperature 0.6, top-p 0.9.
    SamplingOptions sampling{.max_new_tokens = 256,
                             .sampler = {.temperature = 0.6f, .top_k = 0, .seed = 1337, .top_p = 0.9f}};
    bool print_prompt = false;
};

data::ChatTemplate load_template(const ChatOptions& o, const std::string& tok_spec) {
    const auto dir = tokenizer_directory(tok_spec);
    std::string template_file = o.chat_template;
    if (template_file.empty()) {
        LLMT_CHECK(!dir.empty(),
                   "chat: the tokenizer \"{}\" is not a model directory, so there is no tokenizer_config.json with a "
                   "chat template; pass --tokenizer DIR or --chat-template FILE",
                   tok_spec);
        template_file = (dir / "tokenizer_config.json").string();
    }
    data::ChatTemplate tmpl = data::ChatTemplate::load(template_file);
    if (!o.date.empty()) tmpl.set_date_string(o.date);
    return tmpl;
}

// stdin: a JSON array of {"role": ..., "content": ...}; stdout: the prompt (add_generation_prompt=True).
void print_prompt(const ChatOptions& o) {
    LLMT_CHECK(!o.tokenizer.empty() || !o.chat_template.empty(),
               "chat --print-prompt: pass --tokenizer DIR (a model directory) or --chat-template FILE");
    const data::ChatTemplate tmpl = load_template(o, o.tokenizer);
    std::string in((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    const nlohmann::json j = parse_json(in, "stdin (a JSON array of {role, content})");
    if (!j.is_array()) throw InputError("stdin: expected a JSON array of {\"role\": ..., \"content\": ...}");
    std::vector<data::ChatMessage> messages;
    for (std::size_t i = 0; i < j.size(); ++i) {
        const auto& m = j[i];
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
            !m["content"].is_string())
            throw InputError(fmt::format("stdin: element {} is not {{\"role\": STRING, \"content\": STRING}}", i));
        messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    }
    write_out(tmpl.render(messages, true));
}

void run_chat(const ChatOptions& o) {
    if (o.print_prompt) {
        print_prompt(o);
        return;
    }
    LLMT_CHECK_AS(UsageError, !o.model.empty(),
                  "chat: --model is required (a run or checkpoint directory, or a Hugging Face model directory)");
    LLMT_CHECK(o.sampling.max_new_tokens >= 1, "chat: --max-new-tokens must be >= 1, got {}",
               o.sampling.max_new_tokens);
    // A run of ours has checkpoints/ (a checkpoints/ directory has latest, a step directory state.json);
    // anything else is read as a Hugging Face model directory.
    const bool ours = is_checkpoint_path(o.model);
    const LoadedModel loaded = ours ? load_checkpoint_model("chat", o.model, o.config, o.sets)
                                    : load_model_dir("chat", o.model, o.sets);
    const config::Config& cfg = loaded.config;
    const models::Model& model = *loaded.model;
    kernels::set_cpu_threads(cfg.run.threads);
    const std::string tok_spec = text_tokenizer("chat", o.tokenizer, ours ? std::string() : o.model, cfg);
    const data::Tokenizer tok = data::Tokenizer::load(tok_spec);
    const auto dir = tokenizer_directory(tok_spec);
    const data::ChatTemplate tmpl = load_template(o, tok_spec);
    const uint32_t end_of_turn = tok.token_id(tmpl.end_of_turn());
    LLMT_CHECK(end_of_turn != 0xFFFFFFFFu, "chat: the template's end-of-turn token {} is not in the tokenizer {}",
               tmpl.end_of_turn(), tok.source_path());
    // The template's end of turn, generation_config.json's eos ids (model and tokenizer directories), the
    // model config's eos ids, end-of-text.
    std::vector<uint32_t> stop = generation_stop_ids(tok, dir, {end_of_turn});
    // The weights' directory: a model directory, or the checkpoint step directory (which holds one too).
    for (uint32_t id : generation_stop_ids(tok, loaded.source))
        if (std::find(stop.begin(), stop.end(), id) == stop.end()) stop.push_back(id);
    for (int64_t id : models::hf_export_info(cfg, "float32").eos_token_id) {
        if (id >= 0 && static_cast<uint64_t>(id) < tok.vocab_size() &&
            std::find(stop.begin(), stop.end(), static_cast<uint32_t>(id)) == stop.end())
            stop.push_back(static_cast<uint32_t>(id));
    }

    const models::ModelDims& mc = model.dims();
    const int V = std::min<int>(mc.vocab_size, static_cast<int>(tok.vocab_size()));
    models::Sampler sampler(o.sampling.sampler, V);
    const std::unique_ptr<models::Decoder> decoder = models::as_language_model(model).decoder();
    const bool tty = ::isatty(::fileno(stdin)) != 0;
    if (tty) {
        fmt::print(stderr, "chat: {} ({} template{}), stops at {}; an empty line or end of input quits\n",
                   model.summary(), tmpl.format_name(),
                   tmpl.format() == data::ChatFormat::kLlama31 ? ", today " + tmpl.date_string() : "",
                   describe_ids(tok, stop));
    }

    std::vector<data::ChatMessage> messages;
    if (!o.system.empty()) messages.push_back({"system", o.system});
    std::string line;
    for (;;) {
        if (tty) fmt::print(stderr, "> ");
        if (!std::getline(std::cin, line) || (tty && line.empty())) break;
        messages.push_back({"user", line});
        const std::string prompt = tmpl.render(messages, true);
        std::vector<int32_t> seq;
        for (uint32_t id : tok.encode(prompt, true)) seq.push_back(static_cast<int32_t>(id));
        LLMT_CHECK(static_cast<int>(seq.size()) + 1 <= decoder->capacity(),
                   "chat: the conversation is {} tokens, which leaves no room in the model's context of {} "
                   "(model.block_size); start a new chat",
                   seq.size(), decoder->capacity());
        const float* logits = decoder->prefill(seq);
        models::Utf8Stream text;
        std::string answer;
        std::string ended = fmt::format("--max-new-tokens ({})", o.sampling.max_new_tokens);
        int n = 0;
        for (; n < o.sampling.max_new_tokens; ++n) {
            const int32_t id = sampler.sample(logits);
            if (std::find(stop.begin(), stop.end(), static_cast<uint32_t>(id)) != stop.end()) {
                ended = describe_ids(tok, {static_cast<uint32_t>(id)});
                break;
            }
            const std::string_view bytes = tok.token_bytes(static_cast<uint32_t>(id));
            answer += bytes;
            write_out(text.take(bytes));
            if (decoder->position() == decoder->capacity()) {  // context full: the turn ends here
                ended = "the end of the context (model.block_size)";
                ++n;
                break;
            }
            logits = decoder->step(id);
        }
        write_out(text.finish());
        write_out("\n");
        // On a pipe, what ended the answer goes to stderr (scripts check that a model stops at its end of turn).
        if (!tty) fmt::print(stderr, "chat: answer of {} tokens ended by {}\n", n, ended);
        messages.push_back({"assistant", answer});
    }
}

}  // namespace

void register_chat(CLI::App& app, Runtime& rt) {
    auto* cmd = app.add_subcommand(
        "chat",
        "Talk to a checkpoint's model with its chat template (interactive on a terminal, a turn per line on a pipe)");
    auto o = std::make_shared<ChatOptions>();
    cmd->add_option(
        "--model,-m", o->model,
        "a run directory, a checkpoints/ directory, a checkpoints/step_N directory, or a Hugging Face "
        "model directory (config.json + safetensors; its tokenizer.json and tokenizer_config.json are used), "
        "or a hub cache folder models--ORG--NAME (its snapshot at --revision)");
    add_revision_option(*cmd, &o->revision, "--revision", "--model and --tokenizer");
    cmd->add_option("--config,-c", o->config, "YAML config of the model (default: the one stored in the checkpoint)");
    cmd->add_option("--set", o->sets, "override a config key, e.g. --set run.threads=4 (repeatable)")
        ->allow_extra_args(false);
    cmd->add_option("--tokenizer", o->tokenizer,
                    "tokenizer: a model directory with tokenizer.json, tokenizer_config.json (the chat template) and "
                    "optionally generation_config.json (default: the config's data.tokenizer)");
    cmd->add_option("--chat-template", o->chat_template, "tokenizer_config.json to take the chat template from");
    cmd->add_option("--system", o->system, "a system message before the conversation");
    cmd->add_option("--date", o->date,
                    "Llama 3.1/3.2 templates: the system turn's \"Today Date\" (default: the template's 26 Jul 2024)");
    add_sampling_options(*cmd, o->sampling, "longest answer in tokens");
    cmd->add_flag("--print-prompt", o->print_prompt,
                  "no model: read a JSON array of {role, content} on stdin and print the rendered prompt (as "
                  "apply_chat_template(..., add_generation_prompt=True))");
    cmd->callback([o, &rt] {
        resolve_hub_options(o->revision, {&o->model, &o->tokenizer}, "--revision", "--model or --tokenizer");
        run_chat(*o);
        rt.exit_code = 0;
    });
}

}  // namespace llmt::cli
