// Job routes: submit (validation, capacity, budgets, estimate), list, get, cancel.

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include <fstream>

#include "core/fs.h"
#include "core/json_parse.h"
#include "models/hf_resolve.h"
#include "server/api_error.h"
#include "server/context.h"
#include "server/jobs/command_job.h"
#include "server/estimate/estimate.h"
#include "server/estimate/estimate_history.h"
#include "server/scheduler/executor.h"
#include "server/jobs/job_events.h"
#include "server/jobs/job_request.h"
#include "server/jobs/job_resume.h"
#include "server/jobs/job_storage.h"
#include "server/routes/job_views.h"
#include "server/routes/router.h"
#include "server/scheduler/scheduler.h"
#include "server/jobs/store.h"

namespace llmt::server {

namespace fs = std::filesystem;

namespace {

const nlohmann::json kJobRequestSchema = {
    {"type", "object"},
    {"required", {"name"}},
    {"oneOf", {{{"required", {"config"}}}, {{"required", {"command"}}}}},
    {"additionalProperties", false},
    {"properties",
     {{"name", {{"type", "string"}, {"pattern", "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"}}},
      {"config", {{"description", "a preset name, a YAML string or a JSON object"}}},
      {"overrides", {{"type", "object"}, {"description", "{\"trainer.lr\": 3e-4}: as --set"}}},
      {"nodes", {{"type", "integer"}, {"minimum", 1}}},
      {"nproc_per_node", {{"type", "integer"}, {"minimum", 1}}},
      {"gpus_per_node", {{"type", "integer"}, {"minimum", 0}}},
      {"priority", {{"type", "integer"}}},
      {"max_runtime_s", {{"type", "number"}, {"minimum", 0}}},
      {"budget_usd", {{"type", "number"}, {"minimum", 0}}},
      {"max_retries", {{"type", "integer"}, {"minimum", 0}}},
      {"resume_from",
       {{"type", "integer"}, {"minimum", 1},
        {"description", "a final job whose latest checkpoint this job continues, in its own run directory"}}},
      {"labels", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}},
      {"command",
       {{"type", "array"},
        {"items", {{"type", "string"}}},
        {"description", "a command job: the program and its arguments, run by llmtrain launch with torchrun's "
                        "environment instead of a config (needs serve --allow-command-jobs and role runner)"}}},
      {"image", {{"type", "string"}, {"description", "a command job's container image (Kubernetes executor)"}}}}}};

nlohmann::json json_body_doc() {
    return {{"required", true}, {"content", {{"application/json", {{"schema", kJobRequestSchema}}}}}};
}

// The config an estimate sizes: with model.init_from's config.json applied (its shape keys), read only
// after check_job_access allowed the path and only where jobs see this host's files (a pod's /models
// path is not on the server, nor is an s3:// object, which the job fetches when it starts: there the
// config's own keys are used). Copied only when there is a directory to apply (prepare_init_from
// changes nothing otherwise).
std::shared_ptr<const config::Config> sized_config(const ServerContext& ctx,
                                                   const std::shared_ptr<const config::Config>& cfg) {
    const std::string& from = cfg->model.init_from;
    if (from.empty() || from == "scratch" || from.rfind("s3://", 0) == 0 || !ctx.executor.jobs_see_local_files())
        return cfg;
    auto sized = std::make_shared<config::Config>(*cfg);
    models::prepare_init_from(*sized);
    return sized;
}

// Validation shared by submit and estimate: the body, the executor's limits, capacity, budgets. The
// label budgets a submission must fit are returned, not checked here: the store checks them in the
// transaction that inserts it, after every job before it (JobStore::submit).
struct Checked {
    ParsedJob job;
    nlohmann::json estimate;
    std::vector<LabelBudget> label_budgets;  // with_label_budgets only
    double cost_usd = 0;                     // 0 when unmeasured
};

// `who`: the submitter, whose role a command job needs; nullptr for an estimate, which runs nothing.
Checked check_job(ServerContext& ctx, const nlohmann::json& body, bool with_label_budgets, const Principal* who) {
    Checked c{parse_job_request(body, ctx.presets), {}, {}, 0};
    const JobSpec& s = c.job.spec;
    if (s.is_command()) {
        check_command_job_allowed(ctx.opts.allow_command_jobs, who ? *who : Principal{"estimate", Role::kAdmin});
    }
    ctx.executor.validate(s);
    if (!s.is_command()) check_job_access(*c.job.config, ctx.access);
    check_resume_from(ctx, s);
    const Capacity& cap = ctx.opts.capacity;
    if (!cap.holds_everything() && (s.cpus() > cap.cpus || s.gpus() > cap.gpus))
        throw ApiError(422, "exceeds_capacity",
                       fmt::format("the job needs {} CPU slots and {} GPUs at once; this server has {} and {}",
                                   s.cpus(), s.gpus(), cap.cpus, cap.gpus),
                       s.gpus() > cap.gpus ? "gpus_per_node" : "nproc_per_node");
    if (s.is_command()) {
        c.estimate = estimate_command_job(s, ctx.rates);
    } else {
        c.estimate = estimate_job(s, *sized_config(ctx, c.job.config), ctx.rates, ctx.throughput);
        // How far past estimates of this device and workload were off.
        apply_history(c.estimate, estimate_history(ctx.store, c.estimate["device"], c.estimate.value("workload", "")));
    }
    if (with_label_budgets) {
        for (const auto& [k, v] : s.labels) {
            auto q = ctx.quotas.labels.find(k + "=" + v);
            if (q != ctx.quotas.labels.end() && q->second.budget_usd >= 0)
                c.label_budgets.push_back({k, v, q->second.budget_usd});
        }
    }
    const bool any_budget = s.budget_usd > 0 || !c.label_budgets.empty();
    if (c.estimate["cost_usd"].is_null()) {
        // No measured throughput for this device: a budget cannot be checked, so it is not accepted.
        if (any_budget)
            throw ApiError(422, "unmeasured",
                           "this job has a budget (budget_usd or a label budget) but no cost can be estimated: " +
                               c.estimate.value("reason", c.estimate.value("cost_basis", std::string())),
                           s.budget_usd > 0 ? "budget_usd" : "labels", {{"estimate", c.estimate}});
        return c;
    }
    c.cost_usd = c.estimate["cost_usd"];
    if (s.budget_usd > 0 && c.cost_usd > s.budget_usd)
        throw ApiError(422, "over_budget",
                       fmt::format("estimated cost ${:.4f} exceeds the job's budget_usd ${:.4f}", c.cost_usd,
                                   s.budget_usd),
                       "budget_usd", {{"estimate", c.estimate}, {"budget_usd", s.budget_usd}});
    return c;
}

// The answer to a submission whose Idempotency-Key was used before: the first job again (201,
// Idempotent-Replayed) when the request is the same, 422 when it is another.
void reply_with_first_job(ServerContext& ctx, Call& c, int64_t first_job, bool same_request) {
    if (!same_request)
        throw ApiError(422, "idempotency_key_reused",
                       fmt::format("this Idempotency-Key was first used with a different request body (job {}); use a "
                                   "new key for a new job",
                                   first_job),
                       "Idempotency-Key");
    JobRecord j = require_job(ctx, first_job);
    c.res.set_header("Location", fmt::format("/v1/jobs/{}", j.id));
    c.res.set_header("Idempotent-Replayed", "true");
    c.reply(201, {{"id", j.id}, {"state", "queued"}, {"estimate", j.estimate}});
}

// Inserts the checked job through the store's group commit and answers: 201 once its row is durable,
// or the refusal the store's in-transaction checks gave.
void submit_checked(ServerContext& ctx, Call& c, Checked& chk, const std::optional<IdempotencyKey>& idem) {
    // A command job has no config (nothing to warn about).
    const std::vector<std::string> warnings = chk.job.config ? chk.job.config->warnings : std::vector<std::string>{};
    Submission sub;
    sub.record.spec = std::move(chk.job.spec);
    sub.record.config_yaml = std::move(chk.job.config_yaml);
    sub.record.estimate = chk.estimate;
    sub.record.submitted_by = c.who.name;
    sub.idem = idem;
    sub.budgets = chk.label_budgets;
    sub.cost_usd = chk.cost_usd;
    const SubmitterQuota& quota = ctx.quotas.of_submitter(c.who.name);
    sub.max_waiting = quota.max_queued;
    const SubmitResult r = ctx.store.submit(sub);
    switch (r.kind) {
        case SubmitResult::Kind::kReplayed:
        case SubmitResult::Kind::kKeyReused:
            return reply_with_first_job(ctx, c, r.job_id, r.kind == SubmitResult::Kind::kReplayed);
        case SubmitResult::Kind::kOverBudget: {
            const LabelBudget& b = r.over;
            const double left = b.budget_usd - r.committed_usd;
            throw ApiError(422, "over_budget",
                           fmt::format("estimated cost ${:.4f} exceeds label {}={}'s remaining budget ${:.4f} "
                                       "(budget ${:.4f}, committed ${:.4f})",
                                       chk.cost_usd, b.key, b.value, std::max(0.0, left), b.budget_usd,
                                       r.committed_usd),
                           "labels." + b.key,
                           {{"estimate", chk.estimate},
                            {"label_budget_usd", b.budget_usd},
                            {"label_committed_usd", r.committed_usd}});
        }
        case SubmitResult::Kind::kOverQueueQuota:
            // Retry-After: the queue drains at the speed of jobs, so a minute is a fair first wait.
            c.res.set_header("Retry-After", "60");
            throw ApiError(429, "queue_quota_exceeded",
                           fmt::format("'{}' has {} jobs waiting, the most its quota max_queued allows ({}); submit "
                                       "again when some have started or been cancelled",
                                       c.who.name, r.waiting, quota.max_queued),
                           "max_queued",
                           {{"quota", "max_queued"}, {"max_queued", quota.max_queued}, {"waiting", r.waiting}});
        case SubmitResult::Kind::kCreated:
            break;
    }
    log_job_queued(r.job_id, c.who.name, sub.record.spec.name);
    ctx.scheduler.wake();
    c.res.set_header("Location", fmt::format("/v1/jobs/{}", r.job_id));
    // What the config loader adjusted instead of refusing (a warmup longer than the run), for the form to show.
    c.reply(201, {{"id", r.job_id}, {"state", "queued"}, {"estimate", chk.estimate}, {"warnings", warnings}});
}

// The Idempotency-Key header of a submission with the request it names (the body as canonical JSON:
// keys sorted, no whitespace), or nullopt without the header. Throws ApiError 400 when malformed.
std::optional<IdempotencyKey> idempotency_key(const Call& c, const nlohmann::json& body) {
    if (!c.req.has_header("Idempotency-Key")) return std::nullopt;
    const std::string key = c.req.get_header_value("Idempotency-Key");
    const bool ok = !key.empty() && key.size() <= 128 && std::all_of(key.begin(), key.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == ':' || ch == '-';
    });
    if (!ok)
        throw ApiError(400, "invalid_header", "Idempotency-Key must be 1 to 128 characters of A-Z a-z 0-9 . _ : -",
                       "Idempotency-Key");
    return IdempotencyKey{key, body.dump()};
}

