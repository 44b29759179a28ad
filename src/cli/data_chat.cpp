// `llmtrain data chat` (tokenize chat JSONL into the cache that data.source: chat reads, check every line,
// report the rows a block size gives) and `llmtrain data chat-example` (the worked example's chat JSONL
// from the default corpus). docs/formats/chat_jsonl.md.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <memory>

#include "cli/command.h"
#include "cli/hub_revision.h"
#include "core/fs.h"
#include "data/chat/chat_cache.h"
#include "data/chat/chat_example.h"
#include "data/chat/chat_rows.h"

namespace llmt::cli {
namespace {

struct ChatArgs {
    std::vector<std::string> inputs;
    std::string tokenizer;
    std::string revision = "main", tokenizer_revision = "main";
    std::string cache_dir = "data/cache";
    double val_fraction = 0.005;
    uint64_t seed = 1337;
    int block_size = 1024;
    bool packing = false;
    bool json = false;
};

nlohmann::json split_report(const data::ChatData& d, const std::vector<uint32_t>& split, int T, bool packing) {
    const data::ChatRows rows(*d.examples, split, T, packing);
    const auto& s = rows.stats();
    return {{"examples", s.examples}, {"truncated", s.truncated}, {"dropped", s.dropped}, {"rows", s.rows},
            {"slots", s.slots},       {"targets", s.targets},     {"summary", s.summary(T)}};
}

void add_chat(CLI::App& data, Runtime& rt) {
    auto a = std::make_shared<ChatArgs>();
    auto* cmd = data.add_subcommand("chat", "Tokenize chat JSONL (messages or prompt/completion) with a model's chat "
                                            "template into the cache that data.source: chat reads; check every line");
    cmd->add_option("--input", a->inputs, "JSONL files or directories (data.paths); repeatable")
        ->required()
        ->expected(1, -1);
    cmd->add_option("--tokenizer", a->tokenizer,
                    "a model directory with tokenizer.json and tokenizer_config.json (data.tokenizer)")
        ->required();
    cmd->add_option("--cache-dir", a->cache_dir, "cache root (data.cache_dir)")->capture_default_str();
    cmd->add_option("--val-fraction", a->val_fraction, "expected share of conversations held out (data.val_fraction)")
        ->capture_default_str();
    cmd->add_option("--seed", a->seed, "seed of the split (run.seed)")->capture_default_str();
    cmd->add_option("--block-size", a->block_size,
                    "row length T the report lays the examples out in (model.block_size)")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    cmd->add_flag("--packing", a->packing, "report packed rows (data.packing: true)");
    cmd->add_flag("--json", a->json, "print one JSON document");
    add_revision_option(*cmd, &a->revision, "--revision", "the --input folders (data.revision)");
    add_revision_option(*cmd, &a->tokenizer_revision, "--tokenizer-revision", "--tokenizer (model.revision)");
    cmd->callback([a, &rt] {
        resolve_hub_options(a->tokenizer_revision, {&a->tokenizer}, "--tokenizer-revision", "--tokenizer");
        const data::ChatData d =
            data::open_chat_data({a->inputs, a->tokenizer, a->cache_dir, a->val_fraction, a->seed, a->revision});
        nlohmann::json out = {{"cache_dir", d.dir.string()},
                              {"reused", d.reused},
                              {"examples", d.examples->size()},
                              {"tokens", d.examples->tokens.size()},
                              {"train", split_report(d, d.train, a->block_size, a->packing)}};
        if (!d.val.empty()) out["val"] = split_report(d, d.val, a->block_size, a->packing);
        if (a->json) {
            fmt::print("{}\n", out.dump());
        } else {
            fmt::print("{} {} conversations ({} tokens) in {}\n", d.reused ? "reusing" : "tokenized",
                       d.examples->size(), d.examples->tokens.size(), d.dir.string());
            fmt::print("train: {}\n", out["train"]["summary"].get<std::string>());
            if (!d.val.empty()) fmt::print("val:   {}\n", out["val"]["summary"].get<std::string>());
        }
        rt.exit_code = 0;
    });
}

struct ExampleArgs {
    std::string corpus = "data/corpus";
    std::string out;
    std::size_t conversations = 3000;
    uint64_t seed = 0;
};

void add_chat_example(CLI::App& data, Runtime& rt) {
    auto a = std::make_shared<ExampleArgs>();
    auto* cmd = data.add_subcommand("chat-example", "Write the worked example's chat JSONL: questions and answers "
                                                    "built from the default corpus (deterministic for a seed)");
    cmd->add_option("--corpus", a->corpus, "the corpus directory (scripts/make_corpus.sh)")->capture_default_str();
    cmd->add_option("--out", a->out, "the JSONL file to write (replaced atomically)")->required();
    cmd->add_option("--conversations", a->conversations, "how many")
        ->check(CLI::Range(1, 10000000))
        ->capture_default_str();
    cmd->add_option("--seed", a->seed, "which verses, fortunes and question kinds")->capture_default_str();
    cmd->callback([a, &rt] {
        const std::string text = data::make_chat_example({a->corpus, a->conversations, a->seed});
        const std::filesystem::path out(a->out);
        if (out.has_parent_path()) make_dirs(out.parent_path());
        write_file_atomic(out, text);
        fmt::print("wrote {} conversations to {}\n", a->conversations, a->out);
        rt.exit_code = 0;
    });
}

}  // namespace

void register_data_chat(CLI::App& data, Runtime& rt) {
    add_chat(data, rt);
    add_chat_example(data, rt);
}

}  // namespace llmt::cli
