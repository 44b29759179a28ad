// check_job_access: containment after symlink resolution (local) or lexically (pods); globs are
// checked by their fixed leading directories, and nothing after a wildcard may climb with "..".
#include "server/jobs/job_access.h"

#include <fmt/format.h>

#include <algorithm>

#include "config/data_checks.h"
#include "config/loader.h"
#include "core/error.h"
#include "core/hub_cache.h"
#include "server/api_error.h"

namespace llmt::server {

namespace fs = std::filesystem;

namespace {

// Keys the server sets itself for every job (Scheduler::start_attempt): whatever a config says there
// is replaced, so it is not the submitter's to place. (output.sync is the submitter's: an endpoint.)
bool server_sets(const std::string& field) { return field == "output.root_dir" || field == "output.run_id"; }

bool has_wildcard(const std::string& part) { return part.find_first_of("*?[") != std::string::npos; }

bool climbs(const fs::path& p) {
    return std::any_of(p.begin(), p.end(), [](const fs::path& c) { return c == ".."; });
}

// `p` is `root` or inside it (both absolute and normal).
bool within(const fs::path& p, const fs::path& root) {
    auto [r, q] = std::mismatch(root.begin(), root.end(), p.begin(), p.end());
    return r == root.end() || (std::next(r) == root.end() && r->empty());  // "root/" has an empty last part
}

// The leading directories of a glob up to its first wildcard component, and the rest.
std::pair<fs::path, fs::path> split_glob(const fs::path& p) {
    fs::path fixed, rest;
    bool wild = false;
    for (const auto& c : p) {
        wild = wild || has_wildcard(c.string());
        (wild ? rest : fixed) /= c;
    }
    return {fixed, rest};
}

std::string roots_text(const JobAccessPolicy& policy) {
    if (policy.read_roots.empty()) return "none: this server lets jobs read no files";
    std::vector<std::string> names;
    for (const auto& r : policy.read_roots) names.push_back(r.string());
    return fmt::format("{}", fmt::join(names, ", "));
}

[[noreturn]] void refuse(const config::PathValue& v, const std::string& why) {
    throw ApiError(400, "path_not_allowed", fmt::format("{} '{}' {}", v.key, v.value.substr(0, 200), why), v.key);
}

// A read value in a Hugging Face hub cache (a models--/datasets-- folder, a snapshot or a file in one): the
// snapshots' links into blobs/ are followed when the job reads them, so each must stay inside the folder
// (whichever revision the job picks: every snapshot of a folder is checked).
void check_hub_cache_links(const config::PathValue& v, const fs::path& lexical) {
    const auto repo = hub_cache_repo_of(lexical);
    if (!repo) return;
    try {
        check_hub_links(*repo, lexical == *repo ? *repo / "snapshots" : lexical);
    } catch (const InputError& e) {
        refuse(v, fmt::format("is a hub cache folder whose snapshot links lead out of it: {}", e.what()));
    }
}

// Where a read value points, as an absolute normal path with symlinks resolved where local.
fs::path resolve_read(const config::PathValue& v, const JobAccessPolicy& policy) {
    fs::path p(v.value);
    fs::path rest;
    if (v.glob) std::tie(p, rest) = split_glob(p);
    if (climbs(rest)) refuse(v, "has '..' after a wildcard; globs may not climb out of their directory");
    if (p.is_relative()) {
        if (policy.relative_base.empty())
            refuse(v, "is relative; on this executor jobs read absolute paths only (under the read roots: " +
                          roots_text(policy) + ")");
        p = policy.relative_base / p;
    }
    if (!policy.local) {
        if (climbs(p)) refuse(v, "contains '..'; give the path without it");
        return p.lexically_normal();
    }
    std::error_code ec;
    fs::path real = fs::weakly_canonical(p, ec);
    return ec ? p.lexically_normal() : real;
}

// The value as an absolute normal path, links not resolved (local policies; globs by their fixed part).
fs::path lexical_read(const config::PathValue& v, const JobAccessPolicy& policy) {
    fs::path p(v.value);
    if (v.glob) p = split_glob(p).first;
    if (p.is_relative()) p = policy.relative_base / p;
    return p.lexically_normal();
}

void check_read(const config::PathValue& v, const JobAccessPolicy& policy) {
    const fs::path p = resolve_read(v, policy);
    const bool allowed = std::any_of(policy.read_roots.begin(), policy.read_roots.end(),
                                     [&](const fs::path& r) { return within(p, r); });
    const bool denied = std::any_of(policy.denied.begin(), policy.denied.end(),
                                    [&](const fs::path& d) { return within(p, d); });
    // One message for "outside" and "denied", and none that depends on whether the file exists: the
    // answer tells a submitter nothing about the server's files.
    if (!allowed || denied)
        refuse(v, fmt::format("is outside what jobs on this server may read (read roots: {}; the operator adds "
                              "roots with `llmtrain serve --allow-read DIR`)",
                              roots_text(policy)));
    // Allowed: the submitter may learn what is in it, so the hub cache's links are checked by name.
    if (policy.local) check_hub_cache_links(v, lexical_read(v, policy));
}

void check_write(const config::PathValue& v) {
    const fs::path p(v.value);
    if (p.is_absolute() || climbs(p))
        refuse(v, "must be a relative path without '..': a server-side job writes only inside its own directory, "
                  "where the server places it");
}

void check_endpoint(const config::PathValue& v, const JobAccessPolicy& policy) {
    for (const auto& e : policy.endpoints) {
        if (v.value.rfind(e, 0) != 0) continue;
        // A prefix ends at a boundary: "https://a.example" allows "https://a.example/x", not "https://a.example.evil".
        if (v.value.size() == e.size() || e.back() == '/' || v.value[e.size()] == '/') return;
    }
    refuse(v, policy.endpoints.empty()
                  ? "is an endpoint, and this server lets jobs connect to none (the operator allows one with "
                    "`llmtrain serve --allow-endpoint URL`)"
                  : fmt::format("is not under an endpoint this server allows ({}; the operator adds one with "
                                "`llmtrain serve --allow-endpoint URL`)",
                                fmt::join(policy.endpoints, ", ")));
}

}  // namespace

void check_job_access(const std::vector<config::PathValue>& values, const JobAccessPolicy& policy) {
    for (const auto& v : values) {
        if (server_sets(v.field)) continue;
        switch (v.access) {
            case config::Access::kRead: check_read(v, policy); break;
            case config::Access::kWrite: check_write(v); break;
            case config::Access::kEndpoint: check_endpoint(v, policy); break;
            case config::Access::kNone: break;
        }
    }
}

void check_job_access(const config::Config& cfg, const JobAccessPolicy& policy) {
    check_job_access(config::path_values(cfg.resolved), policy);
}

std::vector<std::string> job_write_overrides(const config::Config& cfg, const fs::path& write_root) {
    std::vector<std::string> sets;
    const auto unread = config::unread_data_keys(cfg.data.source, cfg.trainer.precision);
    for (const auto& v : config::path_values(cfg.resolved)) {
        if (v.access != config::Access::kWrite || server_sets(v.field)) continue;
        // A key this config's source never reads writes nothing (and may not be set: config/loader.h).
        if (std::any_of(unread.begin(), unread.end(), [&](const auto& u) { return u.first == v.field; })) continue;
        sets.push_back(fmt::format("{}={}", v.field, (write_root / v.value).lexically_normal().string()));
    }
    return sets;
}

std::vector<fs::path> preset_read_roots(const fs::path& presets_dir, const fs::path& base) {
    std::vector<fs::path> roots;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(presets_dir, ec)) {
        if (e.path().extension() != ".yaml") continue;
        config::Config cfg;
        try {
            cfg = config::load_config_file(e.path());
        } catch (const std::exception&) {
            continue;  // a broken preset is refused when a job names it; it lends no root
        }
        for (const auto& v : config::path_values(cfg.resolved)) {
            if (v.access != config::Access::kRead) continue;
            fs::path p = v.glob ? split_glob(v.value).first : fs::path(v.value).parent_path();
            if (p.empty() || climbs(p)) continue;
            if (p.is_relative()) p = base / p;
            fs::path root = fs::weakly_canonical(p, ec);
            if (ec) root = p.lexically_normal();
            if (std::find(roots.begin(), roots.end(), root) == roots.end()) roots.push_back(root);
        }
    }
    std::sort(roots.begin(), roots.end());
    return roots;
}

}  // namespace llmt::server
