// prepare_cached (prepare_cache.h): key = sha256(options + input stat), directory per key.
#include "data/shards/prepare_cache.h"

#include <sys/stat.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/fs.h"
#include "core/json_parse.h"
#include "core/sha256.h"

namespace llmt::data {

namespace fs = std::filesystem;

namespace {

nlohmann::ordered_json stat_entry(const fs::path& p) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0)
        throw IoError(fmt::format("cannot stat '{}': {}", p.string(), std::strerror(errno)));
    const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
    return {{"path", fs::absolute(p).lexically_normal().string()},
            {"bytes", static_cast<uint64_t>(st.st_size)},
            {"mtime_ns", mtime_ns}};
}

}  // namespace

std::string prepare_cache_key(const PrepareOptions& opts) {
    nlohmann::ordered_json inputs = nlohmann::ordered_json::array();
    for (const auto& f : list_corpus_files(opts.inputs, opts.corpus)) inputs.push_back(stat_entry(f));
    std::error_code ec;
    const bool tokenizer_is_path = fs::exists(opts.tokenizer, ec);
    nlohmann::ordered_json key = {
        {"key_version", 1},
        {"format", format_name(opts.corpus.format)},
        {"text_field", opts.corpus.text_field},
        {"doc_separator", opts.corpus.doc_separator},
        {"tokenizer", opts.tokenizer},
        {"tokenizer_file", tokenizer_is_path ? stat_entry(opts.tokenizer) : nlohmann::ordered_json(nullptr)},
        {"val_fraction", opts.val_fraction},
        {"seed", opts.seed},
        {"shard_tokens", opts.shard_tokens},
        {"inputs", inputs}};
    if (opts.corpus.format == InputFormat::kHf) {  // text/JSONL keys stay as they were
        key["split"] = opts.corpus.hf.split;
        key["config_name"] = opts.corpus.hf.config;
        key["revision"] = opts.corpus.hf.revision;
    }
    return sha256_hex(key.dump());
}

CachedShards prepare_cached(PrepareOptions opts, const fs::path& cache_root) {
    CachedShards out;
    out.dir = cache_root / ("shards-" + prepare_cache_key(opts).substr(0, 24));
    const fs::path manifest = out.dir / "manifest.json";
    std::error_code ec;
    if (fs::exists(manifest, ec)) {
        try {
            out.manifest = parse_json(read_file(manifest), manifest.string());
            out.reused = true;
            return out;
        } catch (const JsonParseError&) {
            // An unreadable manifest (edited by hand?): prepare again, which replaces it.
        }
    }
    opts.out_dir = out.dir;
    out.manifest = prepare_shards(opts);
    return out;
}

}  // namespace llmt::data
