// Parquet file metadata: the footer's FileMetaData and each page's PageHeader, decoded from Thrift
// compact protocol (thrift_compact.h) into the fields the readers use; unknown fields are skipped.
// Field ids and enum values follow the Apache Parquet format specification (parquet.thrift).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmt::data::parquet {

enum PhysicalType : int32_t {
    kBoolean = 0,
    kInt32 = 1,
    kInt64 = 2,
    kInt96 = 3,
    kFloat = 4,
    kDouble = 5,
    kByteArray = 6,
    kFixedLenByteArray = 7
};
enum Repetition : int32_t { kRequired = 0, kOptional = 1, kRepeated = 2 };
enum Codec : int32_t {
    kUncompressed = 0,
    kSnappy = 1,
    kGzip = 2,
    kLzo = 3,
    kBrotli = 4,
    kLz4 = 5,
    kZstd = 6,
    kLz4Raw = 7
};
enum Encoding : int32_t {
    kPlain = 0,
    kPlainDictionary = 2,
    kRle = 3,
    kBitPacked = 4,
    kDeltaBinaryPacked = 5,
    kDeltaLengthByteArray = 6,
    kDeltaByteArray = 7,
    kRleDictionary = 8,
    kByteStreamSplit = 9,
};
enum PageType : int32_t { kDataPage = 0, kIndexPage = 1, kDictionaryPage = 2, kDataPageV2 = 3 };

struct SchemaElement {
    int32_t type = -1;  // PhysicalType for leaves, -1 for groups
    int32_t repetition = kRequired;
    std::string name;
    int32_t num_children = 0;
    int32_t converted_type = -1;
    bool logical_string = false;  // LogicalType STRING
};

struct ColumnChunk {
    int32_t type = -1;
    std::vector<std::string> path;  // path_in_schema
    int32_t codec = kUncompressed;
    int64_t num_values = 0;
    int64_t total_compressed_size = 0;
    int64_t data_page_offset = -1;
    int64_t dictionary_page_offset = -1;  // -1: none
    bool external = false;                // file_path set: the data lives in another file
};

struct RowGroup {
    std::vector<ColumnChunk> columns;
    int64_t num_rows = 0;
};

struct FileMetaData {
    std::vector<SchemaElement> schema;  // depth-first, the root first
    int64_t num_rows = 0;
    std::vector<RowGroup> row_groups;
};

struct PageHeader {
    int32_t type = -1;
    int32_t uncompressed_size = -1;
    int32_t compressed_size = -1;
    int32_t num_values = 0;
    int32_t encoding = kPlain;
    int32_t def_encoding = kRle;  // data page v1
    int32_t rep_encoding = kRle;  // data page v1
    int32_t num_nulls = 0;         // v2
    int32_t num_rows = 0;          // v2
    int32_t def_bytes = 0;         // v2: level bytes before the (maybe compressed) values
    int32_t rep_bytes = 0;         // v2
    bool is_compressed = true;     // v2
    std::size_t header_bytes = 0;  // bytes the header itself took
};

// Decodes the footer bytes (FileMetaData) that start at `base` in `file`; throws FormatError naming
// the file and byte offset.
FileMetaData decode_file_metadata(const uint8_t* data, std::size_t size, uint64_t base, std::string_view file);

// Decodes a page header from the bytes at `base`. Returns false, without throwing, when the bytes end
// before the header does (the caller reads more); throws FormatError for anything malformed.
bool decode_page_header(const uint8_t* data, std::size_t size, uint64_t base, std::string_view file,
                        std::string_view column, PageHeader& out);

}  // namespace llmt::data::parquet
