// hf_split_files (hf_files.h). A file's split is the first word of its name (split at '-', '_' or
// '.'; `train-00000-of-00004.parquet` is in `train`), or its folder's name when the name starts with
// a digit (`default/train/0000.parquet`). A snapshot's configs are its top-level folders other than
// `data`.
#include "data/tables/hf_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "core/check.h"
#include "core/error.h"
#include "core/hub_cache.h"
#include "core/json_parse.h"
#include "data/tables/table_reader.h"

namespace llmt::data {

namespace fs = std::filesystem;

namespace {

std::string join(const std::set<std::string>& s) {
    std::string out;
    for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
    return out.empty() ? "none" : out;
}

nlohmann::json read_json(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    LLMT_CHECK_AS(IoError, in.good(), "cannot read '{}'", p.string());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return parse_json(text, p.string());
}

std::string split_of(const fs::path& rel) {
    const std::string stem = rel.stem().string();
    if (!stem.empty() && !(stem[0] >= '0' && stem[0] <= '9')) return stem.substr(0, stem.find_first_of("-_."));
    return rel.has_parent_path() ? rel.parent_path().filename().string() : stem;
}

// A save_to_disk Dataset directory: the files state.json lists, in its order.
std::vector<fs::path> saved_dataset_files(const fs::path& dir) {
    const auto state = read_json(dir / "state.json");
    const auto it = state.find("_data_files");
    LLMT_CHECK_AS(FormatError, it != state.end() && it->is_array(),
                  "{}: no \"_data_files\" list (is this a save_to_disk directory?)", (dir / "state.json").string());
    std::vector<fs::path> out;
    for (const auto& f : *it) {
        LLMT_CHECK_AS(FormatError, f.is_object() && f.contains("filename") && f["filename"].is_string(),
                      "{}: a \"_data_files\" entry lacks a \"filename\" string", (dir / "state.json").string());
        const std::string name = f["filename"].get<std::string>();
        LLMT_CHECK_AS(FormatError, !name.empty() && name.find('/') == std::string::npos && name != "..",
                      "{}: data file name '{}' must be a plain file name in the directory",
                      (dir / "state.json").string(), name);
        out.push_back(dir / name);
    }
    LLMT_CHECK(!out.empty(), "{}: lists no data files", (dir / "state.json").string());
    return out;
}

std::vector<fs::path> snapshot_files(const fs::path& dir, const HfSelection& sel) {
    std::vector<fs::path> all;  // relative paths of table files
    std::error_code ec;
    fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec), end;
    LLMT_CHECK_AS(IoError, !ec, "cannot list directory '{}': {}", dir.string(), ec.message());
    for (; it != end; it.increment(ec)) {
        LLMT_CHECK_AS(IoError, !ec, "cannot list directory '{}': {}", dir.string(), ec.message());
        const std::string name = it->path().filename().string();
        if (!name.empty() && name[0] == '.') {
            if (it->is_directory()) it.disable_recursion_pending();
            continue;
        }
        if (it->is_regular_file() && is_table_file_name(it->path()))
            all.push_back(
                it->path().lexically_relative(dir));  // not fs::relative: it would resolve the blobs/ symlinks
    }
    LLMT_CHECK(!all.empty(), "'{}' holds no .parquet or .arrow files (hint: --format jsonl or text for other files)",
               dir.string());
    std::set<std::string> configs;
    bool has_default = false;
    for (const auto& r : all) {
        const auto first = r.begin()->string();
        if (r.has_parent_path() && first != "data") configs.insert(first);
        else has_default = true;
    }
    std::string config = sel.config;
    if (config.empty() && !has_default) {
        LLMT_CHECK(configs.size() == 1 || configs.count("default"),
                   "'{}' holds several configs ({}) and no default one (hint: --config-name NAME, data.config_name)",
                   dir.string(), join(configs));
        config = configs.size() == 1 ? *configs.begin() : "default";
    }
    if (!config.empty()) {
        LLMT_CHECK(configs.count(config), "'{}' has no config '{}' (configs: {})", dir.string(), config,
                   join(configs));
    }
    std::vector<fs::path> picked;
    std::set<std::string> splits;
    for (const auto& r : all) {
        const auto first = r.begin()->string();
        const bool in_config =
            config.empty() ? (!r.has_parent_path() || first == "data") : (r.has_parent_path() && first == config);
        if (!in_config) continue;
        const std::string s = split_of(r);
        splits.insert(s);
        if (s == sel.split) picked.push_back(r);
    }
    LLMT_CHECK(!picked.empty(), "'{}'{} has no split '{}' (splits found: {})", dir.string(),
               config.empty() ? "" : fmt::format(" config '{}'", config), sel.split, join(splits));
    std::sort(picked.begin(), picked.end(),
              [](const fs::path& a, const fs::path& b) { return a.generic_string() < b.generic_string(); });
    for (auto& p : picked) p = dir / p;
    return picked;
}

}  // namespace

bool is_hf_dataset_dir(const fs::path& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return false;
    if (is_hub_cache_repo(dir) || fs::exists(dir / "state.json", ec) || fs::exists(dir / "dataset_dict.json", ec))
        return true;
    fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
        if (it->is_regular_file() && is_table_file_name(it->path())) return true;
    }
    return false;
}

std::vector<fs::path> hf_split_files(const fs::path& input, const HfSelection& sel) {
    std::error_code ec;
    LLMT_CHECK(fs::exists(input, ec), "input '{}' does not exist", input.string());
    // A hub cache folder (or a snapshot of one): its files are symlinks into blobs/, followed while they
    // stay inside the folder (core/hub_cache.h).
    const fs::path dir = resolve_hub_path(input, sel.revision);
    if (fs::is_regular_file(dir, ec)) return {dir};
    LLMT_CHECK(fs::is_directory(dir, ec), "input '{}' is not a regular file or a directory", input.string());
    if (fs::exists(dir / "dataset_dict.json", ec)) {
        const auto dd = read_json(dir / "dataset_dict.json");
        std::set<std::string> splits;
        if (dd.contains("splits") && dd["splits"].is_array()) {
            for (const auto& s : dd["splits"])
                if (s.is_string()) splits.insert(s.get<std::string>());
        }
        LLMT_CHECK(splits.count(sel.split) && fs::is_directory(dir / sel.split, ec),
                   "'{}' has no split '{}' (splits found: {})", dir.string(), sel.split, join(splits));
        return saved_dataset_files(dir / sel.split);
    }
    if (fs::exists(dir / "state.json", ec)) return saved_dataset_files(dir);
    return snapshot_files(dir, sel);
}

std::vector<fs::path> hf_split_files(const std::vector<std::string>& inputs, const HfSelection& sel) {
    LLMT_CHECK(!inputs.empty(), "no input given (hint: --input DIR, a dataset directory)");
    std::vector<fs::path> out;
    bool any_cache = false;
    for (const auto& in : inputs) {
        auto files = hf_split_files(fs::path(in), sel);
        out.insert(out.end(), files.begin(), files.end());
        any_cache = any_cache || hub_cache_repo_of(in).has_value();
    }
    check_revision_used(sel.revision, any_cache, "data.revision (--revision)", "data.paths (--input)");
    return out;
}

}  // namespace llmt::data
