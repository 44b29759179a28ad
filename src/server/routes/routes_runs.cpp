// Indexed runs (serve --runs-dir): the list (cursor-paginated), one run's metadata and result, its
// metrics since a step (through the server's metrics index) and a rank's log tail. Read-only; every
// file is resolved through RunsIndex::file, so nothing outside a run's directory is read.
// docs/server.md "Indexed runs", docs/security.md "Indexed runs".

#include <fcntl.h>
#include <unistd.h>

#include <charconv>

#include "core/fs.h"
#include "core/json_parse.h"
#include "core/unique_fd.h"
#include "server/api_error.h"
#include "server/context.h"
#include "server/routes/router.h"
#include "server/runs/runs_index.h"

namespace llmt::server {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxMetaBytes = 64 << 10;      // meta.json read for a listing or a run's page
constexpr size_t kMaxConfigBytes = 256 << 10;   // config.yaml shown on a run's page
constexpr size_t kMaxTailBytes = 1 << 20;       // a log tail answer reads at most this much of the file
constexpr int64_t kMaxListLimit = 200;

// The last `max_bytes` bytes of a file (all of a smaller one); "" when it cannot be read.
std::string read_tail(const fs::path& p, size_t max_bytes) {
    UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW));
    if (fd.get() < 0) return {};
    const off_t size = ::lseek(fd.get(), 0, SEEK_END);
    if (size <= 0) return {};
    const off_t from = size > static_cast<off_t>(max_bytes) ? size - static_cast<off_t>(max_bytes) : 0;
    std::string out(static_cast<size_t>(size - from), '\0');
    size_t got = 0;
    while (got < out.size()) {
        ssize_t r = ::pread(fd.get(), out.data() + got, out.size() - got, from + static_cast<off_t>(got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += static_cast<size_t>(r);
    }
    out.resize(got);
    return out;
}

// The last `lines` lines of `text`.
std::string last_lines(const std::string& text, int64_t lines) {
    size_t pos = text.size();
    if (pos > 0 && text[pos - 1] == '\n') --pos;
    for (int64_t n = 0; n < lines; ++n) {
        size_t nl = pos == 0 ? std::string::npos : text.rfind('\n', pos - 1);
        if (nl == std::string::npos) return text;
        pos = nl;
    }
    return lines == 0 ? std::string() : text.substr(pos + 1);
}

// A file of the run as text, or nullopt when absent, outside the run or over `max_bytes`.
std::optional<std::string> read_run_file(const IndexedRun& run, std::string_view rel, size_t max_bytes) {
    auto p = RunsIndex::file(run, rel);
    if (!p) return std::nullopt;
    try {
        return read_file(*p, max_bytes);
    } catch (const Error&) {
        return std::nullopt;
    }
}

// meta.json as an object; null while it is missing, half-written or not an object.
nlohmann::json read_meta(const IndexedRun& run) {
    auto text = read_run_file(run, "meta.json", kMaxMetaBytes);
    if (!text) return nullptr;
    auto parsed = try_parse_json(*text);
    return parsed && parsed->is_object() ? *parsed : nlohmann::json(nullptr);
}

// The run's result (summary.json, through the server's result cache); null when it has none.
nlohmann::json run_result(ServerContext& ctx, const IndexedRun& run, bool compact) {
    if (!RunsIndex::file(run, "summary.json")) return nullptr;
    return compact ? ctx.results.compact(run.dir) : ctx.results.full(run.dir);
}

nlohmann::json run_summary(ServerContext& ctx, const IndexedRun& run) {
    const nlohmann::json meta = read_meta(run);
    auto field = [&](const char* k) {
        return meta.is_object() && meta.contains(k) ? meta[k] : nlohmann::json(nullptr);
    };
    return {{"id", run.key()},
            {"root", run.root},
            {"root_name", ctx.runs.roots()[run.root].filename().string()},
            {"name", run.name},
            {"start_time_utc", field("start_time_utc")},
            {"world_size", field("world_size")},
            {"device", field("device")},
            {"has_metrics", RunsIndex::file(run, "metrics.jsonl").has_value()},
            {"result", run_result(ctx, run, true)}};
}

// The run named by the {root} and {run} path parameters; 404 when the last scan did not find it.
IndexedRun require_run(ServerContext& ctx, const Call& c) {
    const std::string& root_text = c.params.at("root");
    const std::string& name = c.params.at("run");
    size_t root = 0;
    auto [end, ec] = std::from_chars(root_text.data(), root_text.data() + root_text.size(), root);
    std::optional<IndexedRun> run;
    if (ec == std::errc() && end == root_text.data() + root_text.size() && valid_run_name(name)) {
        run = ctx.runs.find(root, name);
        if (!run) {  // started since the last scan?
            ctx.runs.refresh();
            run = ctx.runs.find(root, name);
        }
    }
    if (!run)
        throw ApiError(404, "not_found", "no indexed run " + root_text.substr(0, 20) + "/" + name.substr(0, 200),
                       "run");
    return *run;
}

// The OpenAPI fields of a run route's query parameters (the router adds {root} and {run}).
nlohmann::json with_params(nlohmann::json query) {
    return {{"parameters", std::move(query)}};
}

}  // namespace

