// Parsing of --capacity and --quotas-file.
#include "server/scheduler/admission.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "core/error.h"
#include "core/fs.h"
#include "core/json_parse.h"

namespace llmt::server {

Capacity parse_capacity(const std::string& text) {
    Capacity c;
    std::istringstream in(text);
    std::string part;
    while (std::getline(in, part, ',')) {
        auto eq = part.find('=');
        std::string k = part.substr(0, eq), v = eq == std::string::npos ? "" : part.substr(eq + 1);
        int n = -1;
        try {
            size_t used = 0;
            n = std::stoi(v, &used);
            if (used != v.size()) n = -1;
        } catch (const std::exception&) {
        }
        if (n < 0)
            throw UsageError(
                fmt::format("--capacity: '{}' is not key=count with a count >= 0 (e.g. cpus=2,gpus=0)", part));
        if (k == "cpus")
            c.cpus = n;
        else if (k == "gpus")
            c.gpus = n;
        else
            throw UsageError(fmt::format("--capacity: unknown resource '{}' (expected cpus, gpus)", k));
    }
    return c;
}

namespace {

SubmitterQuota parse_submitter_quota(const std::filesystem::path& path, const std::string& entry,
                                     const nlohmann::json& limits) {
    SubmitterQuota q;
    for (auto& [k, v] : limits.items()) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (int64_t{1} << 30))
            throw InputError(fmt::format("{}: {}.{} must be an integer >= 0", path.string(), entry, k));
        if (k == "max_queued")
            q.max_queued = v.get<int>();
        else if (k == "max_running")
            q.max_running = v.get<int>();
        else if (k == "max_disk_mb")
            q.max_disk_mb = v.get<int64_t>();
        else
            throw InputError(fmt::format("{}: {}: unknown key '{}' (expected max_queued, max_running, max_disk_mb)",
                                         path.string(), entry, k));
    }
    return q;
}

}  // namespace

Quotas load_quotas(const std::filesystem::path& path) {
    const nlohmann::json j = parse_json(read_file(path, 1 << 20), path.string(), {1 << 20, 8, false});
    if (!j.is_object()) throw InputError(path.string() + ": expected an object of \"key=value\": {limits}");
    Quotas q;
    for (auto& [label, limits] : j.items()) {
        if (label.rfind("submitter:", 0) == 0 && label.size() > 10 && limits.is_object()) {
            const std::string name = label.substr(10);
            SubmitterQuota sq = parse_submitter_quota(path, label, limits);
            if (name == "*")
                q.any_submitter = sq;
            else
                q.submitters[name] = sq;
            continue;
        }
        if (label.find('=') == std::string::npos || !limits.is_object())
            throw InputError(fmt::format("{}: '{}' must be a \"key=value\" label or \"submitter:NAME\" mapped to an "
                                         "object",
                                         path.string(), label));
        LabelQuota lq;
        for (auto& [k, v] : limits.items()) {
            if (!v.is_number() || v.get<double>() < 0)
                throw InputError(fmt::format("{}: {}.{} must be a number >= 0", path.string(), label, k));
            if (k == "max_running")
                lq.max_running = v;
            else if (k == "max_cpus")
                lq.max_cpus = v;
            else if (k == "max_gpus")
                lq.max_gpus = v;
            else if (k == "budget_usd")
                lq.budget_usd = v;
            else if (k == "max_disk_mb" && (!v.is_number_integer() || v.get<int64_t>() > (int64_t{1} << 30)))
                throw InputError(fmt::format("{}: {}.max_disk_mb must be an integer >= 0 (MB)", path.string(), label));
            else if (k == "max_disk_mb")
                lq.max_disk_mb = v.get<int64_t>();
            else
                throw InputError(fmt::format("{}: {}: unknown key '{}' (expected max_running, max_cpus, max_gpus, "
                                             "budget_usd, max_disk_mb)", path.string(), label, k));
        }
        q.labels[label] = lq;
    }
    return q;
}

}  // namespace llmt::server
