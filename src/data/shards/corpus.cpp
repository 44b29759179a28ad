// Corpus readers (corpus.h): raw read() + zlib inflate for .gz, a line splitter, and the text/JSONL
// document rules. The raw bytes are hashed as they stream past, so inputs are read once.
#include "data/shards/corpus.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/check.h"
#include "core/error.h"
#include "core/json_parse.h"
#include "core/regular_file.h"
#include "core/sha256.h"
#include "data/tables/table_reader.h"

namespace llmt::data {

namespace fs = std::filesystem;

InputFormat parse_input_format(const std::string& name) {
    if (name == "text") return InputFormat::kText;
    if (name == "jsonl") return InputFormat::kJsonl;
    if (name == "hf") return InputFormat::kHf;
    throw InputError(fmt::format("unknown input format '{}': expected one of text, jsonl, hf", name));
}

const char* format_name(InputFormat f) {
    switch (f) {
        case InputFormat::kJsonl: return "jsonl";
        case InputFormat::kHf: return "hf";
        case InputFormat::kText: break;
    }
    return "text";
}

std::vector<fs::path> list_input_files(const std::vector<std::string>& inputs) {
    LLMT_CHECK(!inputs.empty(), "no input given (hint: --input PATH, a file or a directory)");
    std::vector<fs::path> out;
    for (const auto& in : inputs) {
        std::error_code ec;
        const fs::path p(in);
        const auto st = fs::status(p, ec);
        LLMT_CHECK(!ec && fs::exists(st), "input '{}' does not exist", in);
        if (fs::is_directory(st)) {
            std::vector<fs::path> found;
            fs::recursive_directory_iterator it(p, fs::directory_options::follow_directory_symlink, ec), end;
            LLMT_CHECK_AS(IoError, !ec, "cannot list directory '{}': {}", in, ec.message());
            for (; it != end; it.increment(ec)) {
                LLMT_CHECK_AS(IoError, !ec, "cannot list directory '{}': {}", in, ec.message());
                const std::string name = it->path().filename().string();
                if (!name.empty() && name[0] == '.') {
                    if (it->is_directory()) it.disable_recursion_pending();
                    continue;
                }
                if (it->is_regular_file()) found.push_back(it->path());
            }
            std::sort(found.begin(), found.end(),
                      [](const fs::path& a, const fs::path& b) { return a.native() < b.native(); });
            LLMT_CHECK(!found.empty(), "input directory '{}' holds no files", in);
            out.insert(out.end(), found.begin(), found.end());
        } else {
            LLMT_CHECK(fs::is_regular_file(st), "input '{}' is not a regular file or a directory", in);
            out.push_back(p);
        }
    }
    return out;
}

std::vector<fs::path> list_corpus_files(const std::vector<std::string>& inputs, const CorpusOptions& opts) {
    if (opts.format == InputFormat::kHf) return hf_split_files(inputs, opts.hf);
    return list_input_files(inputs);
}

struct DocumentReader::Impl {
    static constexpr std::size_t kRawChunk = 1 << 18;

    fs::path path;
    CorpusOptions opts;
    int fd = -1;
    bool gz = false;
    bool raw_eof = false;
    bool decoded_eof = false;
    bool z_init = false;
    bool z_member_done = false;  // the last inflate() ended a gzip member
    z_stream zs{};
    std::vector<unsigned char> raw;
    std::string pending;  // decoded bytes not yet split into lines
    std::size_t pos = 0;  // start of the unread part of `pending`
    uint64_t raw_read = 0;
    uint64_t line_no = 0;  // number of the last line returned
    Sha256 hash;
    bool file_done = false;  // "file" mode: the single document was returned
    std::unique_ptr<TableReader> table;  // hf
    std::vector<TableCell> row;

    ~Impl() {
        if (z_init) inflateEnd(&zs);
        if (fd >= 0) ::close(fd);
    }

    [[noreturn]] void bad_gzip(const std::string& why) const {
        throw FormatError(
            fmt::format("{}: at compressed byte offset {}: {}", path.string(), raw_read - zs.avail_in, why));
    }

    // Reads up to kRawChunk raw bytes into `raw`; returns the count (0 at EOF).
    std::size_t read_raw() {
        raw.resize(kRawChunk);
        for (;;) {
            ssize_t n = ::read(fd, raw.data(), raw.size());
            if (n < 0) {
                if (errno == EINTR) continue;
                throw IoError(fmt::format("cannot read '{}': {}", path.string(), std::strerror(errno)));
            }
            raw.resize(static_cast<std::size_t>(n));
            raw_read += static_cast<uint64_t>(n);
            hash.update(raw.data(), raw.size());
            if (n == 0) raw_eof = true;
            return static_cast<std::size_t>(n);
        }
    }

    // Appends the next decoded bytes to `pending`; returns false when the file is exhausted.
    bool fill() {
        if (decoded_eof) return false;
        if (!gz) {
            if (read_raw() == 0) {
                decoded_eof = true;
                return false;
            }
            pending.append(reinterpret_cast<const char*>(raw.data()), raw.size());
            return true;
        }
        unsigned char out[1 << 18];
        for (;;) {
            if (zs.avail_in == 0) {
                if (!raw_eof) {
                    read_raw();
                    zs.next_in = raw.data();
                    zs.avail_in = static_cast<uInt>(raw.size());
                }
                if (zs.avail_in == 0) {
                    if (!z_member_done)
                        bad_gzip(raw_read == 0 ? "empty file, expected gzip data" : "truncated gzip stream");
                    decoded_eof = true;
                    return false;
                }
            }
            if (z_member_done) {  // more bytes after a member: another gzip member follows
                inflateReset(&zs);
                z_member_done = false;
            }
            zs.next_out = out;
            zs.avail_out = sizeof out;
            int rc = inflate(&zs, Z_NO_FLUSH);
            if (rc == Z_STREAM_END) {
                z_member_done = true;
            } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
                bad_gzip(fmt::format("bad gzip data ({})", zs.msg ? zs.msg : zError(rc)));
            }
            const std::size_t got = sizeof out - zs.avail_out;
            if (got > 0) {
                pending.append(reinterpret_cast<const char*>(out), got);
                return true;
            }
        }
    }

