#include "models/hf_weights.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <set>

#include "core/bf16.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/json_parse.h"
#include "core/safetensors_integrity.h"

namespace llmt::models {

namespace fs = std::filesystem;

namespace {

// A shard named by an index must be a plain file name beside it: an index is input we did not write, and
// "../../secret" must not make us open files outside the model directory.
bool plain_shard_name(const std::string& s) {
    return !s.empty() && s.find('/') == std::string::npos && s.find('\\') == std::string::npos && s != "." &&
           s != ".." && s.size() > 12 && s.compare(s.size() - 12, 12, ".safetensors") == 0;
}

}  // namespace

HfWeights HfWeights::open(const fs::path& path, bool verify) {
    HfWeights w;
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
        if (fs::exists(path / kHfIndexFile, ec)) {
            w.source_ = path / kHfIndexFile;
        } else if (fs::exists(path / kHfWeightsFile, ec)) {
            w.source_ = path / kHfWeightsFile;
        } else {
            throw InputError(fmt::format("'{}' has neither {} nor {} (a Hugging Face model directory has one)",
                                         path.string(), kHfWeightsFile, kHfIndexFile));
        }
    } else {
        if (!fs::exists(path, ec))
            throw InputError(fmt::format("'{}' does not exist (expected a .safetensors file or a model directory)",
                                         path.string()));
        w.source_ = path;
    }
    const std::string src = w.source_.string();
    w.sharded_ = w.source_.filename() == kHfIndexFile;
    if (!w.sharded_) {
        w.shards_.push_back(SafetensorsFile::open(w.source_));
        for (const auto& n : w.shards_[0].names()) w.shard_of_.emplace(n, 0);
    } else {
        const nlohmann::json index = parse_json(read_file(w.source_, std::size_t{64} << 20), src,
                                                JsonLimits{.max_bytes = std::size_t{64} << 20, .max_depth = 8});
        if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
            throw FormatError(fmt::format("{}: expected an object with a \"weight_map\" object (tensor name -> shard "
                                          "file)",
                                          src));
        // Shards in order of first mention; parse_json already refused a tensor named twice in the map.
        std::map<std::string, std::size_t> shard_index;
        std::vector<std::string> shard_names;
        std::map<std::string, std::string> listed;  // tensor -> shard file
        for (const auto& [tensor, file] : index["weight_map"].items()) {
            if (!file.is_string() || !plain_shard_name(file.get<std::string>()))
                throw FormatError(fmt::format("{}: weight_map[\"{}\"]: expected a .safetensors file name in the same "
                                              "directory, found {}",
                                              src, tensor, file.dump()));
            const std::string f = file.get<std::string>();
            if (shard_index.emplace(f, shard_names.size()).second) shard_names.push_back(f);
            listed.emplace(tensor, f);
        }
        if (listed.empty()) throw FormatError(fmt::format("{}: the weight_map lists no tensors", src));
        const fs::path dir = w.source_.parent_path();
        for (const auto& f : shard_names) {
            if (!fs::is_regular_file(dir / f, ec))
                throw FormatError(fmt::format("{}: shard '{}' is missing (expected {})", src, f, (dir / f).string()));
            w.shards_.push_back(SafetensorsFile::open(dir / f));
        }
        for (const auto& [tensor, f] : listed) {
            const std::size_t k = shard_index.at(f);
            if (!w.shards_[k].contains(tensor))
                throw FormatError(fmt::format("{}: tensor '{}' is listed in shard '{}', which does not hold it", src,
                                              tensor, f));
            w.shard_of_.emplace(tensor, k);
        }
        for (std::size_t k = 0; k < w.shards_.size(); ++k)
            for (const auto& n : w.shards_[k].names()) {
                auto it = listed.find(n);
                if (it == listed.end())
                    throw FormatError(
                        fmt::format("{}: shard '{}' holds tensor '{}', which the weight_map does not list", src,
                                    shard_names[k], n));
                if (it->second != shard_names[k])
                    throw FormatError(fmt::format("{}: tensor '{}' is in shard '{}' and in shard '{}' (the weight_map "
                                                  "names '{}'); a tensor must be in one shard",
                                                  src, n, shard_names[k], it->second, it->second));
            }
    }
    if (verify)
        for (const auto& s : w.shards_) verify_tensors(s, Checksums::kIfPresent);
    return w;
}

