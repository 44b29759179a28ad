// FileMetaData and PageHeader decoding (parquet_meta.h) on top of ThriftReader: each struct a table of the
// field ids it keeps (parquet.thrift) and how each is stored.
#include "data/tables/parquet_meta.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "core/error.h"
#include "data/tables/thrift_compact.h"

namespace llmt::data::parquet {

namespace {

using T = ThriftType;

void expect(ThriftReader& r, const ThriftField& f, T type) {
    if (f.type != type)
        r.fail(fmt::format("field {} has thrift type {}, expected {}", f.id, static_cast<int>(f.type),
                           static_cast<int>(type)));
}

// A struct is read by a table of its fields: {id, how to store the value}; fields not listed are skipped.
template <class S>
struct Field {
    int16_t id;
    void (*read)(ThriftReader&, const ThriftField&, S&);
};

template <class S, std::size_t N>
void read_struct(ThriftReader& r, S& out, const Field<S> (&fields)[N]) {
    r.begin_struct();
    ThriftField f;
    while (r.next_field(f)) {
        const auto* it =
            std::find_if(std::begin(fields), std::end(fields), [&](const Field<S>& x) { return x.id == f.id; });
        if (it == std::end(fields)) r.skip(f.type);
        else it->read(r, f, out);
    }
    r.end_struct();
}

// The struct type a pointer to member belongs to.
template <class M>
struct MemberOf;
template <class C, class V>
struct MemberOf<V C::*> {
    using type = C;
};
template <auto M>
using Owner = typename MemberOf<decltype(M)>::type;

// Field readers that store into the member M. A scalar of thrift type K: i32, i64 or binary.
template <T K>
auto read_scalar(ThriftReader& r) {
    static_assert(K == T::kI32 || K == T::kI64 || K == T::kBinary);
    if constexpr (K == T::kI32) return r.read_i32();
    else if constexpr (K == T::kI64) return r.read_i64();
    else return r.read_binary();
}
template <auto M, T K>
void scalar(ThriftReader& r, const ThriftField& f, Owner<M>& s) {
    expect(r, f, K);
    s.*M = read_scalar<K>(r);
}
template <auto M>
constexpr auto i32 = scalar<M, T::kI32>;
template <auto M>
constexpr auto i64 = scalar<M, T::kI64>;
template <auto M>
constexpr auto binary = scalar<M, T::kBinary>;
template <auto M>
void boolean(ThriftReader& r, const ThriftField& f, Owner<M>& s) {
    s.*M = r.read_bool(f);
}
// A nested struct read into the same object, by its own table.
template <class S, const auto& Fields>
void nested(ThriftReader& r, const ThriftField& f, S& s) {
    expect(r, f, T::kStruct);
    read_struct(r, s, Fields);
}
// A list of structs, each read by `read_one` and appended to the member M.
template <auto M, auto ReadOne>
void struct_list(ThriftReader& r, const ThriftField& f, Owner<M>& s) {
    expect(r, f, T::kList);
    const ThriftList l = r.read_list_header();
    if (l.elem != T::kStruct) r.fail(fmt::format("field {} is not a list of structs", f.id));
    (s.*M).reserve((s.*M).size() + l.size);
    for (uint32_t i = 0; i < l.size; ++i) (s.*M).push_back(ReadOne(r));
}

// LogicalType is a union; only STRING (field 1) matters here.
void logical_type(ThriftReader& r, const ThriftField& f, SchemaElement& e) {
    expect(r, f, T::kStruct);
    r.begin_struct();
    ThriftField u;
    while (r.next_field(u)) {
        if (u.id == 1 && u.type == T::kStruct) e.logical_string = true;
        r.skip(u.type);
    }
    r.end_struct();
}

void path_in_schema(ThriftReader& r, const ThriftField& f, ColumnChunk& c) {
    expect(r, f, T::kList);
    const ThriftList l = r.read_list_header();
    if (l.elem != T::kBinary) r.fail("path_in_schema is not a list of strings");
    for (uint32_t i = 0; i < l.size; ++i) c.path.push_back(r.read_binary());
}

// ColumnChunk.file_path: set when the chunk's data lives in another file.
void file_path(ThriftReader& r, const ThriftField& f, ColumnChunk& c) {
    expect(r, f, T::kBinary);
    c.external = !r.read_binary().empty();
}

// Field ids from parquet.thrift.
constexpr Field<SchemaElement> kSchemaElement[] = {
    {1, i32<&SchemaElement::type>},           {3, i32<&SchemaElement::repetition>},
    {4, binary<&SchemaElement::name>},        {5, i32<&SchemaElement::num_children>},
    {6, i32<&SchemaElement::converted_type>}, {10, logical_type}};
constexpr Field<ColumnChunk> kColumnMetaData[] = {{1, i32<&ColumnChunk::type>},
                                                  {3, path_in_schema},
                                                  {4, i32<&ColumnChunk::codec>},
                                                  {5, i64<&ColumnChunk::num_values>},
                                                  {7, i64<&ColumnChunk::total_compressed_size>},
                                                  {9, i64<&ColumnChunk::data_page_offset>},
                                                  {11, i64<&ColumnChunk::dictionary_page_offset>}};
struct ColumnChunkRead {  // the chunk and whether it had its meta_data (field 3)
    ColumnChunk c;
    bool has_meta = false;
};
void column_meta_data(ThriftReader& r, const ThriftField& f, ColumnChunkRead& x) {
    nested<ColumnChunk, kColumnMetaData>(r, f, x.c);
    x.has_meta = true;
}
void chunk_file_path(ThriftReader& r, const ThriftField& f, ColumnChunkRead& x) { file_path(r, f, x.c); }
constexpr Field<ColumnChunkRead> kColumnChunk[] = {{1, chunk_file_path}, {3, column_meta_data}};
constexpr Field<PageHeader> kDataPageHeader[] = {{1, i32<&PageHeader::num_values>},
                                                 {2, i32<&PageHeader::encoding>},
                                                 {3, i32<&PageHeader::def_encoding>},
                                                 {4, i32<&PageHeader::rep_encoding>}};
constexpr Field<PageHeader> kDictionaryPageHeader[] = {{1, i32<&PageHeader::num_values>},
                                                       {2, i32<&PageHeader::encoding>}};
constexpr Field<PageHeader> kDataPageHeaderV2[] = {{1, i32<&PageHeader::num_values>}, {2, i32<&PageHeader::num_nulls>},
                                                   {3, i32<&PageHeader::num_rows>},   {4, i32<&PageHeader::encoding>},
                                                   {5, i32<&PageHeader::def_bytes>},  {6, i32<&PageHeader::rep_bytes>},
                                                   {7, boolean<&PageHeader::is_compressed>}};
constexpr Field<PageHeader> kPageHeader[] = {{1, i32<&PageHeader::type>},
                                             {2, i32<&PageHeader::uncompressed_size>},
                                             {3, i32<&PageHeader::compressed_size>},
                                             {5, nested<PageHeader, kDataPageHeader>},
                                             {7, nested<PageHeader, kDictionaryPageHeader>},
                                             {8, nested<PageHeader, kDataPageHeaderV2>}};

SchemaElement read_schema_element(ThriftReader& r) {
    SchemaElement e;
    read_struct(r, e, kSchemaElement);
    return e;
}

ColumnChunk read_column_chunk(ThriftReader& r) {
    ColumnChunkRead x;
    read_struct(r, x, kColumnChunk);
    if (!x.has_meta) r.fail("a column chunk has no meta_data");
    return x.c;
}

constexpr Field<RowGroup> kRowGroup[] = {{1, struct_list<&RowGroup::columns, read_column_chunk>},
                                         {3, i64<&RowGroup::num_rows>}};

RowGroup read_row_group(ThriftReader& r) {
    RowGroup g;
    read_struct(r, g, kRowGroup);
    return g;
}

constexpr Field<FileMetaData> kFileMetaData[] = {{2, struct_list<&FileMetaData::schema, read_schema_element>},
                                                 {3, i64<&FileMetaData::num_rows>},
                                                 {4, struct_list<&FileMetaData::row_groups, read_row_group>}};

}  // namespace

FileMetaData decode_file_metadata(const uint8_t* data, std::size_t size, uint64_t base, std::string_view file) {
    ThriftReader r(data, size, base, file, "the file metadata (footer)");
    FileMetaData m;
    read_struct(r, m, kFileMetaData);
    if (m.schema.empty()) r.fail("the schema is empty");
    return m;
}

bool decode_page_header(const uint8_t* data, std::size_t size, uint64_t base, std::string_view file,
                        std::string_view column, PageHeader& h) {
    const std::string context = fmt::format("a page header of column '{}'", column);
    ThriftReader r(data, size, base, file, context);
    h = PageHeader{};
    try {
        read_struct(r, h, kPageHeader);
    } catch (const FormatError&) {
        if (r.truncated()) return false;
        throw;
    }
    h.header_bytes = r.position();
    if (h.type < 0 || h.uncompressed_size < 0 || h.compressed_size < 0) {
        throw FormatError(
            fmt::format("{}: byte offset {}: page header of column '{}' lacks its type or sizes", file, base, column));
    }
    return true;
}

}  // namespace llmt::data::parquet
