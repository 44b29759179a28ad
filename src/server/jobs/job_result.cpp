// summary.json -> the API's `result`, and the cache that keeps the list request from re-reading it;
// see job_result.h.
#include "server/jobs/job_result.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/fs.h"
#include "core/json_parse.h"

namespace llmt::server {

namespace fs = std::filesystem;

namespace {

bool is_count(const nlohmann::json& v) {
    if (v.is_number_unsigned()) return true;
    if (v.is_number_integer()) return v.get<int64_t>() >= 0;
    return false;
}

bool is_fraction_or_null(const nlohmann::json& v) {
    if (v.is_null()) return true;  // a class with no test example has no accuracy
    return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0 && v.get<double>() <= 1;
}

// Why `m` is not an N x N matrix of counts, or "" when it is.
std::string matrix_problem(const nlohmann::json& m) {
    if (!m.is_array() || m.empty()) return "expected a non-empty array of rows";
    for (size_t r = 0; r < m.size(); ++r) {
        if (!m[r].is_array() || m[r].size() != m.size())
            return fmt::format("row {} has {} entries, expected {} (a square matrix)", r,
                               m[r].is_array() ? m[r].size() : 0, m.size());
        for (size_t c = 0; c < m.size(); ++c)
            if (!is_count(m[r][c])) return fmt::format("entry [{}][{}] is not a non-negative integer count", r, c);
    }
    return "";
}

// Checks the classifier fields against each other (their N must agree) and copies the good ones.
void copy_classifier_fields(const nlohmann::json& summary, nlohmann::json& out, nlohmann::json& invalid) {
    std::optional<size_t> n;  // the class count the first good field set
    auto agree = [&](const char* key, size_t size) {
        if (n && *n != size) {
            invalid.push_back(fmt::format("{}: {} classes, but another field has {}", key, size, *n));
            return false;
        }
        n = size;
        return true;
    };
    if (summary.contains("confusion_matrix")) {
        const auto& m = summary["confusion_matrix"];
        if (auto why = matrix_problem(m); !why.empty()) invalid.push_back("confusion_matrix: " + why);
        else if (agree("confusion_matrix", m.size())) out["confusion_matrix"] = m;
    }
    if (summary.contains("per_class_accuracy")) {
        const auto& a = summary["per_class_accuracy"];
        if (!a.is_array() || a.empty() || !std::all_of(a.begin(), a.end(), is_fraction_or_null))
            invalid.push_back("per_class_accuracy: expected an array of fractions in [0, 1] (or null)");
        else if (agree("per_class_accuracy", a.size())) out["per_class_accuracy"] = a;
    }
    if (summary.contains("class_names")) {
        const auto& c = summary["class_names"];
        if (!c.is_array() || c.empty() ||
            !std::all_of(c.begin(), c.end(), [](const auto& v) { return v.is_string(); }))
            invalid.push_back("class_names: expected an array of strings");
        else if (agree("class_names", c.size())) out["class_names"] = c;
    }
}

}  // namespace

nlohmann::json result_from_summary(const std::string& text, const std::string& source) {
    const nlohmann::json summary = parse_json(text, source);
    if (!summary.is_object()) throw FormatError(source + ": expected a JSON object");
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, v] : summary.items())
        if (v.is_primitive()) out[k] = v;
    nlohmann::json invalid = nlohmann::json::array();
    copy_classifier_fields(summary, out, invalid);
    if (!invalid.empty()) out["invalid"] = invalid;
    return out;
}

nlohmann::json compact_result(const nlohmann::json& result) {
    nlohmann::json out = nlohmann::json::object();
    if (result.contains("error")) out["error"] = result["error"];
    for (const char* k : kCompactResultKeys)
        if (result.contains(k) && (result[k].is_number() || result[k].is_null())) out[k] = result[k];
    return out;
}

namespace {

// About what a parsed value holds in memory: a node per value, a map node and the key per member,
// the bytes of strings (nlohmann's values are 16 bytes; a std::map node with its key about 80 more).
size_t held_bytes(const nlohmann::json& j) {
    size_t n = 16;
    if (j.is_string()) n += j.get_ref<const std::string&>().size();
    if (j.is_array())
        for (const auto& v : j) n += held_bytes(v);
    if (j.is_object())
        for (const auto& [k, v] : j.items()) n += 80 + k.size() + held_bytes(v);
    return n;
}

}  // namespace

std::shared_ptr<const JobResultCache::Entry> JobResultCache::entry(const fs::path& run_dir) {
    const fs::path file = run_dir / "summary.json";
    const std::string key = run_dir.string();
    // The version is taken before the text is read: a change in between is seen by the next lookup.
    const auto version = file_version(file);
    {
        std::lock_guard lock(mu_);
        if (!version) {
            if (auto it = entries_.find(key); it != entries_.end()) {
                cached_bytes_ -= it->second->bytes;
                entries_.erase(it);
            }
            return nullptr;
        }
        if (auto it = entries_.find(key); it != entries_.end() && it->second->version == *version) return it->second;
    }
    auto e = std::make_shared<Entry>();
    e->version = *version;
    try {
        e->full = result_from_summary(read_file(file, kMaxSummaryBytes), file.string());
    } catch (const Error& ex) {
        e->full = {{"error", ex.what()}};
    }
    e->compact = compact_result(e->full);
    e->bytes = held_bytes(e->full) + held_bytes(e->compact);
    std::lock_guard lock(mu_);
    ++parses_;
    std::shared_ptr<const Entry> kept = e;
    if (e->bytes > kMaxCachedBytes / 8) {
        auto compact_only = std::make_shared<Entry>();
        compact_only->version = e->version;
        compact_only->compact = e->compact;
        compact_only->full = nullptr;
        compact_only->has_full = false;
        compact_only->bytes = held_bytes(e->compact);
        kept = compact_only;
    }
    if (auto it = entries_.find(key); it != entries_.end()) {
        cached_bytes_ -= it->second->bytes;
        entries_.erase(it);
    }
    if (entries_.size() >= kMaxEntries || cached_bytes_ + e->bytes > kMaxCachedBytes) {
        entries_.clear();
        cached_bytes_ = 0;
    }
    entries_[key] = kept;
    cached_bytes_ += kept->bytes;
    return e;
}

nlohmann::json JobResultCache::full(const fs::path& run_dir) {
    auto e = entry(run_dir);
    if (!e) return nullptr;
    if (e->has_full) return e->full;
    // Kept compact only: the full result is read again (its version is the one just seen, or newer).
    try {
        return result_from_summary(read_file(run_dir / "summary.json", kMaxSummaryBytes),
                                   (run_dir / "summary.json").string());
    } catch (const Error& ex) {
        return {{"error", ex.what()}};
    }
}

nlohmann::json JobResultCache::compact(const fs::path& run_dir) {
    auto e = entry(run_dir);
    return e ? e->compact : nlohmann::json(nullptr);
}

uint64_t JobResultCache::parses() const {
    std::lock_guard lock(mu_);
    return parses_;
}

}  // namespace llmt::server