nlohmann::json history_json(JobStore& store, int64_t id) {
    nlohmann::json h = nlohmann::json::array();
    for (const auto& e : store.history(id))
        h.push_back({{"at", e.at}, {"state", e.state}, {"attempt", e.attempt}, {"detail", e.detail}});
    return h;
}

// The last line of metrics.jsonl that has a loss (a progress line), or null.
nlohmann::json latest_metrics(const fs::path& run_dir) {
    std::error_code ec;
    fs::path f = run_dir / "metrics.jsonl";
    auto size = fs::file_size(f, ec);
    if (ec) return nullptr;
    // Read the tail only: metrics files grow with the run.
    std::ifstream in(f, std::ios::binary);
    const uint64_t from = size > 65536 ? size - 65536 : 0;
    in.seekg(static_cast<std::streamoff>(from));
    std::string text(static_cast<size_t>(size - from), '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    size_t end = text.size();
    while (end > 0) {
        size_t start = text.rfind('\n', end - 1);
        start = start == std::string::npos ? 0 : start + 1;
        auto line = text.substr(start, end - start);
        if (!line.empty() && line.find("\"step\"") != std::string::npos) {
            if (auto j = try_parse_json(line)) return *j;
        }
        if (start == 0) break;
        end = start - 1;
    }
    return nullptr;
}

}  // namespace

