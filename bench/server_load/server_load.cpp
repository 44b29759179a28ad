// Load test of the control plane: N submissions from C concurrent clients (each its own keep-alive
// connection) against a running `llmtrain serve`, normally with --capacity cpus=0,gpus=0 so nothing
// trains. Every 10th body is invalid on purpose (a bad config value) to load the refusal path. Each
// submission carries an Idempotency-Key; a 503 (overload) is retried after its Retry-After with the
// same key, so every submission ends as at most one job. With --gets G each client also makes G GETs
// after each submission, in turn the job list, the job it just created and /metrics.
// Prints the two summary lines (p50/p90/p99/max latency per submission, retries included, and
// throughput), the 503s and transport errors, and one latency line per route. Fails (exit 1) when an
// answer is not 201, 503 or a 4xx carrying {error: {code, message}}, when a submission still has no
// answer after its retries, or when the store is inconsistent or does not hold exactly the created
// jobs afterwards (--db).
// Usage: server_load --port P --token T [--n 1000] [--clients 16] [--gets 0] [--db <data-dir>/jobs.sqlite]
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/jobs/store.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double pct(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return 0.0;
    size_t k = std::min(sorted.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(sorted.size())));
    return sorted[k];
}

constexpr int kMaxTries = 30;  // per submission, 503s retried after Retry-After

}  // namespace