std::vector<std::string> HfWeights::names() const {
    std::vector<std::string> out;
    out.reserve(shard_of_.size());
    for (const auto& [n, k] : shard_of_) out.push_back(n);
    return out;
}

const SafetensorsFile& HfWeights::shard(std::string_view name) const {
    auto it = shard_of_.find(name);
    if (it == shard_of_.end())
        throw FormatError(fmt::format("{}: no tensor '{}'", source_.string(), name));
    return shards_[it->second];
}

const TensorInfo& HfWeights::info(std::string_view name) const { return shard(name).info(name); }
const std::string& HfWeights::file_of(std::string_view name) const { return shard(name).path(); }

void HfWeights::read_f32(std::string_view name, float* dst, const Shape& expected_shape) const {
    shard(name).read_f32(name, dst, expected_shape);  // its errors name the shard file and the tensor
}

// ---- writing ----

namespace {

std::uint64_t numel(const Shape& s) {
    std::uint64_t n = 1;
    for (auto d : s) n *= static_cast<std::uint64_t>(d);
    return n;
}

// Writes one file of tensors, converting to bf16 when asked (one file's worth of bf16 at a time).
void write_file(const fs::path& path, const std::vector<const HfTensor*>& tensors, const HfWriteOptions& o) {
    std::vector<std::vector<std::uint16_t>> bf16(o.dtype == HfDType::kBF16 ? tensors.size() : 0);
    std::vector<TensorRef> refs;
    refs.reserve(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const HfTensor& t = *tensors[i];
        if (o.dtype == HfDType::kF32) {
            refs.push_back({t.name, StDType::kF32, t.shape, t.data});
            continue;
        }
        auto& b = bf16[i];
        b.resize(numel(t.shape));
        for (std::size_t k = 0; k < b.size(); ++k) b[k] = bf16_from_float(t.data[k]);
        refs.push_back({t.name, StDType::kBF16, t.shape, b.data()});
    }
    auto meta = o.metadata;
    meta["format"] = "pt";  // transformers refuses safetensors metadata without a known format
    write_safetensors(path, refs, meta);
}

}  // namespace

std::vector<std::string> write_hf_weights(const fs::path& dir, const std::vector<HfTensor>& tensors,
                                          const HfWriteOptions& o) {
    if (tensors.empty()) throw InputError(fmt::format("writing weights into '{}': no tensors", dir.string()));
    std::set<std::string> seen;
    const std::uint64_t elem = o.dtype == HfDType::kBF16 ? 2 : 4;
    std::uint64_t total = 0, params = 0;
    for (const auto& t : tensors) {
        if (t.name.empty() || !seen.insert(t.name).second)
            throw InputError(fmt::format("writing weights into '{}': tensor name '{}' is empty or given twice",
                                         dir.string(), t.name));
        for (auto d : t.shape)
            if (d < 0) throw InputError(fmt::format("writing '{}': negative shape {}", t.name, shape_str(t.shape)));
        if (t.data == nullptr && numel(t.shape) > 0)
            throw InputError(fmt::format("writing weights into '{}': tensor '{}' has no data", dir.string(), t.name));
        total += numel(t.shape) * elem;
        params += numel(t.shape);
    }
    if (total <= o.max_shard_bytes) {
        std::vector<const HfTensor*> all;
        for (const auto& t : tensors) all.push_back(&t);
        write_file(dir / kHfWeightsFile, all, o);
        return {std::string(kHfWeightsFile)};
    }
    // Greedy in the given order, as huggingface_hub's split_torch_state_dict_into_shards does.
    std::vector<std::vector<const HfTensor*>> shards(1);
    std::uint64_t in_shard = 0;
    for (const auto& t : tensors) {
        const std::uint64_t bytes = numel(t.shape) * elem;
        if (!shards.back().empty() && in_shard + bytes > o.max_shard_bytes) {
            shards.emplace_back();
            in_shard = 0;
        }
        shards.back().push_back(&t);
        in_shard += bytes;
    }
    std::vector<std::string> files;
    nlohmann::json weight_map = nlohmann::json::object();  // sorted by tensor name, as transformers writes it
    for (std::size_t k = 0; k < shards.size(); ++k) {
        const std::string name = fmt::format("model-{:05d}-of-{:05d}.safetensors", k + 1, shards.size());
        write_file(dir / name, shards[k], o);
        for (const auto* t : shards[k]) weight_map[t->name] = name;
        files.push_back(name);
    }
    const nlohmann::json index = {{"metadata", {{"total_size", total}, {"total_parameters", params}}},
                                  {"weight_map", weight_map}};
    write_file_atomic(dir / kHfIndexFile, index.dump(2) + "\n");
    files.emplace_back(kHfIndexFile);
    return files;
}

