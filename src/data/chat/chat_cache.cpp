// open_chat_data (chat_cache.h): hash the inputs, read the cache or tokenize into it, split by example.
#include "data/chat/chat_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <iterator>
#include <thread>

#include "core/check.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/hub_cache.h"
#include "core/json_parse.h"
#include "core/sha256.h"
#include "data/chat/chat_records.h"
#include "data/chat/chat_table.h"
#include "data/tables/table_reader.h"
#include "data/shards/corpus.h"
#include "data/shards/prepare.h"

namespace llmt::data {

namespace fs = std::filesystem;

namespace {

constexpr int kKeyVersion = 1;

struct Inputs {
    std::vector<fs::path> files;
    nlohmann::ordered_json key;  // what the cache key hashes
};

// Everything the tokens depend on, by content: each input file, the tokenizer, the template.
Inputs describe_inputs(const ChatDataOptions& opts, const Tokenizer& tok, const fs::path& template_file) {
    Inputs in;
    in.files = chat_input_files(opts.paths, opts.revision);
    nlohmann::ordered_json files = nlohmann::ordered_json::array();
    for (const auto& f : in.files) files.push_back({{"path", f.string()}, {"sha256", sha256_file(f)}});
    in.key = {{"key_version", kKeyVersion},
              {"inputs", files},
              {"tokenizer", {{"path", tok.source_path()}, {"sha256", tok.source_sha256()}}},
              {"template", {{"path", template_file.string()}, {"sha256", sha256_file(template_file)}}}};
    return in;
}

// The content of the key: paths are recorded in the manifest but do not change the tokens.
std::string key_of(const nlohmann::ordered_json& described) {
    nlohmann::ordered_json k = described;
    for (auto& f : k["inputs"]) f.erase("path");
    k["tokenizer"].erase("path");
    k["template"].erase("path");
    return sha256_hex(k.dump());
}

// Every record of every file, tokenized on all cores (the tokenizer's const methods are thread-safe),
// appended in input order. Every file is parsed before any is tokenized, so a malformed line fails fast.
ChatDataset tokenize_files(const std::vector<fs::path>& files, const ChatTemplate& tmpl, const Tokenizer& tok) {
    std::vector<ChatRecord> records;
    for (const auto& f : files) {
        auto recs = is_table_file_name(f) ? read_chat_table(f) : parse_chat_jsonl(read_file(f), f.string());
        std::move(recs.begin(), recs.end(), std::back_inserter(records));
    }
    std::vector<TokenizedChat> tokenized(records.size());
    const std::size_t n_threads = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 64);
    std::vector<std::exception_ptr> errors(n_threads);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < n_threads; ++t) {
        threads.emplace_back([&, t] {
            try {
                for (std::size_t i = t; i < records.size(); i += n_threads)
                    tokenized[i] = tokenize_chat(tmpl, tok, records[i].messages);
            } catch (...) {
                errors[t] = std::current_exception();
            }
        });
    }
    for (auto& th : threads) th.join();
    for (const auto& e : errors)
        if (e) std::rethrow_exception(e);
    ChatDataset ds;
    for (const auto& t : tokenized) ds.append(t);
    return ds;
}

nlohmann::json build_manifest(const nlohmann::ordered_json& described, const std::string& key,
                              const ChatTemplate& tmpl, const ChatDataset& ds) {
    std::size_t assistant = 0;
    for (uint8_t a : ds.assistant) assistant += a;
    nlohmann::json m = nlohmann::json::parse(described.dump());
    m["kind"] = "llmtrain.chat_cache";
    m["key"] = key;
    m["template"]["format"] = tmpl.format_name();
    m["examples"] = ds.size();
    m["tokens"] = ds.tokens.size();
    m["assistant_tokens"] = assistant;
    return m;
}

void split(ChatData& d, const ChatDataOptions& opts) {
    const std::size_t n = d.examples->size();
    for (std::size_t i = 0; i < n; ++i)
        (is_val_document(i, opts.seed, opts.val_fraction) ? d.val : d.train).push_back(static_cast<uint32_t>(i));
    if (d.val.empty() && opts.val_fraction > 0 && n >= 2) {
        d.val.push_back(d.train.back());
        d.train.pop_back();
    }
    LLMT_CHECK(!d.train.empty(), "chat data: {} example(s) in {}, none left for training after data.val_fraction {}",
               n, d.dir.string(), opts.val_fraction);
}

}  // namespace

fs::path chat_template_file(const std::string& tokenizer_spec) {
    std::error_code ec;
    const fs::path p = resolve_hub_path(tokenizer_spec);
    if (fs::is_directory(p, ec)) return p / "tokenizer_config.json";
    if (p.extension() == ".json")
        return (p.has_parent_path() ? p.parent_path() : fs::path(".")) / "tokenizer_config.json";
    throw InputError(
        fmt::format("data.tokenizer \"{}\": data.source chat needs a model directory holding tokenizer.json "
                    "and tokenizer_config.json (the chat template), or a tokenizer.json with "
                    "tokenizer_config.json beside it",
                    tokenizer_spec));
}

ChatData open_chat_data(const ChatDataOptions& opts) {
    LLMT_CHECK(opts.val_fraction >= 0 && opts.val_fraction < 1,
               "data.val_fraction {} is out of range: expected [0, 1)", opts.val_fraction);
    const fs::path template_file = chat_template_file(opts.tokenizer);
    const ChatTemplate tmpl = ChatTemplate::load(template_file.string());
    const Tokenizer tok = Tokenizer::load(opts.tokenizer);
    const Inputs in = describe_inputs(opts, tok, template_file);

    ChatData d;
    d.key = key_of(in.key);
    d.dir = opts.cache_dir / ("chat-" + d.key.substr(0, 24));
    d.pad_id = tok.eot_token();
    d.vocab_size = tok.vocab_size();
    const fs::path manifest = d.dir / "manifest.json", examples = d.dir / "examples.bin";
    std::error_code ec;
    if (fs::exists(manifest, ec)) {
        try {
            d.manifest = parse_json(read_file(manifest), manifest.string());
            d.examples = std::make_shared<const ChatDataset>(read_chat_dataset(examples));
            d.reused = true;
        } catch (const FormatError&) {
            // A damaged cache (a truncated examples.bin, a manifest edited by hand): build it again.
        }
    }
    if (!d.reused) {
        auto ds = std::make_shared<const ChatDataset>(tokenize_files(in.files, tmpl, tok));
        LLMT_CHECK(ds->size() > 0, "chat data: data.paths hold no records (every file is empty)");
        d.manifest = build_manifest(in.key, d.key, tmpl, *ds);
        make_dirs(d.dir);
        write_chat_dataset(examples, *ds);
        write_file_atomic(manifest, d.manifest.dump(2) + "\n");  // last: its presence means a complete cache
        d.examples = std::move(ds);
    }
    split(d, opts);
    return d;
}

}  // namespace llmt::data