    // The next line including its '\n' (the file's last line may lack one); false at end of file.
    bool next_line(std::string_view& line) {
        for (;;) {
            const std::size_t nl = pending.find('\n', pos);
            if (nl != std::string::npos) {
                line = std::string_view(pending).substr(pos, nl + 1 - pos);
                pos = nl + 1;
                ++line_no;
                return true;
            }
            pending.erase(0, pos);
            pos = 0;
            if (!fill()) {
                if (pending.empty()) return false;
                line = pending;
                pos = pending.size();
                ++line_no;
                return true;
            }
        }
    }

    static std::string_view strip_eol(std::string_view line) {
        if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        return line;
    }

    static bool is_blank(std::string_view line) {
        return std::all_of(line.begin(), line.end(),
                           [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; });
    }

    bool next_text(std::string& doc) {
        doc.clear();
        if (opts.doc_separator == "file") {
            if (file_done) return false;
            file_done = true;
            while (fill()) {
            }
            doc.swap(pending);
            pending.clear();
            pos = 0;
            return !doc.empty();
        }
        const bool blank_mode = opts.doc_separator == "blank";
        std::string_view line;
        while (next_line(line)) {
            const bool sep = blank_mode ? is_blank(line) : strip_eol(line) == opts.doc_separator;
            if (sep) {
                if (!doc.empty()) return true;
                continue;  // leading or repeated separators: no empty documents
            }
            doc.append(line);
        }
        return !doc.empty();
    }

    bool next_table(std::string& doc) {
        while (table->next_row(row)) {
            if (row[0].null || row[0].text.empty()) continue;
            doc.swap(row[0].text);
            return true;
        }
        return false;
    }

    bool next_jsonl(std::string& doc) {
        std::string_view line;
        while (next_line(line)) {
            if (is_blank(line)) continue;
            // A document's line may be large (a book); its nesting and key names are not ours to print.
            const nlohmann::json j =
                parse_json(line, fmt::format("{}:{}", path.string(), line_no), {SIZE_MAX, 64, false});
            if (!j.is_object()) {
                throw FormatError(fmt::format("{}:{}: expected a JSON object with a \"{}\" field, found a {}",
                                              path.string(), line_no, opts.text_field, j.type_name()));
            }
            auto it = j.find(opts.text_field);
            if (it == j.end()) {
                // Field names only (never values), at most 8 of them, each cut at 32 bytes.
                std::string keys;
                std::size_t listed = 0;
                for (auto k = j.begin(); k != j.end() && listed < 8; ++k, ++listed)
                    keys += (keys.empty() ? "" : ", ") + k.key().substr(0, 32);
                if (j.size() > listed) keys += fmt::format(" and {} more", j.size() - listed);
                throw FormatError(fmt::format("{}:{}: no field \"{}\" (fields present: {}) (hint: --text-field NAME)",
                                              path.string(), line_no, opts.text_field, keys.empty() ? "none" : keys));
            }
            if (!it->is_string()) {
                throw FormatError(fmt::format("{}:{}: field \"{}\" is a {}, expected a string", path.string(), line_no,
                                              opts.text_field, it->type_name()));
            }
            doc = it->get<std::string>();
            if (!doc.empty()) return true;
        }
        return false;
    }
};

DocumentReader::DocumentReader(const fs::path& path, const CorpusOptions& opts) : impl_(std::make_unique<Impl>()) {
    LLMT_CHECK(!opts.doc_separator.empty(),
               "--doc-separator must not be empty (use blank, file, or a separator line such as %)");
    impl_->path = path;
    impl_->opts = opts;
    impl_->fd = open_regular_file(path, "corpus input").fd.release();
    if (opts.format == InputFormat::kHf) {
        impl_->table = open_table(path);
        impl_->table->select({{opts.text_field, ColumnKind::kString}});
        return;
    }
    const std::string name = path.filename().string();
    impl_->gz = name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0;
    if (impl_->gz) {
        // 16 + MAX_WBITS: expect a gzip header (zlib manual, inflateInit2).
        if (inflateInit2(&impl_->zs, 16 + MAX_WBITS) != Z_OK) throw Error("zlib: inflateInit2 failed");
        impl_->z_init = true;
    }
}

DocumentReader::~DocumentReader() = default;

bool DocumentReader::next(std::string& doc) {
    if (impl_->table) return impl_->next_table(doc);
    return impl_->opts.format == InputFormat::kJsonl ? impl_->next_jsonl(doc) : impl_->next_text(doc);
}

uint64_t DocumentReader::raw_bytes_read() const {
    return impl_->table && !impl_->raw_eof ? impl_->table->bytes_read() : impl_->raw_read;
}

std::string DocumentReader::sha256_hex() {
    // A table is read with pread (footer first, selected columns only), never through read_raw, so
    // this reads the whole file from its start.
    // Drain anything not read yet (e.g. trailing bytes) so the digest covers the whole file.
    if (!impl_->raw_eof) {
        while (impl_->read_raw() > 0) {
        }
    }
    return impl_->hash.hex_digest();
}

}  // namespace llmt::data
