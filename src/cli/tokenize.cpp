// `llmtrain tokenize` (stdin bytes -> token ids, one per line or one JSON array) and
// `llmtrain detokenize` (ids as a JSON array or whitespace-separated -> the bytes on stdout).
// Tokenizer semantics: src/data/tokenizer/tokenizer.h (tiktoken gpt2, or a Hugging Face tokenizer.json such as
// Llama 3's; without --allow-special, encode_ordinary). Never adds BOS/EOS (Hugging Face's
// encode(text, add_special_tokens=False)).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/hub_revision.h"
#include "core/error.h"
#include "core/json_describe.h"
#include "core/json_parse.h"
#include "data/tokenizer/tokenizer.h"

namespace llmt::cli {
namespace {

std::string read_stdin() {
    std::string data;
    char buf[1 << 16];
    for (;;) {
        const std::size_t n = std::fread(buf, 1, sizeof buf, stdin);
        data.append(buf, n);
        if (n < sizeof buf) {
            if (std::ferror(stdin)) throw IoError(fmt::format("reading stdin: {}", std::strerror(errno)));
            break;
        }
    }
    return data;
}

void write_stdout(std::string_view s) {
    if (std::fwrite(s.data(), 1, s.size(), stdout) != s.size() || std::fflush(stdout) != 0)
        throw IoError(fmt::format("writing stdout: {}", std::strerror(errno)));
}

// Ids from text: a JSON array of non-negative integers, or whitespace-separated decimal integers.
std::vector<uint32_t> parse_ids(const std::string& in) {
    std::vector<uint32_t> ids;
    const std::size_t first = in.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && in[first] == '[') {
        // Ids are flat: depth 1. The whole of stdin is the input (the user's own), so no size limit here.
        const nlohmann::json j = parse_json(in, "stdin (a JSON array of ids)", {SIZE_MAX, 1});
        if (!j.is_array()) throw InputError("stdin: expected a JSON array of ids");
        ids.reserve(j.size());
        for (std::size_t i = 0; i < j.size(); ++i) {
            if (!j[i].is_number_unsigned() || j[i].get<uint64_t>() > UINT32_MAX)
                throw InputError(fmt::format("stdin: element {} ({}) is not a token id (a non-negative integer)", i,
                                             describe_json(j[i])));
            ids.push_back(j[i].get<uint32_t>());
        }
        return ids;
    }
    std::size_t pos = 0;
    while (true) {
        pos = in.find_first_not_of(" \t\r\n", pos);
        if (pos == std::string::npos) break;
        std::size_t end = in.find_first_of(" \t\r\n", pos);
        if (end == std::string::npos) end = in.size();
        const std::string_view word(in.data() + pos, end - pos);
        uint64_t v = 0;
        bool ok = !word.empty() && word.size() <= 10;
        for (char c : word) {
            ok = ok && c >= '0' && c <= '9';
            v = v * 10 + static_cast<uint64_t>(c - '0');
        }
        if (!ok || v > UINT32_MAX)
            throw InputError(fmt::format("stdin: \"{}\" (byte {}, id number {}) is not a token id; expected "
                                         "whitespace-separated non-negative integers or a JSON array",
                                         word.substr(0, 40), pos, ids.size()));
        ids.push_back(static_cast<uint32_t>(v));
        pos = end;
    }
    return ids;
}

struct TokenizeArgs {
    std::string tokenizer = "gpt2";
    std::string revision = "main";
    bool json = false;
    bool allow_special = false;
    int threads = 0;
};

}  // namespace

void register_tokenize(CLI::App& app, Runtime& rt) {
    auto a = std::make_shared<TokenizeArgs>();
    auto* tok_cmd = app.add_subcommand(
        "tokenize", "Encode stdin (all of it, as bytes) to token ids on stdout (no BOS/EOS is added)");
    tok_cmd->add_option("--tokenizer", a->tokenizer,
                        "gpt2, or a path: .tiktoken, tokenizer.json (GPT-2's or Llama 3's layout), a model directory "
                        "holding tokenizer.json, or a directory/prefix with vocab.json + merges.txt")
        ->capture_default_str();
    add_revision_option(*tok_cmd, &a->revision, "--revision", "--tokenizer");
    tok_cmd->add_flag("--json", a->json, "print one JSON array instead of one id per line");
    tok_cmd->add_flag("--allow-special", a->allow_special,
                      "recognise special tokens (gpt2: <|endoftext|> -> 50256; Llama 3: <|begin_of_text|> -> 128000, "
                      "...); without it they are ordinary text");
    tok_cmd->add_option("--threads", a->threads, "encoding threads (0 = all cores); the ids do not depend on it")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    tok_cmd->callback([a, &rt] {
        resolve_hub_options(a->revision, {&a->tokenizer}, "--revision", "--tokenizer");
        const auto tok = data::Tokenizer::load(a->tokenizer);
        const std::string text = read_stdin();
        const auto ids = data::encode_parallel(tok, text, a->allow_special, a->threads);
        fmt::memory_buffer out;
        if (a->json) {
            out.push_back('[');
            for (std::size_t i = 0; i < ids.size(); ++i) {
                if (i) out.push_back(',');
                fmt::format_to(std::back_inserter(out), "{}", ids[i]);
            }
            out.append(std::string_view("]\n"));
        } else {
            for (uint32_t id : ids) fmt::format_to(std::back_inserter(out), "{}\n", id);
        }
        write_stdout(std::string_view(out.data(), out.size()));
        rt.exit_code = 0;
    });

    auto b = std::make_shared<std::string>("gpt2");
    auto b_revision = std::make_shared<std::string>("main");
    auto* detok_cmd = app.add_subcommand(
        "detokenize", "Decode token ids on stdin (a JSON array or whitespace-separated) to bytes on stdout");
    detok_cmd->add_option("--tokenizer", *b, "gpt2, or a path (as for tokenize)")->capture_default_str();
    add_revision_option(*detok_cmd, b_revision.get(), "--revision", "--tokenizer");
    detok_cmd->callback([b, b_revision, &rt] {
        resolve_hub_options(*b_revision, {b.get()}, "--revision", "--tokenizer");
        const auto tok = data::Tokenizer::load(*b);
        const auto ids = parse_ids(read_stdin());
        write_stdout(tok.decode(ids));  // throws InputError naming an unknown id and its index
        rt.exit_code = 0;
    });
}

}  // namespace llmt::cli
