// Test support: a real S3-compatible server (npm s3rver, pinned in tests/storage/s3rver/package-lock.json,
// installed by scripts/setup.d/60-s3rver.sh) on a free loopback port over a temp directory, with one
// bucket. stop()/start() restart it on the same port and data (an outage); pause()/resume() freeze it
// (SIGSTOP/SIGCONT: connections hang, as with a stalled store). s3rver checks SigV2 signatures but not
// SigV4 ones (tests/storage/sigv4_test.cpp checks ours against AWS's example and botocore).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "storage/s3_settings.h"
#include "support/free_port.h"

namespace llmt::testing {

class S3rver {
public:
    static std::filesystem::path binary() {
        return std::filesystem::path(LLMT_SOURCE_DIR) / "tests/storage/s3rver/node_modules/.bin/s3rver";
    }

    explicit S3rver(std::string bucket = "llmt-test")
        : bucket_(std::move(bucket)),
          dir_(std::filesystem::temp_directory_path() / ("llmt_s3rver_" + std::to_string(::getpid()) + "_" +
                                                          std::to_string(counter()++))) {
        if (!std::filesystem::exists(binary()))
            throw std::runtime_error(binary().string() +
                                     " is missing (hint: run scripts/setup.sh, which installs s3rver)");
        std::filesystem::remove_all(dir_);
        std::filesystem::create_directories(dir_);
        port_ = free_port();
        start();
    }
    ~S3rver() {
        stop();
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    S3rver(const S3rver&) = delete;
    S3rver& operator=(const S3rver&) = delete;

    void start() {
        pid_ = fork();
        if (pid_ == 0) {
            const std::string port = std::to_string(port_), bin = binary().string(), dir = dir_.string();
            execl(bin.c_str(), bin.c_str(), "-d", dir.c_str(), "-a", "127.0.0.1", "-p", port.c_str(), "-s",
                  "--configure-bucket", bucket_.c_str(), static_cast<char*>(nullptr));
            _exit(127);
        }
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!accepts()) {
            if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("s3rver did not start in 30 s");
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
    void stop() {
        if (pid_ <= 0) return;
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }
    void pause() { kill(pid_, SIGSTOP); }
    void resume() { kill(pid_, SIGCONT); }

    const std::string& bucket() const { return bucket_; }
    const std::filesystem::path& dir() const { return dir_; }
    std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
    // The environment a child process gets to reach this server (s3rver's fixed key pair).
    std::vector<std::string> env() const {
        return {"AWS_ENDPOINT_URL=" + endpoint(), "AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER",
                "AWS_REGION=us-east-1"};
    }
    storage::S3Settings settings() const {
        storage::S3Settings s;
        s.endpoint = endpoint();
        s.path_style = true;
        s.credentials = {"S3RVER", "S3RVER", ""};
        s.backoff_s = 0.05;
        s.max_backoff_s = 0.5;
        return s;
    }

private:
    static int& counter() {
        static int n = 0;
        return n;
    }
    bool accepts() const {
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(port_));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        close(fd);
        return ok;
    }

    std::string bucket_;
    std::filesystem::path dir_;
    int port_ = 0;
    pid_t pid_ = -1;
};

}  // namespace llmt::testing
