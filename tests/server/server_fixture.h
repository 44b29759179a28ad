// Test support for the control plane: a real `llmtrain serve` child process on loopback (port 0, read
// back from --port-file), an HTTP client with a bearer token, a tiny training config on shards this
// fixture prepares once, and polling helpers.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "core/fs.h"
#include "support/subprocess.h"

namespace llmt::testing {

namespace fs = std::filesystem;

inline const char* kAdminToken = "admin-token-0123456789abcdef";
inline const char* kSubmitterToken = "submit-token-0123456789abcdef";
inline const char* kOtherSubmitterToken = "other-token-0123456789abcdef";
inline const char* kViewerToken = "viewer-token-0123456789abcdef";
inline const char* kRunnerToken = "runner-token-0123456789abcdef";  // may submit command jobs

// A server process. Destruction kills it (SIGKILL) if it still runs. Jobs may read under the suite's
// temporary directory (root's parent: the shards tests prepare) unless `extra` has --allow-read of its own;
// the server's data dir inside it stays unreadable (server/jobs/job_access.h). Presets come from the
// checkout's configs/presets unless `extra` has --presets-dir.
class ServeProcess {
public:
    ServeProcess(const fs::path& root, std::vector<std::string> extra) : root_(root) {
        fs::create_directories(root);
        std::ofstream(root / "tokens") << kAdminToken << " alice admin\n"
                                       << kSubmitterToken << " bob submitter\n"
                                       << kOtherSubmitterToken << " carol submitter\n"
                                       << kViewerToken << " victor viewer\n"
                                       << kRunnerToken << " rita runner\n";
        fs::remove(root / "port");
        std::vector<std::string> args = {llmtrain_bin(),   "serve",
                                         "--listen",       "127.0.0.1:0",
                                         "--data-dir",     (root / "data").string(),
                                         "--tokens-file",  (root / "tokens").string(),
                                         "--port-file",    (root / "port").string(),
                                         "--kill-grace-s", "20"};
        if (std::find(extra.begin(), extra.end(), "--presets-dir") == extra.end())
            args.insert(args.end(), {"--presets-dir", std::string(LLMT_SOURCE_DIR) + "/configs/presets"});
        if (std::find(extra.begin(), extra.end(), "--allow-read") == extra.end())
            extra.insert(extra.end(), {"--allow-read", root.parent_path().string()});
        args.insert(args.end(), extra.begin(), extra.end());
        std::string log = (root / "serve.log").string();
        pid_ = ::fork();
        if (pid_ == 0) {
            int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
            ::dup2(fd, 1);
            ::dup2(fd, 2);
            std::vector<char*> argv;
            for (auto& a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execv(argv[0], argv.data());
            _exit(127);
        }
        for (int i = 0; i < 600 && !fs::exists(root / "port"); ++i) {
            int st;
            if (::waitpid(pid_, &st, WNOHANG) == pid_) {
                pid_ = -1;
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        if (!fs::exists(root / "port")) throw std::runtime_error("serve did not start: " + llmt::read_file(log));
        std::string hp = llmt::read_file(root / "port");
        port_ = std::stoi(hp.substr(hp.rfind(':') + 1));
    }
    ~ServeProcess() { kill9(); }
    void kill9() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
            pid_ = -1;
        }
    }
    // SIGTERM and wait; returns the exit status.
    int terminate() {
        int st = 0;
        ::kill(pid_, SIGTERM);
        ::waitpid(pid_, &st, 0);
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    int port() const { return port_; }
    pid_t pid() const { return pid_; }
    std::string log() const { return llmt::read_file(root_ / "serve.log"); }

private:
    fs::path root_;
    pid_t pid_ = -1;
    int port_ = 0;
};

struct Http {
    int status = 0;
    nlohmann::json body;
    std::string text;
};

class Api {
public:
    // Every request bounded by `timeout_s` on connect, read and write: a hang fails the call, not the suite.
    Api(int port, std::string token, int timeout_s = 60) : cli_("127.0.0.1", port), token_(std::move(token)) {
        cli_.set_connection_timeout(timeout_s);
        cli_.set_read_timeout(timeout_s);
        cli_.set_write_timeout(timeout_s);
    }
    httplib::Headers headers() const {
        httplib::Headers h;
        if (!token_.empty()) h.emplace("Authorization", "Bearer " + token_);
        return h;
    }
    Http get(const std::string& path) { return wrap(cli_.Get(path, headers())); }
    Http post(const std::string& path, const std::string& body) {
        return wrap(cli_.Post(path, headers(), body, "application/json"));
    }
    Http post(const std::string& path, const char* body) { return post(path, std::string(body)); }
    Http post(const std::string& path, const nlohmann::json& body) { return post(path, body.dump()); }

private:
    static Http wrap(const httplib::Result& r) {
        Http h;
        if (!r) {
            h.status = -1;
            h.text = "transport error " + httplib::to_string(r.error());
            return h;
        }
        h.status = r->status;
        h.text = r->body;
        h.body = nlohmann::json::parse(r->body, nullptr, false);
        return h;
    }
    httplib::Client cli_;
    std::string token_;
};

// Polls `pred` every 100 ms until it holds or `timeout_s` passes.
inline bool wait_for(const std::function<bool()>& pred, double timeout_s) {
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < until) {
        if (pred()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return pred();
}

// Cancels every job in one of `states` and waits (up to 60 s each) until it is cancelled: jobs run in
// process groups of their own and outlive the server, so a suite calls this before stopping it.
inline void cancel_jobs(Api& admin, std::initializer_list<const char*> states) {
    for (const char* state : states) {
        // Held in a variable: a range-for over `get(...).body["jobs"]` would iterate inside a destroyed
        // temporary (ASan: heap-use-after-free).
        const Http listed = admin.get(std::string("/v1/jobs?state=") + state);
        if (!listed.body.is_object() || !listed.body.contains("jobs")) continue;
        for (const auto& j : listed.body.at("jobs")) {
            const std::string id = std::to_string(j.at("id").get<int64_t>());
            admin.post("/v1/jobs/" + id + "/cancel", "");
            wait_for([&] { return admin.get("/v1/jobs/" + id).body.value("state", "") == "cancelled"; }, 60);
        }
    }
}

// Shards of a small synthetic corpus (prepared once per test binary) and a tiny model config on them.
inline fs::path prepare_shards(const fs::path& root) {
    fs::create_directories(root);
    if (fs::exists(root / "shards/done")) return root / "shards";
    std::string s;
    const char* names[] = {"alpha", "beta", "gamma", "delta", "omega"};
    for (int d = 0; d < 200; ++d) {
        for (int i = 0; i < 12; ++i)
            s += std::string("The ") + names[(d + i) % 5] + " counts " + std::to_string(i) + ".\n";
        s += "\n";  // a blank line ends a document
    }
    llmt::write_file_atomic(root / "corpus.txt", s);
    auto r = run_process({llmtrain_bin(), "data", "prepare", "--input", (root / "corpus.txt").string(), "--format",
                          "text", "--out", (root / "shards").string(), "--val-fraction", "0.1"},
                         "", 300);
    if (r.exit_code != 0) throw std::runtime_error("data prepare failed: " + r.err);
    std::ofstream(root / "shards/done") << "ok\n";
    return root / "shards";
}

// YAML of a tiny model that trains `steps` steps on the prepared shards, one thread.
inline std::string tiny_config(const fs::path& shards, int steps, int save_every = 0) {
    return "run: {name: t, seed: 7, device: cpu, threads: 1}\n"
           "model: {n_layer: 1, n_head: 2, d_model: 32, block_size: 32, vocab_pad_multiple: 64}\n"
           "trainer: {max_steps: " +
           std::to_string(steps) +
           ", micro_batch_size: 2, grad_accum_steps: 1, lr: 3.0e-3, "
           "warmup_steps: 2, log_every_steps: 1, eval_every_steps: 0, save_every_steps: " +
           std::to_string(save_every) +
           ", keep_last: 2}\n"
           "data: {train_shards: " +
           (shards / "train_*.bin").string() + ", val_shards: " + (shards / "val_*.bin").string() + "}\n";
}

}  // namespace llmt::testing
