// libFuzzer entry for the dataset table readers (src/data/tables/table_reader.h), built twice: parquet_fuzz
// (Parquet: footer, Thrift compact protocol, pages, codecs, encodings, levels) and arrow_fuzz (Arrow IPC:
// stream and file formats, FlatBuffers metadata, buffers), which differ in their seeds
// (tests/fuzz/corpus/parquet/, tests/fuzz/corpus/arrow/: pyarrow files from tests/data/fixtures/hf) and so in
// the format the mutations explore. Any byte string, opened as a table and read through a string column and
// a messages column, must read cleanly or throw FormatError / InputError, and never allocate beyond the
// limits the reader sets. The input lives in a memfd so no disk is touched per run.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/tables/table_reader.h"

namespace {

int input_fd() {
    static const int fd = ::memfd_create(LLMT_FUZZ_NAME, 0);
    if (fd < 0) std::abort();
    return fd;
}

void put(const uint8_t* data, std::size_t size) {
    if (::ftruncate(input_fd(), 0) != 0) std::abort();
    std::size_t done = 0;
    while (done < size) {
        const ssize_t n = ::pwrite(input_fd(), data + done, size - done, static_cast<off_t>(done));
        if (n <= 0) std::abort();
        done += static_cast<std::size_t>(n);
    }
}

void read_all(const std::string& path, const llmt::data::ColumnSpec& spec) {
    try {
        auto t = llmt::data::open_table(path);
        t->select({spec});
        std::vector<llmt::data::TableCell> row;
        while (t->next_row(row)) {
        }
    } catch (const llmt::InputError&) {
        // FormatError (a subclass) for malformed input: expected
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    put(data, size);
    const std::string path = "/proc/self/fd/" + std::to_string(input_fd());
    read_all(path, {"text", llmt::data::ColumnKind::kString});
    read_all(path, {"messages", llmt::data::ColumnKind::kMessages});
    return 0;
}
