// parse_job_request: every field checked for type and range; the first problem is reported with its
// field path (the config loader reports all of a config's problems at once).
#include "server/jobs/job_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <regex>

#include "config/emit.h"
#include "config/loader.h"
#include "core/json_describe.h"
#include "server/api_error.h"
#include "server/jobs/command_job.h"
#include "server/estimate/preset_cache.h"

namespace llmt::server {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void bad(const std::string& field, const std::string& msg) {
    throw ApiError(400, "invalid_field", msg, field);
}

// A job's ranks run one thread each, what admission counts (--capacity cpus: one CPU per rank); a config
// asking for more threads per rank would use CPUs the queue gave to other jobs.
void check_threads(const config::Config& cfg) {
    if (cfg.run.threads > 1)
        bad("run.threads", fmt::format("run.threads {}: each rank of a job runs one thread, as --capacity cpus counts "
                                       "them; ask for {} ranks (nproc_per_node) instead, or leave run.threads at 0",
                                       cfg.run.threads, cfg.run.threads));
}

int get_int(const nlohmann::json& body, const char* key, int def, int lo, int hi) {
    if (!body.contains(key)) return def;
    const auto& v = body[key];
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
        bad(key, fmt::format("{} must be an integer in [{}, {}], got {}", key, lo, hi, describe_json(v)));
    return v.get<int>();
}

double get_number(const nlohmann::json& body, const char* key, double hi) {
    if (!body.contains(key)) return 0;
    const auto& v = body[key];
    if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > hi)
        bad(key, fmt::format("{} must be a number in [0, {}], got {}", key, hi, describe_json(v)));
    return v.get<double>();
}

bool is_label_part(const std::string& s) {
    static const std::regex re(R"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)");
    return std::regex_match(s, re);
}

}  // namespace

bool is_dns_label(const std::string& s) {
    static const std::regex re(R"([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)");
    return std::regex_match(s, re);
}

