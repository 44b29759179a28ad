// Corpus readers for `data prepare`: plain text and JSONL files, directories (recursively), gzip, and
// Hugging Face dataset directories (Parquet / Arrow shards, hf_files.h).
// What a document is for each input kind is documented here and in docs/data.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/tables/hf_files.h"

namespace llmt::data {

enum class InputFormat { kText, kJsonl, kHf };

// Parses "text" / "jsonl" / "hf"; throws InputError listing the choices.
InputFormat parse_input_format(const std::string& name);
const char* format_name(InputFormat f);  // "text", "jsonl", "hf"

struct CorpusOptions {
    InputFormat format = InputFormat::kText;
    std::string text_field = "text";  // JSONL, hf: the string field (column) holding a document
    HfSelection hf;                   // hf: the split, config and revision read
    // Text: how a file splits into documents.
    //   "blank" (default): a run of one or more blank lines (empty, or only spaces/tabs/CR) ends a
    //                      document, as llm.c's tinyshakespeare prep splits on "\n\n";
    //   "file":            each file is one document, byte for byte;
    //   anything else S:   a line equal to S (a trailing CR ignored) ends a document, e.g. "%" for
    //                      fortune(6) files.
    // A document is its lines exactly as in the file (line ends included); separator lines are
    // dropped, and documents with no bytes are skipped.
    std::string doc_separator = "blank";
};

// Expands the --input arguments: a file is taken as given; a directory contributes every regular
// file below it (recursively, skipping names that start with '.'), in byte-wise sorted path order.
// Throws InputError naming a path that does not exist, or when no file is found.
std::vector<std::filesystem::path> list_input_files(const std::vector<std::string>& inputs);

// The files of the inputs for `opts.format`: hf_split_files for kHf, else list_input_files.
std::vector<std::filesystem::path> list_corpus_files(const std::vector<std::string>& inputs,
                                                     const CorpusOptions& opts);

// Streams the documents of one file, decompressing it when its name ends in ".gz" (gzip, multiple
// members allowed). Also hashes the file's raw bytes as it reads them (sha256 for the manifest).
// Errors name the file and line: IoError for read failures, FormatError for bad gzip data, a JSONL
// line that is not a JSON object, or a missing/non-string text field. kHf: each row's text_field
// column is a document (null and empty values skipped); errors name the file, column and byte offset.
// Not thread-safe.
class DocumentReader {
public:
    DocumentReader(const std::filesystem::path& path, const CorpusOptions& opts);
    ~DocumentReader();
    DocumentReader(const DocumentReader&) = delete;
    DocumentReader& operator=(const DocumentReader&) = delete;

    // Sets `doc` to the next document and returns true, or returns false at the end of the file.
    bool next(std::string& doc);

    uint64_t raw_bytes_read() const;  // bytes of the file consumed so far (compressed for .gz)
    // The sha256 of the whole raw file; call after next() returned false.
    std::string sha256_hex();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace llmt::data
