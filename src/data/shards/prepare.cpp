// prepare_shards (prepare.h): read documents in order, encode them in batches on all threads,
// write `<|endoftext|>` + tokens of each to its split's ShardWriter, then the manifest.
#include "data/shards/prepare.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <regex>

#include "core/check.h"
#include "core/error.h"
#include "core/fs.h"
#include "data/shards/prepare_progress.h"
#include "data/shards/shard_writer.h"
#include "data/tokenizer/tokenizer.h"

namespace llmt::data {

namespace fs = std::filesystem;

namespace {

// splitmix64 finalizer; see loader.cpp. Kept separate: the split must never change if the loader's
// shuffle does.
uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t doc_hash(uint64_t doc_index, uint64_t seed) { return mix64(mix64(seed ^ 0x5d0c5b1e7a11d0c5ULL) ^ doc_index); }

// Text gathered before one encode_batch call: large enough to keep every thread busy.
constexpr std::size_t kBatchBytes = std::size_t{8} << 20;
// A single document this large is encoded with encode_parallel (e.g. --doc-separator file on a big file).
constexpr std::size_t kHugeDocBytes = std::size_t{16} << 20;

struct InputInfo {
    std::string path;
    uint64_t bytes = 0;
    std::string sha256;
};

struct PassResult {
    std::vector<InputInfo> inputs;
    uint64_t docs[2] = {0, 0};  // train, val
    std::vector<ShardInfo> shards[2];
    uint64_t tokens[2] = {0, 0};
    uint64_t min_hash_doc = 0;  // the document with the smallest hash (fallback val document)
    uint64_t total_docs = 0;
};

void remove_old_outputs(const fs::path& dir) {
    static const std::regex kOurs(R"((train|val)_\d{6}\.bin(\.tmp\.\d+)?|manifest\.json)");
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        if (std::regex_match(e.path().filename().string(), kOurs)) fs::remove(e.path());
    }
    LLMT_CHECK_AS(IoError, !ec, "cannot list output directory '{}': {}", dir.string(), ec.message());
}

struct DocumentFrame {
    std::vector<uint32_t> before, after;
};
DocumentFrame document_frame(const Tokenizer& tok) {
    if (!tok.prefix_tokens().empty() || !tok.suffix_tokens().empty())
        return {tok.prefix_tokens(), tok.suffix_tokens()};
    return {{tok.eot_token()}, {}};
}

std::string describe_frame(const Tokenizer& tok) {
    const DocumentFrame f = document_frame(tok);
    auto names = [&](const std::vector<uint32_t>& ids) {
        std::string s;
        for (uint32_t id : ids) s += std::string(tok.token_bytes(id));
        return s;
    };
    if (f.after.empty()) return fmt::format("each document is {} followed by its tokens", names(f.before));
    if (f.before.empty()) return fmt::format("each document is its tokens followed by {}", names(f.after));
    return fmt::format("each document is {}, its tokens, then {}", names(f.before), names(f.after));
}

PassResult run_pass(const PrepareOptions& opts, const Tokenizer& tok, const std::vector<fs::path>& files,
                    uint64_t total_bytes, std::optional<uint64_t> forced_val, const std::string& label) {
    PassResult r;
    remove_old_outputs(opts.out_dir);
    ShardWriter writers[2] = {ShardWriter(opts.out_dir, "train", opts.shard_tokens, tok.vocab_size()),
                              ShardWriter(opts.out_dir, "val", opts.shard_tokens, tok.vocab_size())};
    // Each document: the post-processor's tokens around it where the tokenizer.json has one (Llama 3.1:
    // <|begin_of_text|> first, as Hugging Face's encode(add_special_tokens=True) gives and llm.c's
    // LLaMA 3 data has it), else the end-of-text token before it (GPT-2's layout, as llm.c's).
    const DocumentFrame frame = document_frame(tok);
    Progress progress(label, total_bytes, ::isatty(::fileno(stderr)) != 0, opts.progress ? stderr : nullptr);
    uint64_t min_hash = std::numeric_limits<uint64_t>::max();
    uint64_t bytes_before = 0;  // raw bytes of the files already finished

    std::vector<std::string> batch;
    std::size_t batch_bytes = 0;
    auto flush = [&] {
        if (batch.empty()) return;
        std::vector<std::vector<uint32_t>> ids;
        if (batch.size() == 1 && batch[0].size() >= kHugeDocBytes) {
            ids.push_back(encode_parallel(tok, batch[0], false, opts.threads));
        } else {
            std::vector<std::string_view> views(batch.begin(), batch.end());
            ids = encode_batch(tok, views, false, opts.threads);
        }
        for (auto& doc_ids : ids) {
            const uint64_t d = r.total_docs++;
            const uint64_t h = doc_hash(d, opts.seed);
            if (h < min_hash) {
                min_hash = h;
                r.min_hash_doc = d;
            }
            const int split =
                (forced_val && *forced_val == d) || is_val_document(d, opts.seed, opts.val_fraction) ? 1 : 0;
            writers[split].append(frame.before);
            writers[split].append(doc_ids);
            writers[split].append(frame.after);
            r.docs[split]++;
        }
        batch.clear();
        batch_bytes = 0;
    };

    for (const auto& f : files) {
        DocumentReader reader(f, opts.corpus);
        std::string doc;
        while (reader.next(doc)) {
            batch_bytes += doc.size();
            batch.push_back(std::move(doc));
            doc = std::string();
            if (batch_bytes >= kBatchBytes || batch.back().size() >= kHugeDocBytes) {
                flush();
                progress.update(bytes_before + reader.raw_bytes_read());
            }
        }
        flush();
        InputInfo info{f.string(), 0, reader.sha256_hex()};
        info.bytes = reader.raw_bytes_read();
        bytes_before += info.bytes;
        progress.update(bytes_before);
        r.inputs.push_back(std::move(info));
    }
    for (int s = 0; s < 2; ++s) {
        r.tokens[s] = writers[s].tokens_written();
        r.shards[s] = writers[s].finish();
    }
    progress.finish(fmt::format("{} documents, {} train + {} val tokens", r.total_docs, r.tokens[0], r.tokens[1]));
    return r;
}

}  // namespace

