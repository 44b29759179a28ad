// Reading a worker's TORCHELASTIC_ERROR_FILE back into the launcher's failure message (error_file.h).
#include "launch/error_file.h"

#include <fmt/format.h>
#include <string.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace llmt::launch {
namespace {

constexpr std::size_t kMaxErrorFileBytes = 1 << 20;  // a traceback, not a log: cut anything longer

std::string indent(const std::string& text, const std::string& pad) {
    std::string out;
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t nl = text.find('\n', start);
        std::string line = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
        out += pad + line + "\n";
        if (nl == std::string::npos) break;
        start = nl + 1;
    }
    return out;
}

}  // namespace

std::optional<std::string> read_error_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return std::nullopt;
    std::string text(kMaxErrorFileBytes, '\0');
    f.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(f.gcount()));
    auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("message")) {
        return fmt::format("(the error file is not torch's JSON with a \"message\"; its first line: {})",
                           text.substr(0, text.find('\n')).substr(0, 200));
    }
    const auto& m = j["message"];
    if (m.is_string()) return m.get<std::string>();
    if (!m.is_object()) return std::string("(the error file's \"message\" is neither a string nor an object)");
    std::string out = m.value("message", std::string("(no message)"));
    if (m.contains("extraInfo") && m["extraInfo"].is_object()) {
        const auto& extra = m["extraInfo"];
        if (extra.contains("py_callstack") && extra["py_callstack"].is_string()) {
            out += "\n" + extra["py_callstack"].get<std::string>();
        }
    }
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

const WorkerFailure& root_cause(const std::vector<WorkerFailure>& failures) {
    const WorkerFailure* best = &failures.front();
    std::optional<std::filesystem::file_time_type> best_time;
    for (const auto& f : failures) {
        std::error_code ec;
        if (f.error_file.empty()) continue;
        auto t = std::filesystem::last_write_time(f.error_file, ec);
        if (ec) continue;
        if (!best_time || t < *best_time) {
            best_time = t;
            best = &f;
        }
    }
    return *best;
}

std::string describe_exit_code(int code) {
    if (code > 128 && code < 128 + 65) {
        const char* name = sigabbrev_np(code - 128);
        return fmt::format("signal {} (SIG{}, exit code {})", code - 128, name ? name : "?", code);
    }
    return fmt::format("exit code {}", code);
}

std::string describe_failure(const WorkerFailure& f, const std::string& hostname) {
    char when[32] = "?";
    std::tm tm{};
    if (gmtime_r(&f.when, &tm)) std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    std::string out = fmt::format("worker rank {} (local rank {}, pid {}) on {} failed at {} with {}", f.rank,
                                  f.local_rank, f.pid, hostname, when, describe_exit_code(f.exit_code));
    if (f.error_file.empty()) return out;
    if (auto msg = read_error_file(f.error_file)) {
        out += fmt::format("\n  error file {}:\n", f.error_file);
        out += indent(*msg, "    ");
        if (!out.empty() && out.back() == '\n') out.pop_back();
    } else {
        out += fmt::format("\n  no error file: the worker wrote nothing to {} (PyTorch scripts write it from "
                           "@torch.distributed.elastic.multiprocessing.errors.record)",
                           f.error_file);
    }
    return out;
}

}  // namespace llmt::launch