void register_run_routes(Router& router, ServerContext& ctx) {
    router.add(
        {"GET",
         "/v1/runs",
         Role::kViewer,
         "Run directories indexed under serve --runs-dir (read-only; paginated by key)",
         {{"parameters",
           {{{"name", "limit"}, {"in", "query"}, {"schema", {{"type", "integer"}, {"maximum", kMaxListLimit}}}},
            {{"name", "after"},
             {"in", "query"},
             {"description", "return runs whose id sorts after this one (next_after)"},
             {"schema", {{"type", "string"}}}}}}},
         [&ctx](Call& c) {
             const int64_t limit = c.query_int("limit", 1, kMaxListLimit).value_or(100);
             const std::string after = c.query("after").value_or("");
             if (after.size() > 256)
                 throw ApiError(400, "invalid_parameter", "after is longer than 256 bytes", "after");
             ctx.runs.refresh();
             auto page = ctx.runs.list(after, static_cast<size_t>(limit));
             nlohmann::json runs = nlohmann::json::array();
             for (const auto& r : page.runs) runs.push_back(run_summary(ctx, r));
             nlohmann::json roots = nlohmann::json::array();
             for (const auto& r : ctx.runs.roots()) roots.push_back(r.filename().string());
             c.reply(200,
                     {{"runs", runs},
                      {"next_after", page.next_after ? nlohmann::json(*page.next_after) : nlohmann::json(nullptr)},
                      {"total", page.total},
                      {"truncated", page.truncated},
                      {"roots", roots}});
         }});

    router.add({"GET", "/v1/runs/{root}/{run}", Role::kViewer,
                "An indexed run: meta.json, the resolved config, its result (summary.json) and its log ranks",
                with_params(nlohmann::json::array()), [&ctx](Call& c) {
                    const IndexedRun run = require_run(ctx, c);
                    nlohmann::json out = run_summary(ctx, run);
                    out["meta"] = read_meta(run);
                    auto config = read_run_file(run, "config.yaml", kMaxConfigBytes);
                    out["config_yaml"] = config ? nlohmann::json(*config) : nlohmann::json(nullptr);
                    out["result"] = run_result(ctx, run, false);
                    out["ranks"] = RunsIndex::log_ranks(run);
                    c.reply(200, out);
                }});

    router.add({"GET", "/v1/runs/{root}/{run}/metrics", Role::kViewer,
                "An indexed run's metrics lines (metrics.jsonl) after a step",
                with_params({{{"name", "since_step"}, {"in", "query"}, {"schema", {{"type", "integer"}}}}}),
                [&ctx](Call& c) {
                    const IndexedRun run = require_run(ctx, c);
                    const int64_t since = c.query_int("since_step", -1, INT64_MAX).value_or(-1);
                    MetricsIndex::Since got;
                    got.last_step = since;
                    // Indexed as it grows, shared with the jobs' metrics: a poll reads only new bytes.
                    if (auto file = RunsIndex::file(run, "metrics.jsonl")) got = ctx.metrics_index.since(*file, since);
                    c.reply(200, {{"id", run.key()},
                                  {"points", std::move(got.points)},
                                  {"last_step", got.last_step},
                                  {"truncated", got.truncated}});
                }});

    router.add({"GET", "/v1/runs/{root}/{run}/logs", Role::kViewer,
                "An indexed run's log (logs/rank<k>.log): the last `tail` lines of its last MiB",
                with_params({{{"name", "rank"}, {"in", "query"}, {"schema", {{"type", "integer"}, {"minimum", 0}}}},
                             {{"name", "tail"}, {"in", "query"}, {"schema", {{"type", "integer"}, {"minimum", 0}}}}}),
                [&ctx](Call& c) {
                    const IndexedRun run = require_run(ctx, c);
                    const int64_t rank = c.query_int("rank", 0, 1023).value_or(0);
                    const int64_t tail = c.query_int("tail", 0, 100000).value_or(200);
                    auto file = RunsIndex::file(run, "logs/rank" + std::to_string(rank) + ".log");
                    if (!file)
                        throw ApiError(404, "not_found", "this run has no log for rank " + std::to_string(rank),
                                       "rank");
                    c.res.status = 200;
                    c.res.set_content(last_lines(read_tail(*file, kMaxTailBytes), tail), "text/plain; charset=utf-8");
                }});
}

}  // namespace llmt::server
