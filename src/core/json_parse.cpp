// parse_json: nlohmann's SAX parser driving a DOM builder that enforces JsonLimits. The input is read
// through an iterator that records how far the lexer got, so errors raised by the builder (depth,
// duplicate key, integer overflow) can name a byte offset too.
#include "core/json_parse.h"

#include <fmt/format.h>

#include <iterator>
#include <set>
#include <type_traits>
#include <vector>

namespace llmt {

namespace {

// A const char* iterator that publishes its position to *cursor on every step.
struct CountingIterator {
    using iterator_category = std::forward_iterator_tag;
    using value_type = char;
    using difference_type = std::ptrdiff_t;
    using pointer = const char*;
    using reference = const char&;

    const char* p = nullptr;
    const char** cursor = nullptr;

    reference operator*() const { return *p; }
    CountingIterator& operator++() {
        ++p;
        *cursor = p;
        return *this;
    }
    CountingIterator operator++(int) {
        CountingIterator old = *this;
        ++*this;
        return old;
    }
    bool operator==(const CountingIterator& o) const { return p == o.p; }
    bool operator!=(const CountingIterator& o) const { return p != o.p; }
};

// A key or index of the path to the value being read; keys are cut to 64 bytes and control bytes
// replaced, so a path is always short and printable.
std::string key_part(const std::string& key) {
    std::string out;
    for (std::size_t i = 0; i < key.size() && i < 64; ++i) {
        const unsigned char c = static_cast<unsigned char>(key[i]);
        out.push_back(c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c));
    }
    if (key.size() > 64) out += "...";
    return out;
}

// nlohmann's message without its prefix and without the "last read: '<input bytes>'" part.
std::string library_reason(const nlohmann::detail::exception& ex) {
    std::string msg = ex.what();
    std::size_t start = msg.find("syntax error");
    if (start == std::string::npos) start = msg.find("] ") == std::string::npos ? 0 : msg.find("] ") + 2;
    msg = msg.substr(start);
    if (std::size_t cut = msg.find("; last read: '"); cut != std::string::npos) msg.resize(cut);
    if (msg.size() > 200) msg = msg.substr(0, 200) + "...";
    return msg;
}

bool is_integer_literal(const std::string& s) { return s.find_first_of(".eE") == std::string::npos; }

template <class Json>
class BoundedDomBuilder {
public:
    BoundedDomBuilder(const JsonLimits& limits, const char* begin, const char* const* cursor)
        : limits_(limits), begin_(begin), cursor_(cursor) {}

    Json& result() { return root_; }
    bool failed() const { return failed_; }
    const std::string& reason() const { return reason_; }
    std::size_t error_byte() const { return error_byte_; }
    std::string key_path(bool in_error_callback) const {
        std::string out;
        for (std::size_t i = 0; i < frames_.size(); ++i) {
            const Frame& f = frames_[i];
            if (f.object) {
                if (!f.has_key) continue;
                if (!out.empty()) out += '.';
                out += key_part(f.key);
            } else {
                // The innermost array's next element has not begun when the lexer fails.
                const bool innermost = i + 1 == frames_.size();
                const std::size_t n = in_error_callback && innermost ? f.begun : f.begun - 1;
                if (f.begun == 0 && !(in_error_callback && innermost)) continue;
                out += fmt::format("[{}]", n);
            }
        }
        return out;
    }

    // ---- nlohmann SAX interface ----
    bool null() { return add(Json(nullptr)); }
    bool boolean(bool v) { return add(Json(v)); }
    bool number_integer(typename Json::number_integer_t v) { return add(Json(v)); }
    bool number_unsigned(typename Json::number_unsigned_t v) { return add(Json(v)); }
    bool number_float(typename Json::number_float_t v, const typename Json::string_t& text) {
        begin_value();
        // The lexer reads an integer literal beyond 64 bits as a double: refuse it rather than round.
        if (is_integer_literal(text)) return fail("integer does not fit 64 bits");
        return place(Json(v));
    }
    bool string(typename Json::string_t& v) { return add(Json(std::move(v))); }
    bool binary(typename Json::binary_t& /*v*/) { return fail("binary values are not JSON"); }
    bool start_object(std::size_t /*elements*/) { return open(Json::object(), true); }
    bool key(typename Json::string_t& k) {
        Frame& f = frames_.back();
        f.key = k;
        f.has_key = true;
        Json& obj = *stack_.back();
        // ordered_json looks keys up by a linear scan: a set per open object keeps this O(log n).
        if constexpr (std::is_same_v<Json, nlohmann::json>) {
            if (obj.contains(k)) return fail("duplicate key");
        } else {
            if (!f.keys.insert(k).second) return fail("duplicate key");
        }
        slot_ = &obj[k];
        return true;
    }
    bool end_object() { return close(); }
    bool start_array(std::size_t /*elements*/) { return open(Json::array(), false); }
    bool end_array() { return close(); }
    bool parse_error(std::size_t position, const std::string& /*last_token*/, const nlohmann::detail::exception& ex) {
        failed_ = true;
        in_error_callback_ = true;
        error_byte_ = position;
        // 406: a number literal that overflows a double (1e400).
        reason_ = ex.id == 406 ? "number does not fit a 64-bit float" : library_reason(ex);
        return false;
    }