fs::path job_run_dir(const ServerContext& ctx, int64_t id) {
    return Scheduler::job_dir(ctx.opts.data_dir, id) / "runs" / fmt::format("job-{}", id);
}

JobRecord require_job(ServerContext& ctx, int64_t id) {
    auto j = ctx.store.get(id);
    if (!j) throw ApiError(404, "not_found", fmt::format("no job with id {}", id), "id");
    return *j;
}

nlohmann::json job_summary(const JobRecord& j) {
    return {{"id", j.id},
            {"name", j.spec.name},
            {"state", state_name(j.state)},
            {"priority", j.spec.priority},
            {"labels", j.spec.labels},
            {"attempts", j.attempts},
            {"submitted_by", j.submitted_by},
            {"created_at", j.created_at},
            {"started_at", j.started_at},
            {"finished_at", j.finished_at},
            {"exit_code", j.exit_code ? nlohmann::json(*j.exit_code) : nlohmann::json(nullptr)},
            {"reason", j.reason},
            {"cancel_requested", j.cancel_requested}};
}

void register_job_routes(Router& router, ServerContext& ctx) {
    router.add({"POST", "/v1/jobs", Role::kSubmitter, "Submit a training job",
                {{"requestBody", json_body_doc()},
                 {"parameters",
                  {{{"name", "Idempotency-Key"},
                    {"in", "header"},
                    {"description",
                     "a retry with the same key and body returns the first job (201, Idempotent-Replayed: true) "
                     "and creates none; the same key with another body is 422 idempotency_key_reused"},
                    {"schema", {{"type", "string"}, {"pattern", "^[A-Za-z0-9._:-]{1,128}$"}}}}}},
                 {"responses", {{"201", {{"description", "queued: {id, state, estimate}"}}}}}},
                [&ctx](Call& c) {
                    auto body = c.json_body();
                    const auto idem = idempotency_key(c, body);
                    // A retry answered without the parse (the store checks the key again when inserting).
                    if (idem) {
                        if (auto first = ctx.store.find_idempotent(c.who.name, idem->key))
                            return reply_with_first_job(ctx, c, first->job_id, first->request == idem->request);
                    }
                    Checked chk = check_job(ctx, body, true, &c.who);
                    submit_checked(ctx, c, chk, idem);
                }});

    router.add({"POST", "/v1/estimate", Role::kViewer,
                "Estimate duration and cost of a job body without submitting it (budgets of labels not checked)",
                {{"requestBody", json_body_doc()}}, [&ctx](Call& c) {
                    Checked chk = check_job(ctx, c.json_body(), false, nullptr);
                    const JobSpec& s = chk.job.spec;
                    c.reply(200, {{"estimate", chk.estimate},
                                  {"resources", {{"cpus", s.cpus()}, {"gpus", s.gpus()}}},
                                  {"config_valid", true}});
                }});

    router.add(
        {"GET",
         "/v1/jobs",
         Role::kViewer,
         "List jobs (filter by state and label; paginated by id)",
         {{"parameters",
           {{{"name", "state"}, {"in", "query"}, {"schema", {{"type", "string"}}}},
            {{"name", "label"}, {"in", "query"}, {"description", "key=value"}, {"schema", {{"type", "string"}}}},
            {{"name", "limit"}, {"in", "query"}, {"schema", {{"type", "integer"}, {"maximum", 500}}}},
            {{"name", "after"},
             {"in", "query"},
             {"description", "return jobs with id > after"},
             {"schema", {{"type", "integer"}}}},
            {{"name", "order"},
             {"in", "query"},
             {"description", "desc: newest first, paginated with before (next_before); the answer has total"},
             {"schema", {{"type", "string"}, {"enum", {"asc", "desc"}}}}},
            {{"name", "before"},
             {"in", "query"},
             {"description", "with order=desc: jobs with id < before"},
             {"schema", {{"type", "integer"}}}}}}},
         [&ctx](Call& c) {
             ListQuery q;
             if (auto s = c.query("state")) {
                 q.state = parse_state(*s);
                 if (!q.state)
                     throw ApiError(400, "invalid_parameter",
                                    "state must be one of queued, running, retrying, succeeded, failed, "
                                    "cancelled",
                                    "state");
             }
             if (auto l = c.query("label")) {
                 auto eq = l->find('=');
                 if (eq == std::string::npos || eq == 0)
                     throw ApiError(400, "invalid_parameter", "label must be key=value", "label");
                 q.label = {l->substr(0, eq), l->substr(eq + 1)};
             }
             q.limit = static_cast<int>(c.query_int("limit", 1, 500).value_or(50));
             q.after_id = c.query_int("after", 0, INT64_MAX).value_or(0);
             const auto order = c.query("order");
             if (order && *order != "asc" && *order != "desc")
                 throw ApiError(400, "invalid_parameter", "order must be asc or desc", "order");
             q.newest_first = order && *order == "desc";
             q.before_id = c.query_int("before", 0, INT64_MAX).value_or(0);
             auto jobs = ctx.store.list(q);
             nlohmann::json out = nlohmann::json::array();
             for (const auto& j : jobs) {
                 out.push_back(job_summary(j));
                 out.back()["result"] = ctx.results.compact(job_run_dir(ctx, j.id));
             }
             nlohmann::json next = nullptr;
             if (static_cast<int>(jobs.size()) == q.limit) next = jobs.back().id;
             if (q.newest_first) {
                 c.reply(200, {{"jobs", out}, {"next_before", next}, {"total", ctx.store.count(q)}});
                 return;
             }
             c.reply(200, {{"jobs", out}, {"next_after", next}});
         }});

    router.add({"GET", "/v1/jobs/{id}", Role::kViewer,
                "A job: spec, state history, per-rank status, latest metrics, estimated vs actual cost",
                nlohmann::json::object(), [&ctx](Call& c) {
                    JobRecord j = require_job(ctx, c.id_param());
                    nlohmann::json out = job_summary(j);
                    out["spec"] = j.spec.to_json();
                    out["config_yaml"] = j.config_yaml;
                    out["storage"] = job_storage(j.config_yaml, j.id);  // s3:// inputs and synced run
                    out["history"] = history_json(ctx.store, j.id);
                    fs::path run = job_run_dir(ctx, j.id);
                    auto latest = latest_metrics(run);
                    out["latest_metrics"] = latest;
                    out["result"] = ctx.results.full(run);
                    nlohmann::json ranks = nlohmann::json::array();
                    auto logs = ctx.executor.rank_logs(Scheduler::job_dir(ctx.opts.data_dir, j.id), j.spec);
                    for (size_t r = 0; r < logs.size(); ++r) {
                        std::error_code ec;
                        ranks.push_back(
                            {{"rank", r},
                             {"state", state_name(j.state)},
                             {"log", fmt::format("/v1/jobs/{}/logs?rank={}", j.id, r)},
                             {"log_file_bytes", fs::exists(logs[r].path, ec) ? fs::file_size(logs[r].path, ec) : 0}});
                    }
                    out["ranks"] = ranks;
                    // Actual cost so far: wall time of the attempts x devices x rate (device-hours billed
                    // while running, the same unit as the estimate).
                    double end = j.finished_at > 0 ? j.finished_at
                                                   : (j.state == JobState::kRunning ? unix_now() : j.started_at);
                    double wall = j.started_at > 0 ? std::max(0.0, end - j.started_at) : 0.0;
                    bool gpu = j.spec.gpus_per_node > 0;
                    double dev_h = wall / 3600 * (gpu ? j.spec.gpus() : j.spec.cpus());
                    double rate = gpu ? ctx.rates.gpu_hour_usd : ctx.rates.cpu_hour_usd;
                    out["estimate"] = j.estimate;
                    const auto ratio = actual_to_estimate(j);  // succeeded jobs: how far the estimate was off
                    out["actual"] = {{"wall_s", wall}, {"device_hours", dev_h},
                                     {"cost_usd", rate > 0 ? nlohmann::json(dev_h * rate) : nlohmann::json(nullptr)},
                                     {"estimate_ratio", ratio ? nlohmann::json(*ratio) : nlohmann::json(nullptr)},
                                     {"note", "wall time of the latest attempt"}};
                    out["progress"] = {{"step", latest.is_object() ? latest.value("step", 0) : 0},
                                       {"max_steps", j.estimate.value("max_steps", 0)}};
                    c.reply(200, out);
                }});

    router.add({"POST", "/v1/jobs/{id}/cancel", Role::kSubmitter,
                "Cancel a job (queued: at once; running: SIGTERM, checkpoint, then SIGKILL after the grace period)",
                {{"responses", {{"202", {{"description", "{id, state, cancel_requested}"}}}}}}, [&ctx](Call& c) {
                    JobRecord j = require_job(ctx, c.id_param());
                    if (c.who.role < Role::kAdmin && j.submitted_by != c.who.name)
                        throw ApiError(403, "forbidden",
                                       fmt::format("job {} was submitted by '{}'; only they or an admin may cancel it",
                                                   j.id, j.submitted_by));
                    for (int tries = 0; tries < 3; ++tries) {
                        if (is_final(j.state))
                            throw ApiError(409, "already_final",
                                           fmt::format("job {} is already {}", j.id, state_name(j.state)), "id");
                        if (is_waiting(j.state)) {
                            JobUpdate u;
                            u.finish = true;
                            u.reason = "cancelled by " + c.who.name + " before it ran";
                            u.detail = *u.reason;
                            if (ctx.store.transition(j.id, j.state, JobState::kCancelled, u)) {
                                log_job_finished(j.id, "cancelled", std::nullopt, 0, *u.reason);
                                break;
                            }
                        } else {
                            ctx.store.request_cancel(j.id);
                            ctx.scheduler.wake();
                            break;
                        }
                        j = require_job(ctx, j.id);  // it changed state meanwhile: look again
                    }
                    j = require_job(ctx, j.id);
                    c.reply(202,
                            {{"id", j.id}, {"state", state_name(j.state)}, {"cancel_requested", j.cancel_requested}});
                },
                /*takes_body=*/false});
}

}  // namespace llmt::server
