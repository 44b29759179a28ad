// Support for the soak test (soak_test.cpp): a tally of requests by kind and status, the server's
// process figures (RSS, open files, CPU), the hostile requests it replays, and the tiny job it submits.
// Header-only, for tests.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "security/proc_stats.h"
#include "security/raw_http.h"
#include "support/hostile_input.h"

namespace llmt::testing {

// The status a tally records for a connection the server closed without an answer, as it should.
constexpr int kClosed = 1;

// Requests by kind and final status, and the answers a kind must never get (the first few kept).
class Tally {
public:
    void add(const std::string& kind, int status, bool expected, const std::string& what = "") {
        std::lock_guard lock(mu_);
        ++by_kind_[kind][status];
        ++total_;
        if (!expected) {
            ++unexpected_;
            if (examples_.size() < 20)
                examples_.push_back(kind + " -> " + std::to_string(status) + " " + what.substr(0, 300));
        }
    }
    int64_t total() const {
        std::lock_guard lock(mu_);
        return total_;
    }
    int64_t unexpected() const {
        std::lock_guard lock(mu_);
        return unexpected_;
    }
    std::vector<std::string> examples() const {
        std::lock_guard lock(mu_);
        return examples_;
    }
    // One line per kind: "kind  total  (status: n, ...)".
    std::string table() const {
        std::lock_guard lock(mu_);
        std::ostringstream out;
        for (const auto& [kind, statuses] : by_kind_) {
            int64_t n = 0;
            std::string detail;
            for (const auto& [status, count] : statuses) {
                n += count;
                detail += (detail.empty() ? "" : ", ") +
                          (status == 0         ? std::string("none")
                           : status == kClosed ? std::string("closed")
                                               : std::to_string(status)) +
                          ": " + std::to_string(count);
            }
            out << "  " << kind << std::string(kind.size() < 22 ? 22 - kind.size() : 1, ' ') << n << "  (" << detail
                << ")\n";
        }
        return out.str();
    }

private:
    mutable std::mutex mu_;
    std::map<std::string, std::map<int, int64_t>> by_kind_;
    int64_t total_ = 0, unexpected_ = 0;
    std::vector<std::string> examples_;
};

// The server process's figures at one moment.
struct ProcessSample {
    double t_s = 0;        // since the traffic started
    int64_t rss_kb = 0;    // VmRSS
    int open_files = 0;    // entries of /proc/<pid>/fd
    double cpu_s = 0;      // user + system CPU time since the process started
    int64_t requests = 0;  // requests the clients had completed
};

inline ProcessSample sample_process(pid_t pid, double t_s, int64_t requests) {
    return {t_s, vm_rss_kb(pid), open_files(pid), process_cpu_s(pid), requests};
}

// A raw request: `method target` with the given extra head lines and body (Content-Length added
// unless the extra lines frame the body themselves).
inline std::string raw_request(const std::string& method, const std::string& target, const std::string& token,
                               const std::string& body = "", const std::string& extra = "", bool add_length = true) {
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
    if (!token.empty()) req += "Authorization: Bearer " + token + "\r\n";
    if (!body.empty() || method == "POST") req += "Content-Type: application/json\r\n";
    if (add_length && (!body.empty() || method == "POST"))
        req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    return req + extra + "\r\n" + body;
}

// One hostile request and the answers it may get.
struct Hostile {
    std::string kind;
    std::string request;
    std::vector<int> expected;
};

// The hostile requests of the soak, the `i`-th of a rotation: each is a refusal the server must give
// at once (never a 5xx, a hang or a crash). `token`: a submitter's; `viewer`: a viewer's.
inline Hostile hostile_request(int i, const std::string& token, const std::string& viewer) {
    const auto submit = [&](const std::string& body) { return raw_request("POST", "/v1/jobs", token, body); };
    switch (i % 14) {
        case 0: return {"hostile_deep_nesting", submit(std::string(100000, '[')), {400}};
        case 1:
            return {
                "hostile_1e400", submit(R"({"name": "n", "config": "gpt2_tiny_cpu", "budget_usd": 1e400})"), {400}};
        case 2:
            return {
                "hostile_duplicate_key", submit(R"({"name": "a", "name": "b", "config": "gpt2_tiny_cpu"})"), {400}};
        case 3: {
            const nlohmann::json body = {{"name", "bomb"}, {"config", yaml_alias_bomb()}};
            return {"hostile_alias_bomb", submit(body.dump()), {400}};
        }
        case 4: {  // a distinct 900 KB override value the estimate accepts (the preset cache's byte bound)
            const nlohmann::json body = {
                {"name", "big"},
                {"config", "gpt2_tiny_cpu"},
                {"overrides", {{"tracking.mlflow.run_name", std::string(900000, 'v') + std::to_string(i)}}}};
            return {"hostile_big_override_ok", raw_request("POST", "/v1/estimate", viewer, body.dump()), {200}};
        }
        case 5: {  // ... and one it refuses (never cached, never quoted)
            const nlohmann::json body = {
                {"name", "big"},
                {"config", "gpt2_tiny_cpu"},
                {"overrides", {{"trainer.lr", std::string(900000, 'v') + std::to_string(i)}}}};
            return {"hostile_big_override_refused", raw_request("POST", "/v1/estimate", viewer, body.dump()), {400}};
        }
        case 6: return {"hostile_over_body_limit", submit(std::string(2u << 20, ' ')), {413}};
        case 7:
            return {"hostile_gzip_body",
                    raw_request("POST", "/v1/jobs", token, "\x1f\x8b", "Content-Encoding: gzip\r\n"),
                    {415}};
        case 8:
            return {"hostile_jsonrpc_bad_version",
                    raw_request("POST", "/mcp", viewer, R"({"jsonrpc": 5, "id": 1, "method": "tools/list"})"),
                    {400}};
        case 9:
            return {"hostile_no_token",
                    raw_request("POST", "/v1/jobs", "", R"({"name": "x", "config": "gpt2_tiny_cpu"})"),
                    {401}};
        case 10:
            return {"hostile_smuggling_framing",
                    raw_request("POST", "/v1/jobs", token, "0\r\n\r\n",
                                "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", false),
                    {400}};
        case 11: return {"hostile_bad_name", submit(R"({"name": "../etc", "config": "gpt2_tiny_cpu"})"), {400}};
        case 12:
            return {"hostile_viewer_submits",
                    raw_request("POST", "/v1/jobs", viewer, R"({"name": "v", "config": "gpt2_tiny_cpu"})"),
                    {403}};
        default:
            return {"hostile_huge_head",
                    raw_request("GET", "/healthz", "", "", "X-Pad: " + std::string(20000, 'p') + "\r\n"),
                    {431}};
    }
}

// A tiny language model (vocabulary 64, 2 layers of width 16) that trains `steps` steps on the shards
// under `shards`, one thread, a checkpoint every 100 steps (a few KB each), a metrics line per step.
inline std::string soak_job_config(const std::filesystem::path& shards, int steps) {
    return "schema_version: 1\n"
           "run: {name: soak, seed: 7, device: cpu, threads: 1}\n"
           "model: {arch: gpt2, n_layer: 2, n_head: 2, d_model: 16, block_size: 8, vocab_size: 64, "
           "vocab_pad_multiple: "
           "64}\n"
           "trainer: {max_steps: " +
           std::to_string(steps) +
           ", micro_batch_size: 2, lr: 1.0e-2, min_lr: 1.0e-3, warmup_steps: 1, "
           "log_every_steps: 1, eval_every_steps: 0, eval_steps: 2, save_every_steps: 100, keep_last: 1}\n"
           "data: {source: shards, train_shards: \"" +
           (shards / "train_*.bin").string() + "\", val_shards: \"" + (shards / "val_*.bin").string() + "\"}\n";
}

}  // namespace llmt::testing
