// What a job produced: per-rank logs (tail, or followed as a chunked stream), metrics since a step,
// the run directory's files and their download. Paths from requests are checked segment by segment
// and must resolve inside the job's run directory.

#include <fmt/format.h>

#include <fstream>
#include <thread>

#include "core/fs.h"
#include "core/json_parse.h"
#include "server/api_error.h"
#include "server/context.h"
#include "server/scheduler/executor.h"
#include "server/routes/job_views.h"
#include "server/routes/router.h"
#include "server/scheduler/scheduler.h"
#include "server/jobs/store.h"

namespace llmt::server {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxTailBytes = 4 << 20;  // a log tail answer is at most this large
constexpr double kFollowMaxS = 3600;        // a followed log stream ends after an hour; clients reconnect

// Bytes [from, to) of a file (to clamped to its size).
std::string read_range(const fs::path& p, uint64_t from, uint64_t to) {
    std::ifstream f(p, std::ios::binary);
    if (!f) return {};
    f.seekg(0, std::ios::end);
    uint64_t size = static_cast<uint64_t>(f.tellg());
    to = std::min(to, size);
    if (from >= to) return {};
    std::string out(to - from, '\0');
    f.seekg(static_cast<std::streamoff>(from));
    f.read(out.data(), static_cast<std::streamsize>(out.size()));
    out.resize(static_cast<size_t>(f.gcount()));
    return out;
}

// Lines of `text` that start with `prefix` (all of it for an empty prefix).
std::string filter_lines(const std::string& text, const std::string& prefix) {
    if (prefix.empty()) return text;
    std::string out;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        end = end == std::string::npos ? text.size() : end + 1;
        if (text.compare(start, prefix.size(), prefix) == 0) out.append(text, start, end - start);
        start = end;
    }
    return out;
}

// The last `lines` lines of `text` (all of it for lines < 0).
std::string last_lines(const std::string& text, int64_t lines) {
    if (lines < 0) return text;
    size_t pos = text.size();
    if (pos > 0 && text[pos - 1] == '\n') --pos;  // the final newline ends the last line
    for (int64_t n = 0; n < lines; ++n) {
        size_t nl = pos == 0 ? std::string::npos : text.rfind('\n', pos - 1);
        if (nl == std::string::npos) return text;
        pos = nl;
    }
    return lines == 0 ? std::string() : text.substr(pos + 1);
}

fs::path safe_artifact_path(const fs::path& run_dir, const std::string& rel) {
    if (rel.empty() || rel.size() > 1024 || rel.front() == '/')
        throw ApiError(400, "invalid_path", "artifact path must be relative to the run directory", "path");
    size_t start = 0;
    while (start <= rel.size()) {
        size_t end = rel.find('/', start);
        if (end == std::string::npos) end = rel.size();
        std::string seg = rel.substr(start, end - start);
        if (seg.empty() || seg == "." || seg == ".." || seg.find('\0') != std::string::npos ||
            seg.find('\\') != std::string::npos)
            throw ApiError(400, "invalid_path", "artifact path segments may not be empty, '.' or '..'", "path");
        start = end + 1;
    }
    std::error_code ec;
    fs::path root = fs::canonical(run_dir, ec);
    if (ec) throw ApiError(404, "not_found", "this job has no run directory yet", "path");
    fs::path full = fs::canonical(run_dir / rel, ec);
    std::string r = root.string() + "/";
    if (ec || full.string().compare(0, r.size(), r) != 0 || !fs::is_regular_file(full, ec))
        throw ApiError(404, "not_found", "no such artifact: " + rel, "path");
    return full;
}

}  // namespace

