// libFuzzer target for the metrics index (src/server/runs/metrics_index.h). Contract under test: for any
// bytes, a poll returns only JSON objects whose integer "step" is past since_step, in file order; and
// an index extended across an append (the file written in two parts, polled between) answers exactly
// as a fresh index of the whole file does.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "server/runs/metrics_index.h"

namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, std::string_view data, bool append) {
    std::ofstream f(p, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

void check(const llmt::server::MetricsIndex::Since& got, int64_t since) {
    for (const auto& p : got.points) {
        if (!p.is_object() || !p.contains("step") || !p["step"].is_number_integer()) std::abort();
        if (p["step"].get<int64_t>() <= since || p["step"].get<int64_t>() > got.last_step) std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    const int64_t since = static_cast<int8_t>(data[0]);  // -128..127: steps in seeds are small
    const size_t split = data[1] % (size - 1);
    const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
    static const fs::path file =
        fs::temp_directory_path() / ("llmt_metrics_fuzz_" + std::to_string(::getpid()) + ".jsonl");
    llmt::server::MetricsIndex grown;
    write(file, text.substr(0, std::min(split, text.size())), false);
    check(grown.since(file, since), since);
    write(file, text.substr(std::min(split, text.size())), true);
    const auto incremental = grown.since(file, since);
    check(incremental, since);
    llmt::server::MetricsIndex fresh;
    const auto whole = fresh.since(file, since);
    if (whole.points != incremental.points || whole.last_step != incremental.last_step) std::abort();
    return 0;
}
