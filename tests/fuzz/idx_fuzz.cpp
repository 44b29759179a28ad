// libFuzzer target for IDX files, raw and gzip (src/data/images/idx.h). Contract under test: any bytes either
// read or throw llmt::Error; what reads has exactly the bytes its dimensions declare; a .gz is never
// inflated past what its header declares (a read that succeeds on the .gz matches the raw read of the
// inflated bytes).
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "data/images/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const int rank = 1 + data[0] % 4;
    const auto dir = std::filesystem::temp_directory_path();
    static const std::string tag = std::to_string(::getpid());
    const auto raw = dir / ("llmt_idx_fuzz_" + tag + ".idx"), gz = dir / ("llmt_idx_fuzz_" + tag + ".idx.gz");
    std::ofstream(raw, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
    gzFile g = gzopen(gz.c_str(), "wb1");
    if (!g) return 0;
    if (size > 1) gzwrite(g, data + 1, static_cast<unsigned>(size - 1));
    gzclose(g);
    bool raw_ok = false;
    try {
        const auto a = llmt::data::read_idx(raw, rank);
        uint64_t n = 1;
        for (size_t d = 1; d < a.dims.size(); ++d) n *= static_cast<uint64_t>(a.dims[d]);
        if (a.data.size() != n * static_cast<uint64_t>(a.dims[0])) std::abort();
        raw_ok = true;
    } catch (const llmt::Error&) {
    }
    try {
        llmt::data::read_idx(gz, rank);
        if (!raw_ok) std::abort();  // the same bytes compressed read the same way
    } catch (const llmt::Error&) {
        if (raw_ok) std::abort();
    }
    return 0;
}
