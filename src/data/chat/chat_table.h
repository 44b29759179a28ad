// Chat data from Hugging Face dataset files (Parquet / Arrow IPC, table_reader.h): a `messages` column
// (list<struct<role, content>>) or `prompt` and `completion` string columns, one conversation a row,
// checked by the same rules and with the same messages as chat JSONL (chat_records.h).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "data/chat/chat_records.h"

namespace llmt::data {

// Every conversation of the table file at `path`; ChatRecord::line is the 1-based row. Throws
// FormatError naming "<file>: row N" and the field as parse_chat_record does, or the file and byte
// offset for a malformed file; FormatError when the file has neither column set.
std::vector<ChatRecord> read_chat_table(const std::filesystem::path& path);

// The chat inputs' files: a dataset directory (hf_files.h; its `train` split, a hub cache folder at
// `revision`) or .parquet/.arrow file contributes its table files, anything else what list_input_files
// gives (JSONL). Throws InputError for a `revision` other than "main" when no input is in a hub cache.
std::vector<std::filesystem::path> chat_input_files(const std::vector<std::string>& paths,
                                                    const std::string& revision = "main");

}  // namespace llmt::data
