// libFuzzer entry for the token shard reader (src/data/shards/shard.h): any byte string, read as an llm.c
// shard and as a nanoGPT file, must open and validate cleanly or throw FormatError. Build: add_executable
// + -fsanitize=fuzzer, link llmt_data. tests/data/shard_test.cpp (FuzzRandomAndMutatedBytes) runs a
// seeded version of this in ctest. The input lives in a memfd so no disk is touched per run.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/shards/shard.h"
#include "data/shards/shard_set.h"

namespace {

const std::string& input_path() {
    static const std::string path = [] {
        const int fd = ::memfd_create("shard_fuzz", 0);
        if (fd < 0) std::abort();
        return "/proc/self/fd/" + std::to_string(fd);
    }();
    return path;
}

void put(const uint8_t* data, std::size_t size) {
    const int fd = std::stoi(input_path().substr(std::string("/proc/self/fd/").size()));
    if (::ftruncate(fd, 0) != 0) std::abort();
    std::size_t done = 0;
    while (done < size) {
        const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
        if (n <= 0) std::abort();
        done += static_cast<std::size_t>(n);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    put(data, size);
    // The first byte picks the vocabulary size so both the uint16 and uint32 id checks are reached.
    const std::size_t vocab = size > 0 && (data[0] & 1) ? 128256 : 50257;
    for (auto format : {llmt::data::ShardFormat::kLlmc, llmt::data::ShardFormat::kNanoGptU16}) {
        try {
            auto s = llmt::data::Shard::open(input_path(), format, vocab);
            s.validate();
            if (s.size() >= 2) {
                std::vector<int32_t> buf(s.size() - 1);
                s.read(1, s.size() - 1, buf.data());
            }
            llmt::data::ShardSet set({input_path()}, format, vocab);
            std::vector<int32_t> all(set.size());
            set.read(0, set.size(), all.data());
        } catch (const llmt::FormatError&) {
            // expected for malformed input
        } catch (const llmt::InputError&) {
            // ShardSet: no tokens at all
        }
    }
    return 0;
}