void register_job_output_routes(Router& router, ServerContext& ctx) {
    router.add(
        {"GET",
         "/v1/jobs/{id}/logs",
         Role::kViewer,
         "A rank's log: the last `tail` lines, or followed as a chunked stream until the job ends",
         {{"parameters",
           {{{"name", "rank"}, {"in", "query"}, {"schema", {{"type", "integer"}, {"minimum", 0}}}},
            {{"name", "tail"}, {"in", "query"}, {"schema", {{"type", "integer"}, {"minimum", 0}}}},
            {{"name", "follow"}, {"in", "query"}, {"schema", {{"type", "boolean"}}}}}},
          {"responses",
           {{"200", {{"description", "log text"}, {"content", {{"text/plain", nlohmann::json::object()}}}}}}}},
         [&ctx](Call& c) {
             JobRecord j = require_job(ctx, c.id_param());
             auto logs = ctx.executor.rank_logs(Scheduler::job_dir(ctx.opts.data_dir, j.id), j.spec);
             int64_t rank = c.query_int("rank", 0, static_cast<int64_t>(logs.size()) - 1).value_or(0);
             int64_t tail = c.query_int("tail", 0, 1000000).value_or(-1);
             auto follow = c.query("follow");
             if (follow && *follow != "true" && *follow != "false" && *follow != "1" && *follow != "0")
                 throw ApiError(400, "invalid_parameter", "follow must be true or false", "follow");
             const RankLog log = logs[static_cast<size_t>(rank)];
             std::error_code ec;
             uint64_t size = fs::exists(log.path, ec) ? fs::file_size(log.path, ec) : 0;
             std::string head = last_lines(
                 filter_lines(read_range(log.path, size > kMaxTailBytes ? size - kMaxTailBytes : 0, size), log.prefix),
                 tail);
             if (!follow || *follow == "false" || *follow == "0") {
                 c.res.status = 200;
                 c.res.set_content(head, "text/plain; charset=utf-8");
                 return;
             }
             struct Stream {
                 RankLog log;
                 uint64_t pos;
                 int64_t id;
                 std::string pending;  // the tail, sent first
                 std::chrono::steady_clock::time_point until;
             };
             auto st = std::make_shared<Stream>(Stream{
                 log, size, j.id, std::move(head),
                 std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                        std::chrono::duration<double>(kFollowMaxS))});
             c.res.status = 200;
             c.res.set_chunked_content_provider("text/plain; charset=utf-8", [&ctx, st](size_t, http::DataSink& sink) {
                 if (!st->pending.empty()) {
                     std::string out = std::move(st->pending);
                     st->pending.clear();
                     return sink.write(out.data(), out.size());
                 }
                 // Read the state before the file, so bytes written just before the job ended are sent.
                 auto job = ctx.store.get(st->id);
                 bool ended = !job || is_final(job->state);
                 std::string chunk = read_range(st->log.path, st->pos, st->pos + (1 << 20));
                 if (!st->log.prefix.empty()) {  // whole lines only, so each can be matched
                     size_t nl = chunk.rfind('\n');
                     chunk.resize(nl == std::string::npos ? 0 : nl + 1);
                 }
                 if (!chunk.empty()) {
                     st->pos += chunk.size();
                     std::string out = filter_lines(chunk, st->log.prefix);
                     return out.empty() || sink.write(out.data(), out.size());
                 }
                 if (ended || std::chrono::steady_clock::now() > st->until) {
                     sink.done();
                     return true;
                 }
                 if (!sink.is_writable()) return false;
                 std::this_thread::sleep_for(std::chrono::milliseconds(200));
                 return true;
             });
         }});

    router.add({"GET", "/v1/jobs/{id}/metrics", Role::kViewer, "Metrics lines (metrics.jsonl) after a step",
                {{"parameters", {{{"name", "since_step"}, {"in", "query"}, {"schema", {{"type", "integer"}}}}}}},
                [&ctx](Call& c) {
                    JobRecord j = require_job(ctx, c.id_param());
                    int64_t since = c.query_int("since_step", -1, INT64_MAX).value_or(-1);
                    // Indexed as it grows: a poll reads the file's new bytes and the lines it returns.
                    auto got = ctx.metrics_index.since(job_run_dir(ctx, j.id) / "metrics.jsonl", since);
                    c.reply(200, {{"id", j.id},
                                  {"points", std::move(got.points)},
                                  {"last_step", got.last_step},
                                  {"truncated", got.truncated}});
                }});

    router.add({"GET", "/v1/jobs/{id}/artifacts", Role::kViewer,
                "Files of the job's run directory (summary, config, metrics, checkpoints)", nlohmann::json::object(),
                [&ctx](Call& c) {
                    JobRecord j = require_job(ctx, c.id_param());
                    fs::path run = job_run_dir(ctx, j.id);
                    nlohmann::json files = nlohmann::json::array();
                    std::error_code ec;
                    if (fs::is_directory(run, ec)) {
                        std::vector<std::pair<std::string, uint64_t>> found;
                        for (auto it = fs::recursive_directory_iterator(run, ec);
                             !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
                            if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
                            std::string rel = fs::relative(it->path(), run, ec).generic_string();
                            if (rel.find(".tmp") != std::string::npos) continue;  // a checkpoint being written
                            found.emplace_back(rel, it->file_size(ec));
                        }
                        std::sort(found.begin(), found.end());
                        for (const auto& [rel, size] : found)
                            files.push_back({{"path", rel}, {"size", size},
                                             {"url", fmt::format("/v1/jobs/{}/artifacts/{}", j.id, rel)}});
                    }
                    c.reply(200, {{"id", j.id}, {"run_id", fmt::format("job-{}", j.id)}, {"files", files}});
                }});

    router.add({"GET",
                "/v1/jobs/{id}/artifacts/{path}",
                Role::kViewer,
                "Download one file of the run directory",
                {{"responses",
                  {{"200",
                    {{"description", "the file"},
                     {"content", {{"application/octet-stream", nlohmann::json::object()}}}}}}}},
                [&ctx](Call& c) {
                    JobRecord j = require_job(ctx, c.id_param());
                    fs::path full = safe_artifact_path(job_run_dir(ctx, j.id), c.params.at("path"));
                    std::error_code ec;
                    uint64_t size = fs::file_size(full, ec);
                    std::string type = full.extension() == ".json"    ? "application/json"
                                       : full.extension() == ".jsonl" ? "application/x-ndjson"
                                       : full.extension() == ".yaml"  ? "application/yaml"
                                                                      : "application/octet-stream";
                    c.res.status = 200;
                    c.res.set_content_provider(size, type, [full](size_t offset, size_t length, http::DataSink& sink) {
                        std::string chunk = read_range(full, offset, offset + std::min<size_t>(length, 1 << 20));
                        if (chunk.empty()) return false;
                        return sink.write(chunk.data(), chunk.size());
                    });
                }});
}

}  // namespace llmt::server
