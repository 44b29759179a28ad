#include "tracking/mlflow_sink.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "tracking/mlflow_batches.h"

namespace llmt::tracking {

const char* run_status_name(RunStatus s) {
    switch (s) {
        case RunStatus::kRunning: return "RUNNING";
        case RunStatus::kFinished: return "FINISHED";
        case RunStatus::kFailed: return "FAILED";
        case RunStatus::kKilled: return "KILLED";
    }
    return "RUNNING";
}

MlflowSink::MlflowSink(std::unique_ptr<MlflowStore> store, MlflowRunSpec spec)
    : store_(std::move(store)), spec_(std::move(spec)) {
    worker_ = std::thread([this] { work(); });
}

MlflowSink::~MlflowSink() {
    finish(RunStatus::kFailed, 30);
    if (worker_.joinable()) worker_.join();
}

void MlflowSink::warn(const std::string& msg) const {
    if (spec_.warn) spec_.warn(msg);
    else std::fprintf(stderr, "tracking: %s\n", msg.c_str());
}

void MlflowSink::log(std::vector<Metric> metrics) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (finishing_ || done_) return;  // after finish(), or no run could be started
        pending_.insert(pending_.end(), std::make_move_iterator(metrics.begin()),
                        std::make_move_iterator(metrics.end()));
    }
    cv_.notify_all();
}

std::string MlflowSink::run_id() const {
    std::lock_guard<std::mutex> lk(mu_);
    return run_id_;
}

bool MlflowSink::with_retry(const std::string& what, const std::function<void()>& op) {
    double delay = spec_.backoff_first_s;
    std::chrono::steady_clock::time_point down_since;
    bool down = false;
    for (;;) {
        try {
            op();
            if (down)
                warn(
                    fmt::format("MLflow: {} reachable again after {:.0f} s; queued metrics are being delivered",
                                store_->describe(),
                                std::chrono::duration<double>(std::chrono::steady_clock::now() - down_since).count()));
            return true;
        } catch (const TransientError& e) {
            if (!down) {
                down = true;
                down_since = std::chrono::steady_clock::now();
                warn(fmt::format("MLflow: {} failed ({}); training continues, metrics are queued and retried with "
                                 "backoff",
                                 what, e.what()));
            }
        } catch (const IoError& e) {  // a shared volume's hiccup: the file store retries as well
            if (!down) {
                down = true;
                down_since = std::chrono::steady_clock::now();
                warn(fmt::format("MLflow: {} failed ({}); retrying with backoff", what, e.what()));
            }
        } catch (const std::exception& e) {
            warn(fmt::format("MLflow: {} was refused: {}", what, e.what()));
            return false;
        }
        std::unique_lock<std::mutex> lk(mu_);
        if (cv_.wait_for(lk, std::chrono::duration<double>(delay), [this] { return abandoned_; })) return false;
        delay = std::min(delay * 2, spec_.backoff_max_s);
    }
}

bool MlflowSink::start_run() {
    std::string exp_id, run_id;
    bool resumed = false;
    const bool ok = with_retry("starting the run", [&] {
        exp_id = store_->experiment_id(spec_.experiment.empty() ? "Default" : spec_.experiment);
        if (!spec_.resume_run_id.empty() && store_->has_run(spec_.resume_run_id)) {
            run_id = spec_.resume_run_id;
            resumed = true;
            store_->update_run(run_id, RunStatus::kRunning, -1);
            return;
        }
        if (!spec_.resume_run_id.empty())
            warn(fmt::format("MLflow: run {} (recorded in the run directory) is not in {}; starting a new MLflow run",
                             spec_.resume_run_id, store_->describe()));
        run_id = store_->create_run(exp_id, spec_.run_name, now_ms(), spec_.tags);
    });
    if (!ok) {
        warn(fmt::format("MLflow: no run could be started in {}; this run logs to metrics.jsonl only",
                         store_->describe()));
        return false;
    }
    {
        std::lock_guard<std::mutex> lk(mu_);
        run_id_ = run_id;
    }
    if (spec_.on_started) spec_.on_started(exp_id, run_id);
    if (!resumed) {
        for (const auto& b : split_into_batches({}, spec_.params, {}))
            if (!with_retry("logging params", [&] { store_->log_batch(run_id, b); })) break;
    }
    return true;
}

void MlflowSink::work() {
    const bool started = start_run();
    for (;;) {
        std::vector<Metric> batch;
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [this] { return !pending_.empty() || finishing_ || abandoned_; });
            if (abandoned_ || !started) break;
            if (pending_.empty()) {  // finishing, and everything is delivered
                lk.unlock();
                const RunStatus st = status_;
                const int64_t end = end_ms_;
                with_retry("closing the run", [&] { store_->update_run(run_id(), st, end); });
                break;
            }
            const size_t n = std::min(pending_.size(), kMaxBatchMetrics);
            batch.assign(pending_.begin(), pending_.begin() + static_cast<long>(n));
        }
        LogBatch b;
        b.metrics = std::move(batch);
        const bool ok = with_retry("logging metrics", [&] { store_->log_batch(run_id(), b); });
        std::lock_guard<std::mutex> lk(mu_);
        if (abandoned_ && !ok) break;
        if (!ok) dropped_ += b.metrics.size();
        pending_.erase(pending_.begin(), pending_.begin() + static_cast<long>(b.metrics.size()));
    }
    std::lock_guard<std::mutex> lk(mu_);
    done_ = true;
    cv_.notify_all();
}

size_t MlflowSink::finish(RunStatus status, double timeout_s) {
    std::unique_lock<std::mutex> lk(mu_);
    if (finished_called_) return 0;
    finished_called_ = true;
    finishing_ = true;
    status_ = status;
    end_ms_ = now_ms();
    cv_.notify_all();
    if (!cv_.wait_for(lk, std::chrono::duration<double>(timeout_s), [this] { return done_; })) {
        abandoned_ = true;
        cv_.notify_all();
        cv_.wait(lk, [this] { return done_; });
    }
    const size_t lost = pending_.size() + dropped_;
    if (abandoned_ && !pending_.empty())
        warn(fmt::format("MLflow: {} metric points could not be delivered to {} within {:.0f} s of the run's end; "
                         "metrics.jsonl in the run directory has them",
                         pending_.size(), store_->describe(), timeout_s));
    lk.unlock();
    if (worker_.joinable()) worker_.join();
    return lost;
}

}  // namespace llmt::tracking