ParsedJob parse_job_request(const nlohmann::json& body, PresetCache& presets) {
    static const char* const kFields[] = {"name",     "config",        "overrides",  "nodes",
                                          "nproc_per_node", "gpus_per_node", "priority", "max_runtime_s",
                                          "budget_usd",     "labels",        "max_retries",   "resume_from",
                                          "command",        "image"};
    for (const auto& [k, v] : body.items()) {
        bool known = false;
        for (const char* f : kFields) known = known || k == f;
        if (!known)
            bad(k, fmt::format("unknown field '{}' (expected one of: name, config, overrides, nodes, nproc_per_node, "
                               "gpus_per_node, priority, max_runtime_s, budget_usd, labels, max_retries, resume_from, "
                               "command, image)",
                               k.substr(0, 64)));
    }
    ParsedJob p;
    JobSpec& s = p.spec;
    if (!body.contains("name") || !body["name"].is_string()) bad("name", "name is required and must be a string");
    s.name = body["name"];
    if (!is_dns_label(s.name))
        bad("name", fmt::format("name '{}' is not a DNS label: 1-63 characters of a-z, 0-9 and '-', starting and "
                                "ending with a letter or digit",
                                s.name.substr(0, 80)));
    s.nodes = get_int(body, "nodes", 1, 1, 1024);
    s.nproc_per_node = get_int(body, "nproc_per_node", 1, 1, 256);
    s.gpus_per_node = get_int(body, "gpus_per_node", 0, 0, 64);
    s.priority = get_int(body, "priority", 0, -1000, 1000);
    s.max_retries = get_int(body, "max_retries", 2, 0, 20);
    s.max_runtime_s = get_number(body, "max_runtime_s", 365.0 * 86400);
    s.budget_usd = get_number(body, "budget_usd", 1e9);
    if (body.contains("resume_from")) {
        const auto& r = body["resume_from"];
        if (!r.is_number_integer() || r.get<int64_t>() < 1)
            bad("resume_from",
                fmt::format("resume_from must be a job id (an integer >= 1), got {}", describe_json(r)));
        s.resume_from = r.get<int64_t>();
    }
    if (body.contains("labels")) {
        const auto& l = body["labels"];
        if (!l.is_object() || l.size() > 32) bad("labels", "labels must be an object of at most 32 string values");
        for (const auto& [k, v] : l.items()) {
            if (!is_label_part(k))
                bad("labels", fmt::format("label key '{}' is not [A-Za-z0-9._-], 1-63 chars", k.substr(0, 80)));
            if (!v.is_string() || !is_label_part(v.get<std::string>()))
                bad("labels." + k, fmt::format("label {} must be a string of [A-Za-z0-9._-], 1-63 chars", k));
            s.labels[k] = v;
        }
    }
    if (body.contains("command")) {
        // A command job (server/jobs/command_job.h): the program instead of a config.
        if (body.contains("config") || body.contains("overrides"))
            bad(body.contains("config") ? "config" : "overrides",
                "a job has either a config (our trainer) or a command (a program of yours), not both");
        s.command = parse_command(body["command"]);
        // Resuming seeds `train --resume auto` with another job's checkpoint: a program of yours has no such
        // checkpoint format, so the field would be accepted and mean nothing.
        if (body.contains("resume_from"))
            bad("resume_from", "resume_from is for training jobs (with \"config\"): a command job cannot continue "
                               "another job's checkpoint; resume inside your program and submit it again");
        if (body.contains("image")) {
            const auto& im = body["image"];
            if (!im.is_string() || im.get<std::string>().empty() || im.get<std::string>().size() > 512 ||
                im.get<std::string>().find_first_of(" \t\n\r") != std::string::npos)
                bad("image", "image must be a container image reference without spaces, e.g. registry/team/train:1.2");
            s.image = im.get<std::string>();
        }
        return p;
    }
    if (body.contains("image"))
        bad("image", "image is for command jobs (with \"command\"); a training job runs llmtrain's own image");
    std::vector<std::string> sets;
    if (body.contains("overrides")) {
        const auto& o = body["overrides"];
        if (!o.is_object()) bad("overrides", "overrides must be an object of {\"key.path\": value}");
        static const std::regex key_re(R"([a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*)");
        for (const auto& [k, v] : o.items()) {
            // The size first: std::regex recurses per character, so a megabyte key would overflow the stack.
            if (k.size() > 128 || !std::regex_match(k, key_re))
                bad("overrides",
                    fmt::format("override key '{}' is not a config key path like trainer.lr", k.substr(0, 80)));
            if (k == "output" || k == "output.root_dir" || k == "output.run_id")
                bad("overrides." + k, "output.root_dir and output.run_id are set by the server (each job runs in "
                                      "its own directory)");
            if (v.is_object() || v.is_null())
                bad("overrides." + k, "override values are scalars or lists, as with --set");
            std::string val = v.is_string() ? v.get<std::string>() : v.dump();
            if (val.find('\n') != std::string::npos) bad("overrides." + k, "override values are one line");
            s.overrides[k] = val;
            sets.push_back(k + "=" + val);
        }
    }
    if (!body.contains("config"))
        bad("config", "config is required: a preset name, a YAML string or a JSON object (or, for a command job, "
                      "\"command\": [\"python3\", \"train.py\"] instead)");
    const auto& c = body["config"];
    s.config_input = c;
    static const std::regex preset_re(R"([A-Za-z0-9_][A-Za-z0-9_.-]{0,63})");
    if (c.is_object()) {
        p.config =
            std::make_shared<const config::Config>(config::load_config_string(c.dump(), "request config", sets));
    } else if (c.is_string() && std::regex_match(c.get<std::string>(), preset_re)) {
        auto loaded = presets.load(c.get<std::string>(), sets);
        if (!loaded) {
            std::vector<std::string> names;
            std::error_code ec;
            for (const auto& e : fs::directory_iterator(presets.dir(), ec))
                if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
            std::sort(names.begin(), names.end());
            bad("config",
                fmt::format("unknown preset '{}' (available: {})", c.get<std::string>(), fmt::join(names, ", ")));
        }
        p.config = std::shared_ptr<const config::Config>(*loaded, &(*loaded)->config);  // no copy
        check_threads(*p.config);
        p.config_yaml = (*loaded)->config_yaml;
        return p;
    } else if (c.is_string()) {
        if (c.get<std::string>().size() > config::kMaxConfigBytes) bad("config", "config is over 1 MiB");
        p.config = std::make_shared<const config::Config>(
            config::load_config_string(c.get<std::string>(), "request config", sets));
    } else {
        bad("config", "config must be a preset name, a YAML string or a JSON object");
    }
    check_threads(*p.config);
    p.config_yaml = config::to_yaml_written(*p.config);  // re-read by the job: defaults stay defaults
    return p;
}

}  // namespace llmt::server
