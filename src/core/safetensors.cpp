// safetensors reader/writer. The validation rules follow the reference implementation's
// (safetensors/src/tensor.rs `Metadata::validate`): offsets sorted, contiguous from 0, covering the
// whole data section, and each byte length equal to shape product x dtype size.
#include "core/safetensors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/json_describe.h"
#include "core/json_parse.h"
#include "core/unique_fd.h"
#include "core/fs.h"
#include "core/regular_file.h"
#include "core/safetensors_integrity.h"
#include "core/strings.h"
#include "core/write_into_place.h"

namespace llmt {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

// The reference implementation refuses headers above 100 MB; so do we, before allocating anything.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

// A name from the header as messages show it: at most 128 bytes (a header may hold a 100 MB key).
std::string shown(const std::string& name) { return name.size() <= 128 ? name : name.substr(0, 128) + "..."; }

struct DTypeRow {
    StDType type;
    const char* name;
    std::size_t size;
};
constexpr DTypeRow kDTypes[] = {
    {StDType::kBool, "BOOL", 1},     {StDType::kU8, "U8", 1},     {StDType::kI8, "I8", 1},
    {StDType::kF8E5M2, "F8_E5M2", 1}, {StDType::kF8E4M3, "F8_E4M3", 1}, {StDType::kI16, "I16", 2},
    {StDType::kU16, "U16", 2},       {StDType::kF16, "F16", 2},   {StDType::kBF16, "BF16", 2},
    {StDType::kI32, "I32", 4},       {StDType::kU32, "U32", 4},   {StDType::kF32, "F32", 4},
    {StDType::kF64, "F64", 8},       {StDType::kI64, "I64", 8},   {StDType::kU64, "U64", 8},
};

const DTypeRow& row(StDType t) {
    for (const auto& r : kDTypes)
        if (r.type == t) return r;
    throw Error("internal: unknown StDType");
}

bool is_float(StDType t) {
    return t == StDType::kF32 || t == StDType::kBF16 || t == StDType::kF16 || t == StDType::kF64;
}

float f16_to_f32(std::uint16_t h) {
    std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    std::uint32_t exp = (h >> 10) & 0x1fu;
    std::uint32_t mant = h & 0x3ffu;
    std::uint32_t bits;
    if (exp == 0) {
        float f = std::ldexp(static_cast<float>(mant), -24);  // zero or subnormal: mant * 2^-24
        return sign ? -f : f;
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);  // inf / nan (payload kept)
    } else {
        bits = sign | ((exp + 112) << 23) | (mant << 13);  // rebias 15 -> 127
    }
    return std::bit_cast<float>(bits);
}

[[noreturn]] void throw_io(const std::string& what, const std::filesystem::path& p, int err) {
    throw IoError(fmt::format("{} '{}': {}", what, p.string(), std::strerror(err)));
}

}  // namespace

std::size_t st_dtype_size(StDType t) { return row(t).size; }
std::string_view st_dtype_name(StDType t) { return row(t).name; }
bool st_dtype_from_name(std::string_view name, StDType* out) {
    for (const auto& r : kDTypes) {
        if (name == r.name) {
            *out = r.type;
            return true;
        }
    }
    return false;
}

StDType st_dtype_of(DType t) {
    switch (t) {
        case DType::kF32: return StDType::kF32;
        case DType::kBF16: return StDType::kBF16;
        case DType::kF16: return StDType::kF16;
        case DType::kI32: return StDType::kI32;
        case DType::kU16: return StDType::kU16;
    }
    throw Error("internal: unknown DType");
}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// ---------------------------------------------------------------------------------------------
// Reader

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept { *this = std::move(o); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
    if (this != &o) {
        if (map_) ::munmap(const_cast<std::uint8_t*>(map_), size_);
        label_ = std::move(o.label_);
        owned_ = std::move(o.owned_);
        map_ = o.map_;
        size_ = o.size_;
        infos_ = std::move(o.infos_);
        index_ = std::move(o.index_);
        metadata_ = std::move(o.metadata_);
        o.map_ = nullptr;
        o.size_ = 0;
    }
    return *this;
}

SafetensorsFile::~SafetensorsFile() {
    if (map_) ::munmap(const_cast<std::uint8_t*>(map_), size_);
}

const std::uint8_t* SafetensorsFile::bytes() const {
    return map_ ? map_ : reinterpret_cast<const std::uint8_t*>(owned_.data());
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
    SafetensorsFile f;
    f.label_ = path.string();
    const RegularFile file = [&] {
        try {
            return open_regular_file(path, "safetensors file");
        } catch (const InputError& e) {  // a FIFO, device or directory: FormatError, as open() promises
            throw FormatError(e.what());
        }
    }();
    const UniqueFd& fd = file.fd;
    f.size_ = static_cast<std::size_t>(file.size);
    if (f.size_ > 0) {
        void* m = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
        if (m == MAP_FAILED) throw_io("cannot mmap", path, errno);
        f.map_ = static_cast<const std::uint8_t*>(m);
    }
    f.parse();
    return f;
}

