// Load test of the control plane's submit path: N submissions from C concurrent clients (each its own
// keep-alive connection) against a running `llmtrain serve`, normally with --capacity cpus=0,gpus=0 so
// nothing trains. Every 10th body is invalid on purpose (a bad config value) to load the refusal path.
// Prints p50/p90/p99/max latency and throughput; fails (exit 1) when any answer is not 201 or a 4xx
// carrying {error: {code, message}}, or when the store is inconsistent afterwards (--db).
// Usage: server_load --port P --token T [--n 1000] [--clients 16] [--db <data-dir>/jobs.sqlite]
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/store.h"

int main(int argc, char** argv) {
    int port = 0, n = 1000, clients = 16;
    std::string token, db, host = "127.0.0.1";
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--port") port = std::stoi(v);
        else if (k == "--token") token = v;
        else if (k == "--n") n = std::stoi(v);
        else if (k == "--clients") clients = std::stoi(v);
        else if (k == "--db") db = v;
        else if (k == "--host") host = v;
        else {
            std::fprintf(stderr, "server_load: unknown option %s\n", k.c_str());
            return 2;
        }
    }
    if (port <= 0 || token.empty()) {
        std::fprintf(stderr, "usage: server_load --port P --token T [--n 1000] [--clients 16] [--db PATH]\n");
        return 2;
    }
    std::atomic<int> next{0}, created{0}, refused{0}, bad{0};
    std::mutex mu;
    std::vector<double> lat_ms;
    lat_ms.reserve(static_cast<size_t>(n));
    std::vector<std::string> problems;
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ts;
    for (int c = 0; c < clients; ++c) {
        ts.emplace_back([&] {
            httplib::Client cli(host, port);
            cli.set_keep_alive(true);
            cli.set_read_timeout(60);
            httplib::Headers h = {{"Authorization", "Bearer " + token}};
            std::vector<double> mine;
            for (int i = next++; i < n; i = next++) {
                nlohmann::json body = {{"name", "load-" + std::to_string(i)},
                                       {"config", "gpt2_tiny_cpu"},
                                       {"overrides", {{"trainer.max_steps", 30}}},
                                       {"labels", {{"bench", "load"}}}};
                if (i % 10 == 9) body["overrides"]["trainer.lr"] = "not-a-number";
                auto s = std::chrono::steady_clock::now();
                auto r = cli.Post("/v1/jobs", h, body.dump(), "application/json");
                mine.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
                if (!r) {
                    ++bad;
                    std::lock_guard lock(mu);
                    problems.push_back("transport error " + httplib::to_string(r.error()));
                    continue;
                }
                auto j = nlohmann::json::parse(r->body, nullptr, false);
                if (r->status == 201 && j.is_object() && j.contains("id")) {
                    ++created;
                } else if (r->status >= 400 && r->status < 500 && j.is_object() && j.contains("error") &&
                           !j["error"]["message"].get<std::string>().empty()) {
                    ++refused;
                } else {
                    ++bad;
                    std::lock_guard lock(mu);
                    problems.push_back(std::to_string(r->status) + " " + r->body.substr(0, 200));
                }
            }
            std::lock_guard lock(mu);
            lat_ms.insert(lat_ms.end(), mine.begin(), mine.end());
        });
    }
    for (auto& t : ts) t.join();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::sort(lat_ms.begin(), lat_ms.end());
    auto pct = [&](double p) {
        if (lat_ms.empty()) return 0.0;
        size_t k = std::min(lat_ms.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(lat_ms.size())));
        return lat_ms[k];
    };
    std::printf("server_load: %d submissions, %d clients: %d created (201), %d refused (4xx with reason), %d bad\n", n,
                clients, created.load(), refused.load(), bad.load());
    std::printf("latency ms: p50 %.2f  p90 %.2f  p99 %.2f  max %.2f   throughput %.0f req/s (wall %.2f s)\n", pct(50),
                pct(90), pct(99), lat_ms.empty() ? 0.0 : lat_ms.back(), n / wall, wall);
    for (size_t i = 0; i < problems.size() && i < 10; ++i) std::printf("  problem: %s\n", problems[i].c_str());
    int rc = bad == 0 ? 0 : 1;
    if (!db.empty()) {
        llmt::server::JobStore store(db);
        auto issues = store.check_consistency();
        llmt::server::ListQuery q;
        q.label = {{"bench", "load"}};
        q.limit = 1000000;
        size_t rows = store.list(q).size();
        std::printf("store: %zu rows labelled bench=load (expected %d), %zu consistency problems\n", rows, created.load(),
                    issues.size());
        for (size_t i = 0; i < issues.size() && i < 10; ++i) std::printf("  %s\n", issues[i].c_str());
        if (rows != static_cast<size_t>(created.load()) || !issues.empty()) rc = 1;
    }
    return rc;
}