bool is_val_document(uint64_t doc_index, uint64_t seed, double val_fraction) {
    if (val_fraction <= 0) return false;
    const double u = static_cast<double>(doc_hash(doc_index, seed) >> 11) * 0x1.0p-53;
    return u < val_fraction;
}

nlohmann::ordered_json prepare_shards(const PrepareOptions& opts) {
    LLMT_CHECK(opts.val_fraction >= 0 && opts.val_fraction < 1 && !std::isnan(opts.val_fraction),
               "--val-fraction {} is out of range: expected a number in [0, 1)", opts.val_fraction);
    LLMT_CHECK(opts.shard_tokens >= 1 && opts.shard_tokens <= 2147483647ULL,
               "--shard-tokens {} is out of range: expected 1 .. 2147483647 (the llm.c header's count is an int32)",
               opts.shard_tokens);
    LLMT_CHECK(opts.threads >= 0, "--threads {} must be >= 0 (0 = all cores)", opts.threads);
    LLMT_CHECK(!opts.out_dir.empty(), "--out DIR is required");
    const auto files = list_corpus_files(opts.inputs, opts.corpus);
    uint64_t total_bytes = 0;
    for (const auto& f : files) total_bytes += fs::file_size(f);
    const Tokenizer tok = Tokenizer::load(opts.tokenizer);
    make_dirs(opts.out_dir);

    PassResult r = run_pass(opts, tok, files, total_bytes, std::nullopt, "data prepare");
    LLMT_CHECK(r.total_docs > 0, "the {} input file(s) hold no documents (all empty?)", files.size());
    if (opts.val_fraction > 0 && r.docs[1] == 0) {
        LLMT_CHECK(
            r.total_docs >= 2,
            "the inputs hold only 1 document, which cannot be split into train and val (hint: --val-fraction 0, "
            "or more "
            "documents: see --doc-separator)");
        if (opts.progress) {
            fmt::print(
                stderr,
                "data prepare: no document fell in val at --val-fraction {}; moving document {} there (second pass)\n",
                opts.val_fraction, r.min_hash_doc);
        }
        r = run_pass(opts, tok, files, total_bytes, r.min_hash_doc, "data prepare (pass 2)");
    }

    nlohmann::ordered_json inputs = nlohmann::ordered_json::array();
    for (const auto& in : r.inputs) inputs.push_back({{"path", in.path}, {"bytes", in.bytes}, {"sha256", in.sha256}});
    nlohmann::ordered_json splits = nlohmann::ordered_json::object();
    const char* names[2] = {"train", "val"};
    for (int s = 0; s < 2; ++s) {
        nlohmann::ordered_json shards = nlohmann::ordered_json::array();
        for (const auto& sh : r.shards[s])
            shards.push_back({{"file", sh.file}, {"tokens", sh.tokens}, {"bytes", sh.bytes}});
        splits[names[s]] = {{"documents", r.docs[s]}, {"tokens", r.tokens[s]}, {"shards", shards}};
    }
    const bool text = opts.corpus.format == InputFormat::kText;
    const char* separator = text ? opts.corpus.doc_separator.c_str() : nullptr;
    const bool hf = opts.corpus.format == InputFormat::kHf;
    nlohmann::ordered_json m = {
        {"format", "llmtrain-shards"},
        {"version", 1},
        {"tokenizer",
         {{"spec", opts.tokenizer},
          {"sha256", tok.source_sha256()},
          {"vocab_size", tok.vocab_size()},
          {"eot", tok.eot_token()},
          {"document_prefix", document_frame(tok).before},
          {"document_suffix", document_frame(tok).after}}},
        {"token_dtype", tok.vocab_size() <= 65536 ? "uint16" : "uint32"},
        {"document_layout", describe_frame(tok)},
        {"options",
         {{"format", format_name(opts.corpus.format)},
          {"text_field", !text ? nlohmann::ordered_json(opts.corpus.text_field) : nullptr},
          {"doc_separator", separator ? nlohmann::ordered_json(separator) : nullptr},
          {"val_fraction", opts.val_fraction},
          {"seed", opts.seed},
          {"shard_tokens", opts.shard_tokens}}},
        {"inputs", inputs},
        {"splits", splits}};
    if (hf) {  // which part of the dataset directories the documents came from
        m["options"]["split"] = opts.corpus.hf.split;
        m["options"]["config_name"] = opts.corpus.hf.config.empty() ? nlohmann::ordered_json(nullptr)
                                                                    : nlohmann::ordered_json(opts.corpus.hf.config);
        m["options"]["revision"] = opts.corpus.hf.revision;
    }
    write_file_atomic(opts.out_dir / "manifest.json", m.dump(2) + "\n");
    return m;
}

}  // namespace llmt::data