SafetensorsFile SafetensorsFile::from_bytes(std::string bytes, std::string label) {
    SafetensorsFile f;
    f.label_ = std::move(label);
    f.owned_ = std::move(bytes);
    f.size_ = f.owned_.size();
    f.parse();
    return f;
}

void SafetensorsFile::parse() {
    auto fail = [&](const std::string& msg) -> FormatError {
        return FormatError(fmt::format("safetensors file '{}': {}", label_, msg));
    };
    const std::uint8_t* b = bytes();
    if (size_ < 8) {
        throw fail(fmt::format("file is {} bytes; expected at least 8 (the u64 header length) — truncated?",
                               size_));
    }
    std::uint64_t n = 0;
    std::memcpy(&n, b, 8);
    if (n > kMaxHeaderBytes) {
        throw fail(fmt::format("header length field says {} bytes; the format allows at most {} "
                               "(not a safetensors file, or a corrupt one)",
                               n, kMaxHeaderBytes));
    }
    if (n > size_ - 8) {
        throw fail(fmt::format("header length field says {} bytes but only {} bytes follow it — truncated?",
                               n, size_ - 8));
    }
    std::string_view header(reinterpret_cast<const char*>(b + 8), static_cast<std::size_t>(n));
    if (header.empty() || header[0] != '{') {
        throw fail("header does not start with '{' at byte offset 8 (expected a JSON object)");
    }
    const std::uint64_t data_start = 8 + n;
    const std::uint64_t data_len = size_ - data_start;

    // Duplicate keys refused at every level (nlohmann alone keeps the last one silently).
    nlohmann::json j;
    try {
        j = parse_json(header, "header", {kMaxHeaderBytes, 16, true});
    } catch (const JsonParseError& e) {
        if (e.reason() == "duplicate key")
            throw fail(fmt::format("'{}' appears more than once in the header (a duplicate key at byte {})",
                                   e.key_path(), 8 + e.byte()));
        throw fail(fmt::format("header (bytes 8..{}) is not valid JSON: {}", data_start, e.what()));
    }
    if (!j.is_object()) throw fail("header is not a JSON object");

    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string& name = it.key();
        const nlohmann::json& v = it.value();
        if (name == "__metadata__") {
            if (!v.is_object()) throw fail("\"__metadata__\" must be an object of string values");
            for (auto m = v.begin(); m != v.end(); ++m) {
                if (!m->is_string()) {
                    throw fail(fmt::format("\"__metadata__\".\"{}\" is {}, expected a string", shown(m.key()),
                                           m->type_name()));
                }
                metadata_[m.key()] = m->get<std::string>();
            }
            continue;
        }
        auto tfail = [&](const std::string& msg) { return fail(fmt::format("tensor '{}': {}", shown(name), msg)); };
        if (!v.is_object()) throw tfail(fmt::format("entry is {}, expected an object", v.type_name()));
        for (auto f = v.begin(); f != v.end(); ++f) {
            if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets") {
                throw tfail(fmt::format("unknown field '{}' (expected dtype, shape, data_offsets)", shown(f.key())));
            }
        }
        TensorInfo info;
        info.name = name;
        auto dt = v.find("dtype");
        if (dt == v.end() || !dt->is_string()) throw tfail("missing string field 'dtype'");
        if (!st_dtype_from_name(dt->get_ref<const std::string&>(), &info.dtype)) {
            throw tfail(fmt::format("unknown dtype '{}' (expected one of F64, F32, F16, BF16, I64, I32, "
                                    "I16, I8, U64, U32, U16, U8, BOOL, F8_E4M3, F8_E5M2)",
                                    shown(dt->get<std::string>())));
        }
        auto sh = v.find("shape");
        if (sh == v.end() || !sh->is_array()) throw tfail("missing array field 'shape'");
        std::uint64_t numel = 1;
        for (const auto& d : *sh) {
            if (!d.is_number_unsigned()) {
                throw tfail(
                    fmt::format("shape {} has an entry that is not a non-negative integer", describe_json(*sh)));
            }
            auto dim = d.get<std::uint64_t>();
            if (dim > static_cast<std::uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, dim, &numel)) {
                throw tfail(fmt::format("shape {} overflows 64 bits", describe_json(*sh)));
            }
            info.shape.push_back(static_cast<std::int64_t>(dim));
        }
        std::uint64_t nbytes = 0;
        if (__builtin_mul_overflow(numel, static_cast<std::uint64_t>(st_dtype_size(info.dtype)), &nbytes)) {
            throw tfail(fmt::format("shape {} x {} overflows 64 bits", describe_json(*sh), st_dtype_name(info.dtype)));
        }
        auto off = v.find("data_offsets");
        if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
            !(*off)[1].is_number_unsigned()) {
            throw tfail("'data_offsets' must be [begin, end] with non-negative integers");
        }
        auto begin = (*off)[0].get<std::uint64_t>();
        auto end = (*off)[1].get<std::uint64_t>();
        if (end < begin) throw tfail(fmt::format("data_offsets [{}, {}] end before begin", begin, end));
        if (end > data_len) {
            throw tfail(fmt::format("data_offsets [{}, {}] run past the data section of {} bytes — truncated?",
                                    begin, end, data_len));
        }
        if (end - begin != nbytes) {
            throw tfail(fmt::format("data_offsets [{}, {}] hold {} bytes, expected {} (shape {} x {} bytes of {})",
                                    begin, end, end - begin, nbytes, shape_str(info.shape),
                                    st_dtype_size(info.dtype), st_dtype_name(info.dtype)));
        }
        info.offset = data_start + begin;
        info.nbytes = nbytes;
        info.numel = numel;
        infos_.push_back(std::move(info));
    }

    std::sort(infos_.begin(), infos_.end(), [](const TensorInfo& a, const TensorInfo& c) {
        if (a.offset != c.offset) return a.offset < c.offset;
        if (a.nbytes != c.nbytes) return a.nbytes < c.nbytes;  // empty tensors first at a shared offset
        return a.name < c.name;
    });
    std::uint64_t expect = data_start;
    const TensorInfo* prev = nullptr;
    for (const auto& t : infos_) {
        if (t.offset < expect) {
            throw fail(fmt::format("tensor '{}' (data_offsets begin {}) overlaps tensor '{}' (ends at {})",
                                   shown(t.name), t.offset - data_start, shown(prev->name), expect - data_start));
        }
        if (t.offset > expect) {
            throw fail(fmt::format("gap in the data section: tensor '{}' begins at {}, expected {} (tensors must "
                                   "be contiguous)",
                                   shown(t.name), t.offset - data_start, expect - data_start));
        }
        expect = t.offset + t.nbytes;
        prev = &t;
    }
    if (expect != size_) {
        throw fail(fmt::format("data section is {} bytes but the tensors cover {} (trailing bytes)", data_len,
                               expect - data_start));
    }
    for (std::size_t i = 0; i < infos_.size(); ++i) index_.emplace(infos_[i].name, i);
}