// ---- the export directory ----

namespace {

bool export_file(const std::string& n) {
    static const std::set<std::string> kFiles = {"config.json",          "generation_config.json",
                                                 std::string(kHfIndexFile), "tokenizer.json",
                                                 "tokenizer_config.json", "special_tokens_map.json",
                                                 "chat_template.jinja"};
    if (kFiles.count(n)) return true;
    return n.rfind("model", 0) == 0 && n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0;
}

}  // namespace

HfExportDir::HfExportDir(fs::path target) : target_(std::move(target)) {
    if (target_.filename().empty()) target_ = target_.parent_path();  // "out/" is "out"
    const std::string name = target_.filename().string();
    if (name.empty() || name == "." || name == "..")
        throw InputError(fmt::format("--out '{}': expected a directory name (the export replaces the directory as a "
                                     "whole)",
                                     target_.string()));
    std::error_code ec;
    if (fs::exists(fs::symlink_status(target_, ec))) {
        if (!fs::is_directory(fs::symlink_status(target_, ec)))
            throw InputError(fmt::format("--out '{}' exists and is not a directory", target_.string()));
        for (const auto& e : fs::directory_iterator(target_)) {
            const std::string n = e.path().filename().string();
            if (!e.is_regular_file() || !export_file(n))
                throw InputError(fmt::format("--out '{}' holds '{}', which an export does not write; refusing to "
                                             "replace the directory (give a new or empty directory, or a previous "
                                             "export)",
                                             target_.string(), n));
        }
    }
    fs::path parent = target_.parent_path().empty() ? fs::path(".") : target_.parent_path();
    make_dirs(parent);
    tmp_ = parent / fmt::format(".{}.tmp.{}", target_.filename().string(), ::getpid());
    fs::remove_all(tmp_, ec);
    make_dirs(tmp_);
}

HfExportDir::~HfExportDir() {
    if (committed_) return;
    std::error_code ec;
    fs::remove_all(tmp_, ec);
}

void HfExportDir::commit() {
    for (const auto& e : fs::directory_iterator(tmp_)) fsync_path(e.path());
    fsync_path(tmp_);
    const fs::path old = tmp_.string() + ".old";
    std::error_code ec;
    const bool had_target = fs::exists(fs::symlink_status(target_, ec));
    if (had_target) {
        fs::rename(target_, old, ec);
        if (ec)
            throw IoError(fmt::format("moving the previous export '{}' aside: {}", target_.string(), ec.message()));
    }
    fs::rename(tmp_, target_, ec);
    if (ec) throw IoError(fmt::format("renaming '{}' to '{}': {}", tmp_.string(), target_.string(), ec.message()));
    committed_ = true;
    if (had_target) fs::remove_all(old, ec);
    fsync_path(target_.parent_path().empty() ? fs::path(".") : target_.parent_path());
}

}  // namespace llmt::models