int main(int argc, char** argv) {
    int port = 0, n = 1000, clients = 16, gets = 0;
    std::string token, db, host = "127.0.0.1";
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--port") port = std::stoi(v);
        else if (k == "--token") token = v;
        else if (k == "--n") n = std::stoi(v);
        else if (k == "--clients") clients = std::stoi(v);
        else if (k == "--gets") gets = std::stoi(v);
        else if (k == "--db") db = v;
        else if (k == "--host") host = v;
        else {
            std::fprintf(stderr, "server_load: unknown option %s\n", k.c_str());
            return 2;
        }
    }
    if (port <= 0 || token.empty()) {
        std::fprintf(stderr,
                     "usage: server_load --port P --token T [--n 1000] [--clients 16] [--gets 0] [--db PATH]\n");
        return 2;
    }
    const std::string run_id = std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
    std::atomic<int> next{0}, created{0}, refused{0}, bad{0}, overloaded{0}, transport{0}, retried{0};
    std::mutex mu;
    std::vector<double> lat_ms;  // per submission, retries included
    lat_ms.reserve(static_cast<size_t>(n));
    std::map<std::string, std::vector<double>> by_route;  // per request
    std::vector<std::string> problems;
    auto problem = [&](std::string p) {
        std::lock_guard lock(mu);
        problems.push_back(std::move(p));
    };
    auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (int c = 0; c < clients; ++c) {
        ts.emplace_back([&] {
            httplib::Client cli(host, port);
            cli.set_keep_alive(true);
            cli.set_read_timeout(60);
            std::vector<double> mine;
            std::map<std::string, std::vector<double>> routes;
            int64_t last_id = 0;
            for (int i = next++; i < n; i = next++) {
                nlohmann::json body = {{"name", "load-" + std::to_string(i)},
                                       {"config", "gpt2_tiny_cpu"},
                                       {"overrides", {{"trainer.max_steps", 30}}},
                                       {"labels", {{"bench", "load"}}}};
                if (i % 10 == 9) body["overrides"]["trainer.lr"] = "not-a-number";
                httplib::Headers h = {{"Authorization", "Bearer " + token},
                                      {"Idempotency-Key", "load-" + run_id + "-" + std::to_string(i)}};
                const auto s = Clock::now();
                bool answered = false;
                for (int attempt = 0; attempt < kMaxTries && !answered; ++attempt) {
                    if (attempt > 0) ++retried;
                    const auto a = Clock::now();
                    auto r = cli.Post("/v1/jobs", h, body.dump(), "application/json");
                    routes["POST /v1/jobs"].push_back(ms_since(a));
                    if (!r) {  // a reset or a timeout: retried with the same key, counted
                        ++transport;
                        problem("transport error " + httplib::to_string(r.error()));
                        continue;
                    }
                    if (r->status == 503) {
                        ++overloaded;
                        int wait_s = 1;
                        try {
                            wait_s = std::clamp(std::stoi(r->get_header_value("Retry-After")), 0, 10);
                        } catch (const std::exception&) {
                        }
                        std::this_thread::sleep_for(std::chrono::seconds(wait_s));
                        continue;
                    }
                    answered = true;
                    auto j = nlohmann::json::parse(r->body, nullptr, false);
                    if (r->status == 201 && j.is_object() && j.contains("id")) {
                        ++created;
                        last_id = j["id"].get<int64_t>();
                    } else if (r->status >= 400 && r->status < 500 && j.is_object() && j.contains("error") &&
                               !j["error"]["message"].get<std::string>().empty()) {
                        ++refused;
                    } else {
                        ++bad;
                        problem(std::to_string(r->status) + " " + r->body.substr(0, 200));
                    }
                }
                mine.push_back(ms_since(s));
                if (!answered) {
                    ++bad;
                    problem("submission " + std::to_string(i) + " unanswered after retries");
                }
                for (int g = 0; g < gets; ++g) {
                    int kind = (i * gets + g) % 3;
                    if (kind == 1 && last_id == 0) kind = 0;  // no job of ours yet
                    const std::string path = kind == 0   ? "/v1/jobs?limit=50"
                                             : kind == 1 ? "/v1/jobs/" + std::to_string(last_id)
                                                         : "/metrics";
                    const std::string route = kind == 0   ? "GET /v1/jobs"
                                              : kind == 1 ? "GET /v1/jobs/{id}"
                                                          : "GET /metrics";
                    const auto a = Clock::now();
                    auto r = cli.Get(path, {{"Authorization", "Bearer " + token}});
                    routes[route].push_back(ms_since(a));
                    if (!r) {
                        ++transport;
                        problem("transport error " + httplib::to_string(r.error()) + " on " + route);
                    } else if (r->status == 503) {
                        ++overloaded;
                    } else if (r->status != 200) {
                        ++bad;
                        problem(std::to_string(r->status) + " on " + route + ": " + r->body.substr(0, 200));
                    }
                }
            }
            std::lock_guard lock(mu);
            lat_ms.insert(lat_ms.end(), mine.begin(), mine.end());
            for (auto& [route, v] : routes) by_route[route].insert(by_route[route].end(), v.begin(), v.end());
        });
    }
    for (auto& t : ts) t.join();
    double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    std::sort(lat_ms.begin(), lat_ms.end());
    std::printf("server_load: %d submissions, %d clients: %d created (201), %d refused (4xx with reason), %d bad\n", n,
                clients, created.load(), refused.load(), bad.load());
    std::printf("latency ms: p50 %.2f  p90 %.2f  p99 %.2f  max %.2f   throughput %.0f req/s (wall %.2f s)\n",
                pct(lat_ms, 50), pct(lat_ms, 90), pct(lat_ms, 99), lat_ms.empty() ? 0.0 : lat_ms.back(), n / wall,
                wall);
    std::printf("overload: %d answers 503, %d transport errors, %d submission retries (same Idempotency-Key)\n",
                overloaded.load(), transport.load(), retried.load());
    for (auto& [route, v] : by_route) {
        std::sort(v.begin(), v.end());
        std::printf("route %-18s %6zu requests  ms: p50 %.2f  p90 %.2f  p99 %.2f  max %.2f\n", route.c_str(), v.size(),
                    pct(v, 50), pct(v, 90), pct(v, 99), v.empty() ? 0.0 : v.back());
    }
    for (size_t i = 0; i < problems.size() && i < 10; ++i) std::printf("  problem: %s\n", problems[i].c_str());
    int rc = bad == 0 ? 0 : 1;
    if (!db.empty()) {
        llmt::server::JobStore store(db);
        auto issues = store.check_consistency();
        llmt::server::ListQuery q;
        q.label = {{"bench", "load"}};
        q.limit = 1000000;
        size_t rows = store.list(q).size();
        std::printf("store: %zu rows labelled bench=load (expected %d), %zu consistency problems\n", rows,
                    created.load(), issues.size());
        for (size_t i = 0; i < issues.size() && i < 10; ++i) std::printf("  %s\n", issues[i].c_str());
        if (rows != static_cast<size_t>(created.load()) || !issues.empty()) rc = 1;
    }
    return rc;
}