std::vector<std::string> SafetensorsFile::names() const {
    std::vector<std::string> out;
    out.reserve(infos_.size());
    for (const auto& t : infos_) out.push_back(t.name);
    return out;
}

bool SafetensorsFile::contains(std::string_view name) const { return index_.find(name) != index_.end(); }

const TensorInfo& SafetensorsFile::info(std::string_view name) const {
    auto it = index_.find(name);
    if (it == index_.end()) {
        auto hint = nearest_match(name, names());
        throw FormatError(fmt::format("safetensors file '{}': no tensor named '{}'{}", label_, name,
                                      hint ? fmt::format(" (did you mean '{}'?)", *hint) : std::string()));
    }
    return infos_[it->second];
}

const std::uint8_t* SafetensorsFile::raw(std::string_view name) const { return bytes() + info(name).offset; }

void SafetensorsFile::read_f32(std::string_view name, float* dst, const Shape& expected_shape) const {
    const TensorInfo& t = info(name);
    if (t.shape != expected_shape) {
        throw FormatError(fmt::format("safetensors file '{}': tensor '{}' has shape {}, expected {}", label_, name,
                                      shape_str(t.shape), shape_str(expected_shape)));
    }
    const std::uint8_t* src = bytes() + t.offset;
    switch (t.dtype) {
        case StDType::kF32:
            if (t.nbytes) std::memcpy(dst, src, t.nbytes);  // dst may be null for an empty tensor
            return;
        case StDType::kBF16:
            for (std::uint64_t i = 0; i < t.numel; ++i) {
                std::uint16_t h;
                std::memcpy(&h, src + 2 * i, 2);
                dst[i] = std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
            }
            return;
        case StDType::kF16:
            for (std::uint64_t i = 0; i < t.numel; ++i) {
                std::uint16_t h;
                std::memcpy(&h, src + 2 * i, 2);
                dst[i] = f16_to_f32(h);
            }
            return;
        case StDType::kF64:
            for (std::uint64_t i = 0; i < t.numel; ++i) {
                double d;
                std::memcpy(&d, src + 8 * i, 8);
                dst[i] = static_cast<float>(d);
            }
            return;
        default:
            throw FormatError(fmt::format("safetensors file '{}': tensor '{}' has dtype {}, expected a float type "
                                          "(F32, BF16, F16 or F64)",
                                          label_, name, st_dtype_name(t.dtype)));
    }
}

