// FileMetaData and PageHeader decoding (parquet_meta.h) on top of ThriftReader.
#include "data/parquet_meta.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/thrift_compact.h"

namespace llmt::data::parquet {

namespace {

using T = ThriftType;

void expect(ThriftReader& r, const ThriftField& f, T type) {
    if (f.type != type) r.fail(fmt::format("field {} has thrift type {}, expected {}", f.id, static_cast<int>(f.type), static_cast<int>(type)));
}

int32_t field_i32(ThriftReader& r, const ThriftField& f) {
    expect(r, f, T::kI32);
    return r.read_i32();
}

int64_t field_i64(ThriftReader& r, const ThriftField& f) {
    expect(r, f, T::kI64);
    return r.read_i64();
}

// LogicalType is a union; only STRING (field 1) matters here.
bool read_logical_is_string(ThriftReader& r) {
    bool is_string = false;
    r.begin_struct();
    ThriftField f;
    while (r.next_field(f)) {
        if (f.id == 1 && f.type == T::kStruct) is_string = true;
        r.skip(f.type);
    }
    r.end_struct();
    return is_string;
}

SchemaElement read_schema_element(ThriftReader& r) {
    SchemaElement e;
    r.begin_struct();
    ThriftField f;
    while (r.next_field(f)) {
        switch (f.id) {
            case 1: e.type = field_i32(r, f); break;
            case 3: e.repetition = field_i32(r, f); break;
            case 4: expect(r, f, T::kBinary); e.name = r.read_binary(); break;
            case 5: e.num_children = field_i32(r, f); break;
            case 6: e.converted_type = field_i32(r, f); break;
            case 10: expect(r, f, T::kStruct); e.logical_string = read_logical_is_string(r); break;
            default: r.skip(f.type);
        }
    }
    r.end_struct();
    return e;
}

void read_column_metadata(ThriftReader& r, ColumnChunk& c) {
    r.begin_struct();
    ThriftField f;
    while (r.next_field(f)) {
        switch (f.id) {
            case 1: c.type = field_i32(r, f); break;
            case 3: {
                expect(r, f, T::kList);
                const ThriftList l = r.read_list_header();
                if (l.elem != T::kBinary) r.fail("path_in_schema is not a list of strings");
                for (uint32_t i = 0; i < l.size; ++i) c.path.push_back(r.read_binary());
                break;
            }
            case 4: c.codec = field_i32(r, f); break;
            case 5: c.num_values = field_i64(r, f); break;
            case 7: c.total_compressed_size = field_i64(r, f); break;
            case 9: c.data_page_offset = field_i64(r, f); break;
            case 11: c.dictionary_page_offset = field_i64(r, f); break;
            default: r.skip(f.type);
        }
    }
    r.end_struct();
}

ColumnChunk read_column_chunk(ThriftReader& r) {
    ColumnChunk c;
    bool has_meta = false;
    r.begin_struct();
    ThriftField f;
    while (r.next_field(f)) {
        if (f.id == 1 && f.type == T::kBinary) {
            c.external = !r.read_binary().empty();
        } else if (f.id == 3 && f.type == T::kStruct) {
            read_column_metadata(r, c);
            has_meta = true;
        } else {
            r.skip(f.type);
        }
    }
    r.end_struct();
    if (!has_meta) r.fail("a column chunk has no meta_data");
    return c;
}

RowGroup read_row_group(ThriftReader& r) {
    RowGroup g;
    r.begin_struct();
    ThriftField f;
    while (r.next_field(f)) {
        if (f.id == 1 && f.type == T::kList) {
            const ThriftList l = r.read_list_header();
            if (l.elem != T::kStruct) r.fail("row group columns are not structs");
            for (uint32_t i = 0; i < l.size; ++i) g.columns.push_back(read_column_chunk(r));
        } else if (f.id == 3) {
            g.num_rows = field_i64(r, f);
        } else {
            r.skip(f.type);
        }
    }
    r.end_struct();
    return g;
}

void read_data_page_header(ThriftReader& r, PageHeader& h) {
    r.begin_struct();
    ThriftField f;
    while (r.next_field(f)) {
        switch (f.id) {
            case 1: h.num_values = field_i32(r, f); break;
            case 2: h.encoding = field_i32(r, f); break;
            case 3: h.def_encoding = field_i32(r, f); break;
            case 4: h.rep_encoding = field_i32(r, f); break;
            default: r.skip(f.type);
        }
    }
    r.end_struct();
}

void read_dictionary_page_header(ThriftReader& r, PageHeader& h) {
    r.begin_struct();
    ThriftField f;
    while (r.next_field(f)) {
        switch (f.id) {
            case 1: h.num_values = field_i32(r, f); break;
            case 2: h.encoding = field_i32(r, f); break;
            default: r.skip(f.type);
        }
    }
    r.end_struct();
}

void read_data_page_header_v2(ThriftReader& r, PageHeader& h) {
    r.begin_struct();
    ThriftField f;
    while (r.next_field(f)) {
        switch (f.id) {
            case 1: h.num_values = field_i32(r, f); break;
            case 2: h.num_nulls = field_i32(r, f); break;
            case 3: h.num_rows = field_i32(r, f); break;
            case 4: h.encoding = field_i32(r, f); break;
            case 5: h.def_bytes = field_i32(r, f); break;
            case 6: h.rep_bytes = field_i32(r, f); break;
            case 7: h.is_compressed = r.read_bool(f); break;
            default: r.skip(f.type);
        }
    }
    r.end_struct();
}

}  // namespace

FileMetaData decode_file_metadata(const uint8_t* data, std::size_t size, uint64_t base, std::string_view file) {
    ThriftReader r(data, size, base, file, "the file metadata (footer)");
    FileMetaData m;
    r.begin_struct();
    ThriftField f;
    while (r.next_field(f)) {
        if (f.id == 2 && f.type == T::kList) {
            const ThriftList l = r.read_list_header();
            if (l.elem != T::kStruct) r.fail("schema is not a list of structs");
            m.schema.reserve(l.size);
            for (uint32_t i = 0; i < l.size; ++i) m.schema.push_back(read_schema_element(r));
        } else if (f.id == 3) {
            m.num_rows = field_i64(r, f);
        } else if (f.id == 4 && f.type == T::kList) {
            const ThriftList l = r.read_list_header();
            if (l.elem != T::kStruct) r.fail("row_groups is not a list of structs");
            m.row_groups.reserve(l.size);
            for (uint32_t i = 0; i < l.size; ++i) m.row_groups.push_back(read_row_group(r));
        } else {
            r.skip(f.type);
        }
    }
    r.end_struct();
    if (m.schema.empty()) r.fail("the schema is empty");
    return m;
}

bool decode_page_header(const uint8_t* data, std::size_t size, uint64_t base, std::string_view file, std::string_view column,
                        PageHeader& h) {
    const std::string context = fmt::format("a page header of column '{}'", column);
    ThriftReader r(data, size, base, file, context);
    h = PageHeader{};
    try {
        r.begin_struct();
        ThriftField f;
        while (r.next_field(f)) {
            switch (f.id) {
                case 1: h.type = field_i32(r, f); break;
                case 2: h.uncompressed_size = field_i32(r, f); break;
                case 3: h.compressed_size = field_i32(r, f); break;
                case 5: expect(r, f, T::kStruct); read_data_page_header(r, h); break;
                case 7: expect(r, f, T::kStruct); read_dictionary_page_header(r, h); break;
                case 8: expect(r, f, T::kStruct); read_data_page_header_v2(r, h); break;
                default: r.skip(f.type);
            }
        }
        r.end_struct();
    } catch (const FormatError&) {
        if (r.truncated()) return false;
        throw;
    }
    h.header_bytes = r.position();
    if (h.type < 0 || h.uncompressed_size < 0 || h.compressed_size < 0) {
        throw FormatError(fmt::format("{}: byte offset {}: page header of column '{}' lacks its type or sizes", file, base, column));
    }
    return true;
}

}  // namespace llmt::data::parquet
