// libFuzzer entry for the chat JSONL reader (src/data/chat/chat_records.h): any byte string, read as a chat
// JSONL file, must give records or throw FormatError (naming file:line), never crash or throw anything
// else. Build: add_executable + -fsanitize=fuzzer, link llmt_data. tests/data/chat_records_test.cpp
// (MutatedLinesAreRecordsOrFormatErrors) runs a seeded version of this in ctest.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "data/chat/chat_records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    try {
        const auto records = llmt::data::parse_chat_jsonl(
            std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.jsonl");
        for (const auto& r : records)
            if (r.messages.empty() || r.line == 0) std::abort();  // a record always has a turn and a line
    } catch (const llmt::FormatError&) {
    }
    return 0;
}