void SafetensorsFile::read_exact(std::string_view name, StDType dtype, const Shape& expected_shape,
                                 void* dst) const {
    const TensorInfo& t = info(name);
    if (t.dtype != dtype || t.shape != expected_shape) {
        throw FormatError(fmt::format("safetensors file '{}': tensor '{}' is {} {}, expected {} {}", label_, name,
                                      st_dtype_name(t.dtype), shape_str(t.shape), st_dtype_name(dtype),
                                      shape_str(expected_shape)));
    }
    if (t.nbytes) std::memcpy(dst, bytes() + t.offset, t.nbytes);  // dst may be null for an empty tensor
}

std::vector<std::string> diff_tensors(const SafetensorsFile& file, const std::vector<TensorSpec>& expected,
                                      bool allow_float_conversion) {
    std::vector<std::string> out;
    std::set<std::string, std::less<>> wanted;
    for (const auto& e : expected) {
        wanted.insert(e.name);
        if (!file.contains(e.name)) {
            out.push_back(fmt::format("missing tensor '{}' (expected {} {})", e.name, st_dtype_name(e.dtype),
                                      shape_str(e.shape)));
            continue;
        }
        const TensorInfo& t = file.info(e.name);
        if (t.shape != e.shape) {
            out.push_back(fmt::format("tensor '{}' has shape {}, expected {}", e.name, shape_str(t.shape),
                                      shape_str(e.shape)));
        }
        bool dtype_ok = t.dtype == e.dtype || (allow_float_conversion && is_float(t.dtype) && is_float(e.dtype));
        if (!dtype_ok) {
            out.push_back(fmt::format("tensor '{}' has dtype {}, expected {}", e.name, st_dtype_name(t.dtype),
                                      st_dtype_name(e.dtype)));
        }
    }
    for (const auto& name : file.names()) {
        if (!wanted.count(name)) {
            const TensorInfo& t = file.info(name);
            out.push_back(fmt::format("unexpected tensor '{}' ({} {})", name, st_dtype_name(t.dtype),
                                      shape_str(t.shape)));
        }
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Writer

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    std::set<std::string_view> names;
    std::vector<std::uint64_t> nbytes(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const TensorRef& t = tensors[i];
        if (t.name.empty() || t.name == "__metadata__" || !is_valid_utf8(t.name)) {
            throw InputError(fmt::format("writing '{}': invalid tensor name '{}'", path.string(), t.name));
        }
        if (!names.insert(t.name).second) {
            throw InputError(fmt::format("writing '{}': tensor name '{}' given twice", path.string(), t.name));
        }
        std::uint64_t n = st_dtype_size(t.dtype);
        for (auto d : t.shape) {
            if (d < 0) {
                throw InputError(fmt::format("writing '{}': tensor '{}' has negative shape {}", path.string(),
                                             t.name, shape_str(t.shape)));
            }
            n *= static_cast<std::uint64_t>(d);
        }
        if (n > 0 && t.data == nullptr) {
            throw InputError(fmt::format("writing '{}': tensor '{}' has no data", path.string(), t.name));
        }
        nbytes[i] = n;
    }
    for (const auto& [k, v] : metadata) {
        if (!is_valid_utf8(k) || !is_valid_utf8(v)) {
            throw InputError(
                fmt::format("writing '{}': metadata key '{}' or its value is not UTF-8", path.string(), k));
        }
    }
    const std::map<std::string, std::string> meta = with_checksums(tensors, metadata);
    std::vector<std::size_t> order(tensors.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return st_dtype_size(tensors[a].dtype) > st_dtype_size(tensors[b].dtype);
    });

    nlohmann::ordered_json h = nlohmann::ordered_json::object();
    if (!meta.empty()) {
        nlohmann::ordered_json m = nlohmann::ordered_json::object();
        for (const auto& [k, v] : meta) m[k] = v;
        h["__metadata__"] = std::move(m);
    }
    std::uint64_t off = 0;
    for (std::size_t i : order) {
        nlohmann::ordered_json e = nlohmann::ordered_json::object();
        e["dtype"] = std::string(st_dtype_name(tensors[i].dtype));
        e["shape"] = tensors[i].shape;
        e["data_offsets"] = {off, off + nbytes[i]};
        h[tensors[i].name] = std::move(e);
        off += nbytes[i];
    }
    std::string header = h.dump();
    header.append((8 - header.size() % 8) % 8, ' ');  // 8 + header stays a multiple of 8
    const std::uint64_t hlen = header.size();

    WriteIntoPlace out(path);  // a device or FIFO named as the output is written through
    out.write(&hlen, 8);
    out.write(header.data(), header.size());
    for (std::size_t i : order) {
        if (nbytes[i] > 0) out.write(tensors[i].data, nbytes[i]);
    }
    out.commit();
}

}  // namespace llmt
