// `llmtrain data prepare` (corpus -> llm.c token shards + manifest) and `llmtrain data inspect`
// (check shards: header, size, every id; optionally decode them). docs/formats/shards.md, docs/data.md.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>
#include <optional>

#include "cli/command.h"
#include "cli/hub_revision.h"
#include "core/error.h"
#include "data/shards/prepare.h"
#include "data/shards/shard.h"
#include "data/tokenizer/tokenizer.h"
#include "storage/object_cache.h"
#include "storage/s3_client.h"
#include "storage/transfer.h"

namespace llmt::cli {
namespace {

struct PrepareArgs {
    std::vector<std::string> inputs;
    std::string format = "text";
    std::string text_field = "text";
    std::string split = "train";
    std::string config_name;
    std::string revision = "main";
    std::string tokenizer_revision = "main";
    std::string doc_separator = "blank";
    std::string tokenizer = "gpt2";
    std::string out;
    double val_fraction = 0.005;
    uint64_t shard_tokens = 100'000'000;
    int threads = 0;
    uint64_t seed = 0;
    std::string input_cache = "data/cache/s3";
    bool quiet = false;
    bool json = false;
};

// s3:// inputs (an object, or every object under a prefix) fetched into the cache; the local paths returned.
std::vector<std::string> localize_inputs(const PrepareArgs& a) {
    std::vector<std::string> out;
    std::unique_ptr<storage::S3Client> client;
    for (const auto& in : a.inputs) {
        if (!storage::is_s3_uri(in)) {
            out.push_back(in);
            continue;
        }
        if (!client) client = std::make_unique<storage::S3Client>(storage::s3_settings_from_environment());
        out.push_back(storage::fetch_cached(*client, storage::parse_s3_uri(in, "--input"), a.input_cache,
                                            storage::kDefaultPartBytes, "--input")
                          .string());
    }
    return out;
}

void add_prepare(CLI::App& data, Runtime& rt) {
    auto a = std::make_shared<PrepareArgs>();
    auto* cmd = data.add_subcommand("prepare",
                                    "Tokenize text/JSONL corpora or Hugging Face datasets (Parquet/Arrow) into llm.c "
                                    "token shards with a train/val split by document");
    cmd->add_option("--input", a->inputs,
                    "input files or directories (recursive; .gz is decompressed), or s3://bucket/key of an object or "
                    "of a prefix's objects (fetched into --input-cache); repeatable")
        ->required()
        ->expected(1, -1);
    cmd->add_option(
           "--format", a->format,
           "input format: text, jsonl, or hf (a Hugging Face dataset directory: Parquet/Arrow shards of a hub "
           "snapshot or cache folder, or a save_to_disk directory; docs/data.md)")
        ->check(CLI::IsMember({"text", "jsonl", "hf"}))
        ->capture_default_str();
    cmd->add_option("--text-field", a->text_field,
                    "jsonl: the string field holding each document; hf: the string column")
        ->capture_default_str();
    cmd->add_option("--split", a->split,
                    "hf: the split whose files are read (--val-fraction still divides its documents)")
        ->capture_default_str();
    cmd->add_option("--config-name", a->config_name,
                    "hf: the hub snapshot's <config>/ folder to read (default: data/ or the only one)");
    add_revision_option(*cmd, &a->revision, "--revision", "the --input folders");
    cmd->add_option("--doc-separator", a->doc_separator,
                    "text: 'blank' (a blank-line run ends a document), 'file' (one document per file), or a line that "
                    "separates documents, e.g. '%'")
        ->capture_default_str();
    cmd->add_option("--tokenizer", a->tokenizer,
                    "tokenizer: gpt2 or a path (.tiktoken, tokenizer.json, a model directory with tokenizer.json, "
                    "vocab.json+merges.txt); ids over 65535 are stored as uint32 (llm.c's 20240801 shards)")
        ->capture_default_str();
    cmd->add_option("--out", a->out,
                    "output directory (earlier train_*/val_* shards and manifest.json there are replaced)")
        ->required();
    cmd->add_option("--val-fraction", a->val_fraction,
                    "expected share of documents held out for validation, in [0, 1)")
        ->capture_default_str();
    cmd->add_option("--shard-tokens", a->shard_tokens, "tokens per shard file")->capture_default_str();
    cmd->add_option("--threads", a->threads, "encoding threads (0 = all cores)")->capture_default_str();
    cmd->add_option("--seed", a->seed, "seed of the train/val split")->capture_default_str();
    cmd->add_option("--input-cache", a->input_cache,
                    "where s3:// inputs are kept (<dir>/<bucket>/<key>; unchanged objects are not fetched again)")
        ->capture_default_str();
    add_revision_option(*cmd, &a->tokenizer_revision, "--tokenizer-revision", "--tokenizer");
    cmd->add_flag("--quiet", a->quiet, "no progress on stderr");
    cmd->add_flag("--json", a->json, "print the manifest as one JSON document on stdout");
    cmd->callback([a, &rt] {
        resolve_hub_options(a->tokenizer_revision, {&a->tokenizer}, "--tokenizer-revision", "--tokenizer");
        data::PrepareOptions o;
        o.inputs = localize_inputs(*a);
        o.corpus.format = data::parse_input_format(a->format);
        o.corpus.text_field = a->text_field;
        o.corpus.hf = {a->split, a->config_name, a->revision};
        o.corpus.doc_separator = a->doc_separator;
        o.tokenizer = a->tokenizer;
        o.out_dir = a->out;
        o.val_fraction = a->val_fraction;
        o.shard_tokens = a->shard_tokens;
        o.threads = a->threads;
        o.seed = a->seed;
        o.progress = !a->quiet;
        const auto m = data::prepare_shards(o);
        if (a->json) {
            fmt::print("{}\n", m.dump());
        } else {
            for (const char* s : {"train", "val"}) {
                const auto& sp = m["splits"][s];
                fmt::print("{:5}: {} documents, {} tokens, {} shard(s)\n", s, sp["documents"].get<uint64_t>(),
                           sp["tokens"].get<uint64_t>(), sp["shards"].size());
            }
            fmt::print("wrote {}/manifest.json\n", a->out);
        }
        rt.exit_code = 0;
    });
}

struct InspectArgs {
    std::vector<std::string> files;
    std::string shard_format = "llmc";
    std::string tokenizer = "gpt2";
    std::string revision = "main";
    std::size_t vocab_size = 0;
    bool decode = false;
    bool json = false;
};

void add_inspect(CLI::App& data, Runtime& rt) {
    auto a = std::make_shared<InspectArgs>();
    auto* cmd = data.add_subcommand(
        "inspect", "Check token shards (header, size, every id < vocab size); print counts or the decoded text");
    cmd->add_option("files", a->files, "shard files")->required()->expected(1, -1);
    cmd->add_option("--shard-format", a->shard_format, "llmc (256 x int32 header) or nanogpt (header-less uint16)")
        ->check(CLI::IsMember({"llmc", "nanogpt"}))
        ->capture_default_str();
    cmd->add_option("--tokenizer", a->tokenizer,
                    "tokenizer that gives the vocabulary size (and decodes with --decode)")
        ->capture_default_str();
    cmd->add_option("--vocab-size", a->vocab_size,
                    "check ids against this size instead of the tokenizer's (no tokenizer loaded)");
    cmd->add_flag("--decode", a->decode, "print the decoded text of the shards, in order, on stdout");
    cmd->add_flag("--json", a->json, "print one JSON document");
    add_revision_option(*cmd, &a->revision, "--revision", "--tokenizer");
    cmd->callback([a, &rt] {
        resolve_hub_options(a->revision, {&a->tokenizer}, "--revision", "--tokenizer");
        if (a->decode && a->vocab_size) throw UsageError("--decode needs a tokenizer; drop --vocab-size");
        std::optional<data::Tokenizer> tok;
        std::size_t vocab = a->vocab_size;
        if (!vocab) {
            tok.emplace(data::Tokenizer::load(a->tokenizer));
            vocab = tok->vocab_size();
        }
        const auto fmt_kind = data::parse_shard_format(a->shard_format);
        nlohmann::ordered_json out = nlohmann::ordered_json::array();
        for (const auto& f : a->files) {
            auto s = data::Shard::open(f, fmt_kind, vocab);
            s.validate();
            if (a->decode) {
                std::vector<uint32_t> ids(s.size());
                for (std::size_t i = 0; i < s.size(); ++i) ids[i] = s.at(i);
                const std::string text = tok->decode(ids);
                std::fwrite(text.data(), 1, text.size(), stdout);
                continue;
            }
            std::size_t eots = 0;
            if (tok) {
                for (std::size_t i = 0; i < s.size(); ++i) eots += s.at(i) == tok->eot_token();
            }
            out.push_back(
                {{"file", f}, {"tokens", s.size()}, {"token_bytes", s.token_bytes()}, {"vocab_size", vocab}});
            if (tok) out.back()["eot_tokens"] = eots;
            if (!a->json) {
                fmt::print("{}: {} tokens (uint{}), all ids < {}{}\n", f, s.size(), 8 * s.token_bytes(), vocab,
                           tok ? fmt::format(", {} end-of-text tokens", eots) : "");
            }
        }
        if (a->json && !a->decode) fmt::print("{}\n", out.dump());
        rt.exit_code = 0;
    });
}

}  // namespace

void register_data(CLI::App& app, Runtime& rt) {
    auto* data = app.add_subcommand("data", "Prepare and inspect token shards; tokenize chat data");
    data->require_subcommand(1);
    add_prepare(*data, rt);
    add_inspect(*data, rt);
    register_data_chat(*data, rt);
}

}  // namespace llmt::cli