    bool in_error_callback() const { return in_error_callback_; }

private:
    struct Frame {
        bool object = false;
        bool has_key = false;
        std::string key;
        std::size_t begun = 0;  // arrays: elements begun so far
        std::set<std::string> keys;  // objects of ordered_json: keys seen
    };

    void begin_value() {
        if (!frames_.empty() && !frames_.back().object) ++frames_.back().begun;
    }
    bool fail(const std::string& why) {
        failed_ = true;
        reason_ = why;
        error_byte_ = static_cast<std::size_t>(*cursor_ - begin_);
        return false;
    }
    // Puts v where the next value goes; returns it.
    Json* put(Json&& v) {
        if (stack_.empty()) {
            root_ = std::move(v);
            return &root_;
        }
        Json& parent = *stack_.back();
        if (parent.is_array()) {
            parent.template get_ref<typename Json::array_t&>().push_back(std::move(v));
            return &parent.template get_ref<typename Json::array_t&>().back();
        }
        *slot_ = std::move(v);
        return slot_;
    }
    bool place(Json&& v) {
        put(std::move(v));
        return true;
    }
    bool add(Json&& v) {
        begin_value();
        return place(std::move(v));
    }
    bool open(Json&& empty, bool object) {
        begin_value();
        if (static_cast<int>(stack_.size()) >= limits_.max_depth)
            return fail(
                fmt::format("nested deeper than {} level{}", limits_.max_depth, limits_.max_depth == 1 ? "" : "s"));
        stack_.push_back(put(std::move(empty)));
        frames_.push_back(Frame{object, false, {}, 0, {}});
        return true;
    }
    bool close() {
        stack_.pop_back();
        frames_.pop_back();
        return true;
    }

    const JsonLimits& limits_;
    const char* begin_;
    const char* const* cursor_;
    Json root_;
    std::vector<Json*> stack_;
    std::vector<Frame> frames_;
    Json* slot_ = nullptr;
    bool failed_ = false;
    bool in_error_callback_ = false;
    std::string reason_;
    std::size_t error_byte_ = 0;
};

std::pair<std::size_t, std::size_t> line_column(std::string_view text, std::size_t byte) {
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < byte && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++line;
            column = 1;
        } else {
            ++column;
        }
    }
    return {line, column};
}

std::string compose(const std::string& source, const std::string& reason, std::size_t byte, std::size_t line,
                    std::size_t column, const std::string& key_path) {
    if (line == 0) return fmt::format("{}: {}", source, reason);
    std::string msg = fmt::format("{}: invalid JSON: {} at byte {} (line {}, column {})", source, reason, byte, line,
                                  column);
    if (!key_path.empty()) msg += fmt::format(", at key {}", key_path);
    return msg;
}

}  // namespace

JsonParseError::JsonParseError(std::string source, std::string reason, std::size_t byte, std::size_t line,
                               std::size_t column, std::string key_path)
    : FormatError(compose(source, reason, byte, line, column, key_path)), reason_(std::move(reason)), byte_(byte),
      key_path_(std::move(key_path)) {}

namespace {

template <class Json>
Json parse_bounded(std::string_view text, const std::string& source, const JsonLimits& limits) {
    if (text.size() > limits.max_bytes)
        throw JsonParseError(source,
                             fmt::format("{} bytes, over the {}-byte limit for this JSON input", text.size(),
                                         limits.max_bytes),
                             0, 0, 0, "");
    const char* cursor = text.data();
    BoundedDomBuilder<Json> builder(limits, text.data(), &cursor);
    CountingIterator first{text.data(), &cursor};
    CountingIterator last{text.data() + text.size(), &cursor};
    const bool ok = Json::sax_parse(first, last, &builder, nlohmann::detail::input_format_t::json, true, false);
    if (ok && !builder.failed()) return std::move(builder.result());
    const std::size_t byte = builder.failed() ? builder.error_byte() : static_cast<std::size_t>(cursor - text.data());
    const auto [line, column] = line_column(text, byte);
    const std::string path = limits.name_keys ? builder.key_path(builder.in_error_callback()) : "";
    throw JsonParseError(source, builder.failed() ? builder.reason() : "not JSON", byte, line, column, path);
}

}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& source, const JsonLimits& limits) {
    return parse_bounded<nlohmann::json>(text, source, limits);
}

nlohmann::ordered_json parse_ordered_json(std::string_view text, const std::string& source,
                                          const JsonLimits& limits) {
    return parse_bounded<nlohmann::ordered_json>(text, source, limits);
}

std::optional<nlohmann::json> try_parse_json(std::string_view text, const JsonLimits& limits) {
    try {
        return parse_json(text, "", limits);
    } catch (const JsonParseError&) {
        return std::nullopt;
    }
}

}  // namespace llmt
