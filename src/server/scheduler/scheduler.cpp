// Scheduler: one thread, one pass per tick or wake-up. Every state change goes through
// JobStore::transition, which checks the state it leaves, so a cancel racing an exit resolves to one.
#include "server/scheduler/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "config/emit.h"
#include "config/loader.h"
#include "core/error.h"
#include "core/fs.h"
#include "server/scheduler/disk_usage.h"
#include "server/jobs/job_resume.h"
#include "server/estimate/estimate_history.h"
#include "server/jobs/job_events.h"

namespace llmt::server {

namespace fs = std::filesystem;

Scheduler::Scheduler(JobStore& store, Executor& exec, SchedulerOptions opts)
    : store_(store), exec_(exec), opts_(std::move(opts)) {}

Scheduler::~Scheduler() { stop(); }

fs::path Scheduler::job_dir(const fs::path& data_dir, int64_t id) { return data_dir / "jobs" / std::to_string(id); }

void Scheduler::start() {
    reconcile();
    thread_ = std::thread([this] {
        std::unique_lock lock(mu_);
        while (!stop_) {
            lock.unlock();
            try {
                tick();
            } catch (const std::exception& e) {
                std::fprintf(stderr, "llmtrain serve: scheduler: %s\n", e.what());
            }
            lock.lock();
            cv_.wait_for(lock, std::chrono::duration<double>(opts_.tick_s), [this] { return stop_ || woken_; });
            woken_ = false;
        }
    });
}

void Scheduler::stop() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void Scheduler::wake() {
    {
        std::lock_guard lock(mu_);
        woken_ = true;
    }
    cv_.notify_all();
}

void Scheduler::reconcile() {
    // Running jobs of a previous server process: an attempt whose supervisor is alive is re-attached
    // (never started again); one that ended is finished by the next tick from its recorded exit status;
    // one that vanished without a status is retried from its last checkpoint or failed.
    for (const auto& j : store_.in_state(JobState::kRunning)) {
        auto st = exec_.poll(j.handle);
        if (st.kind == AttemptStatus::kRunning) {
            store_.note(j.id, "re-attached after server restart: " + j.handle);
            std::fprintf(stderr, "llmtrain serve: job %lld: re-attached to attempt %d\n", static_cast<long long>(j.id),
                         j.attempts);
        } else {
            store_.note(j.id, "server restarted; attempt ended while it was down");
        }
    }
}

void Scheduler::tick() {
    const double now = unix_now();
    if (now - disk_checked_at_ >= opts_.disk_check_s) {
        disk_checked_at_ = now;
        check_disk(store_.in_state(JobState::kRunning), now);
    }
    for (const auto& j : store_.in_state(JobState::kRunning)) watch(j, now);
    admit();
}

// Measures the running jobs' directories and stops those over a disk limit the way a cancel does
// (SIGTERM: the trainer writes a checkpoint and exits); nothing is deleted. Jobs already being stopped
// are left out of the totals: they are leaving.
void Scheduler::check_disk(const std::vector<JobRecord>& running, double now) {
    bool limited = opts_.max_job_disk_mb > 0 || opts_.quotas.any_submitter.max_disk_mb >= 0;
    for (const auto& [name, q] : opts_.quotas.submitters) limited = limited || q.max_disk_mb >= 0;
    for (const auto& [label, q] : opts_.quotas.labels) limited = limited || q.max_disk_mb >= 0;
    if (!limited) return;
    std::vector<JobDiskUse> use;
    std::map<int64_t, const JobRecord*> by_id;
    for (const auto& j : running) {
        if (j.term_sent_at != 0) continue;
        const DirUsage d = measure_dir(job_dir(opts_.data_dir, j.id), kMaxDiskEntriesPerJob);
        use.push_back({j.id, j.submitted_by, j.spec.labels, j.started_at, d.bytes, d.truncated});
        by_id[j.id] = &j;
    }
    for (const auto& stop : jobs_over_disk_limits(use, opts_.quotas, opts_.max_job_disk_mb)) {
        const JobRecord& j = *by_id.at(stop.id);
        exec_.stop(j.handle, false);
        store_.mark_stopped(j.id, now, stop.reason);
        store_.note(j.id, "SIGTERM sent (" + stop.reason + "; checkpoints kept)");
        log_job_note(j.id, stop.reason);
    }
}

void Scheduler::watch(const JobRecord& j, double now) {
    AttemptStatus st = exec_.poll(j.handle);
    if (st.kind != AttemptStatus::kRunning) {
        finish(j, st);
        return;
    }
    if (j.term_sent_at == 0) {
        bool timeout = j.spec.max_runtime_s > 0 && now - j.started_at > j.spec.max_runtime_s;
        if (j.cancel_requested || timeout) {
            exec_.stop(j.handle, false);
            store_.mark_term_sent(j.id, now, timeout && !j.cancel_requested);
            store_.note(j.id, j.cancel_requested ? "SIGTERM sent (cancel)"
                                                 : fmt::format("SIGTERM sent (max_runtime_s {} exceeded)",
                                                               j.spec.max_runtime_s));
        }
    } else if (now - j.term_sent_at > opts_.kill_grace_s) {
        exec_.stop(j.handle, true);
        store_.note(j.id, fmt::format("SIGKILL sent ({} s after SIGTERM)", opts_.kill_grace_s));
    }
}

void Scheduler::finish(const JobRecord& j, const AttemptStatus& st) {
    JobUpdate u;
    u.finish = true;
    std::string what = st.kind == AttemptStatus::kExited ? fmt::format("exit code {}", st.exit_code) : st.detail;
    if (st.kind == AttemptStatus::kExited) u.exit_code = st.exit_code;
    JobState to;
    if (j.cancel_requested) {
        to = JobState::kCancelled;
        u.reason = "cancelled (" + what + ")";
    } else if (j.timed_out) {
        to = JobState::kFailed;
        u.reason = fmt::format("stopped after max_runtime_s {} ({})", j.spec.max_runtime_s, what);
    } else if (!j.stop_reason.empty()) {
        to = JobState::kFailed;  // not retried: it would only pass its limit again
        u.reason = fmt::format("{}; stopped, its checkpoints kept ({})", j.stop_reason, what);
    } else if (st.kind == AttemptStatus::kExited && st.exit_code == 0) {
        to = JobState::kSucceeded;
        u.reason = "exit code 0";
    } else if (st.kind == AttemptStatus::kExited && st.exit_code == 2) {
        to = JobState::kFailed;  // bad input: another attempt would fail the same way
        u.reason = "bad input (exit code 2; see the log)";
    } else if (j.attempts < 1 + j.spec.max_retries) {
        to = JobState::kRetrying;
        u.finish = false;
        u.reason = fmt::format("attempt {} failed ({}); retrying from the last checkpoint", j.attempts, what);
    } else {
        to = JobState::kFailed;
        u.reason = fmt::format("attempt {} of {} failed ({})", j.attempts, 1 + j.spec.max_retries, what);
    }
    u.detail = *u.reason;
    if (!store_.transition(j.id, JobState::kRunning, to, u)) return;
    log_job_finished(j.id, state_name(to), u.exit_code, unix_now() - j.started_at, *u.reason);
    note_estimate_ratio(j, to);
}

// A succeeded job's actual duration against its estimate: in its history and on the server's stderr
// (later estimates are corrected by these ratios: estimate_history.h).
void Scheduler::note_estimate_ratio(JobRecord j, JobState to) {
    j.state = to;
    j.finished_at = unix_now();
    const auto ratio = actual_to_estimate(j);
    if (!ratio) return;
    const std::string what =
        fmt::format("took {:.2f}x its estimated duration ({:.0f} s estimated, {:.0f} s actual)", *ratio,
                    (j.finished_at - j.started_at) / *ratio, j.finished_at - j.started_at);
    store_.note(j.id, what);
    log_job_note(j.id, what);
}

bool Scheduler::quota_allows(const JobRecord& j, const std::vector<JobRecord>& running) const {
    if (const int most = opts_.quotas.of_submitter(j.submitted_by).max_running; most >= 0) {
        const auto theirs = std::count_if(running.begin(), running.end(),
                                          [&](const JobRecord& r) { return r.submitted_by == j.submitted_by; });
        if (theirs + 1 > most) return false;
    }
    for (const auto& [k, v] : j.spec.labels) {
        auto it = opts_.quotas.labels.find(k + "=" + v);
        if (it == opts_.quotas.labels.end()) continue;
        const LabelQuota& q = it->second;
        int jobs = 0, cpus = 0, gpus = 0;
        for (const auto& r : running) {
            auto l = r.spec.labels.find(k);
            if (l == r.spec.labels.end() || l->second != v) continue;
            ++jobs;
            cpus += r.spec.cpus();
            gpus += r.spec.gpus();
        }
        if (q.max_running >= 0 && jobs + 1 > q.max_running) return false;
        if (q.max_cpus >= 0 && cpus + j.spec.cpus() > q.max_cpus) return false;
        if (q.max_gpus >= 0 && gpus + j.spec.gpus() > q.max_gpus) return false;
    }
    return true;
}

namespace {

// What admission reads of a waiting job: its id, state, attempts, resources, priority, labels and
// submitter. The config, overrides, command and estimate are dropped.
JobRecord admission_view(JobRecord j) {
    j.config_yaml.clear();
    j.config_yaml.shrink_to_fit();
    j.spec.config_input = nullptr;
    j.spec.overrides.clear();
    j.spec.command.clear();
    j.spec.command.shrink_to_fit();
    j.estimate = nullptr;
    return j;
}

}  // namespace

void Scheduler::admit() {
    if (opts_.capacity.holds_everything()) return;
    // Nothing entered or left a state since the last pass: it would decide the same.
    const uint64_t generation = store_.generation();
    if (admitted_generation_ && *admitted_generation_ == generation) return;
    admitted_generation_ = generation;
    auto running = store_.in_state(JobState::kRunning);
    int cpus = 0, gpus = 0;
    for (const auto& r : running) {
        cpus += r.spec.cpus();
        gpus += r.spec.gpus();
    }
    // Waiting rows are read and parsed once, when they first wait: a row does not change while it
    // waits (it leaves waiting only through a transition, and comes back only through a start). Only
    // what admission reads is kept (resources, labels, submitter): a queued job's config, overrides
    // and command can be a MiB each, times every job a submitter may queue; a start reads its row again.
    std::map<int64_t, JobRecord> still;
    std::vector<const JobRecord*> order;
    for (int64_t id : store_.waiting_ids()) {
        auto it = waiting_.find(id);
        if (it != waiting_.end()) {
            it = still.emplace(id, std::move(it->second)).first;
        } else if (auto j = store_.get(id)) {
            it = still.emplace(id, admission_view(std::move(*j))).first;
        } else {
            continue;
        }
        order.push_back(&it->second);
    }
    waiting_ = std::move(still);
    for (const JobRecord* waiting : order) {
        const JobRecord& j = *waiting;
        // A job held back by its label's quota does not hold up other labels.
        if (!quota_allows(j, running)) continue;
        // Strict order otherwise: the first job that does not fit stops admission, so a large job is
        // never starved by smaller ones behind it.
        if (cpus + j.spec.cpus() > opts_.capacity.cpus || gpus + j.spec.gpus() > opts_.capacity.gpus) break;
        running.push_back(j);
        cpus += j.spec.cpus();
        gpus += j.spec.gpus();
        const int64_t id = j.id;
        // The start reads the whole row; it starts only from the state admission saw, so a job
        // cancelled since (its row now `cancelled`) is not started from there.
        if (auto full = store_.get(id); full && full->state == j.state) start_attempt(*full);
        waiting_.erase(id);  // it comes back to waiting (retrying) with another row
    }
}

void Scheduler::start_attempt(const JobRecord& j) {
    const fs::path dir = job_dir(opts_.data_dir, j.id);
    const int attempt = j.attempts + 1;
    JobUpdate u;
    u.start_attempt = true;
    u.detail = fmt::format("attempt {} started", attempt);
    if (!store_.transition(j.id, j.state, JobState::kRunning, u)) return;  // cancelled meanwhile
    log_job_started(j.id, attempt);
    try {
        make_dirs(dir);
        AttemptRequest req{
            j.id, attempt, dir, dir / "config.yaml", j.spec, dir / "runs" / fmt::format("job-{}", j.id)};
        if (j.spec.is_command()) {
            // A program of the submitter's: no config to check or place; its outputs go to the run
            // directory, which the artifacts and metrics routes read (server/jobs/command_job.h).
            make_dirs(req.run_dir);
            exec_.start(req, [&](const std::string& handle) { store_.set_handle(j.id, handle); });
            return;
        }
        // The policy again (the operator may have narrowed it since the submit), then the job's writes
        // placed in its own directory. The run directory is fixed per job, so every attempt resumes the
        // same run (--resume auto).
        auto submitted = config::load_config_string(j.config_yaml, fmt::format("job {} config", j.id));
        check_job_access(submitted, opts_.access);
        auto sets = job_write_overrides(submitted, exec_.job_write_root(req));
        sets.push_back("output.root_dir=" + (dir / "runs").string());
        sets.push_back(fmt::format("output.run_id=job-{}", j.id));
        auto cfg = config::load_config_string(j.config_yaml, fmt::format("job {} config", j.id), sets);
        write_file_atomic(req.config_path, config::to_yaml_written(cfg));  // written keys only (hf_config.h)
        if (j.spec.resume_from > 0)
            seed_resumed_run(
                job_dir(opts_.data_dir, j.spec.resume_from) / "runs" / fmt::format("job-{}", j.spec.resume_from),
                dir / "runs" / fmt::format("job-{}", j.id));
        exec_.start(req, [&](const std::string& handle) { store_.set_handle(j.id, handle); });
    } catch (const std::exception& e) {
        JobUpdate f;
        f.finish = true;
        f.reason = std::string("could not start: ") + e.what();
        f.detail = *f.reason;
        store_.transition(j.id, JobState::kRunning, JobState::kFailed, f);
        log_job_finished(j.id, state_name(JobState::kFailed), std::nullopt, 0, *f.reason);
    }
}

}  // namespace llmt::server
