#include "config/emit.h"

#include <fmt/format.h>

#include "config/schema.h"

namespace llmt::config {
namespace {

// A string YAML reads back as the same string without quotes: [A-Za-z_/][A-Za-z0-9_./*-]*. A loop,
// not std::regex, which recurses per character and overflows the stack on a value of a few hundred KB
// (override values come from clients).
bool is_plain(const std::string& s) {
    auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); };
    if (s.empty() || !(alpha(s[0]) || s[0] == '_' || s[0] == '/')) return false;
    for (char c : s)
        if (!(alpha(c) || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '/' || c == '*' || c == '-'))
            return false;
    return true;
}

// Words YAML 1.1 reads as booleans or null.
bool is_reserved(const std::string& s) {
    static const char* const kWords[] = {"true", "false", "True", "False", "TRUE", "FALSE", "null", "Null",
                                         "NULL", "yes",  "no",    "on",    "off",  "y",     "n"};
    for (const char* w : kWords)
        if (s == w) return true;
    return false;
}

std::string scalar(const nlohmann::ordered_json& v) {
    if (v.is_null()) return "null";
    if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
    if (v.is_number_integer()) return fmt::format("{}", v.get<int64_t>());
    if (v.is_number_float()) {
        std::string s = fmt::format("{}", v.get<double>());
        if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // stays a float when read back
        return s;
    }
    if (v.is_string()) {
        const std::string& s = v.get_ref<const std::string&>();
        if (is_plain(s) && !is_reserved(s)) return s;
        return nlohmann::json(s).dump();  // a JSON string is a valid YAML double-quoted scalar
    }
    if (v.is_array()) {
        std::string s = "[";
        for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + scalar(v[i]);
        return s + "]";
    }
    return v.dump();
}

}  // namespace

namespace {

// One mapping's keys at `indent`; a nested mapping (a section, or a group such as model.rope_scaling)
// becomes a block under its key. `prefix` is the key path of the mapping ("" at the top).
void emit_map(const nlohmann::ordered_json& map, const std::string& prefix, int indent, bool with_comments,
              std::string& out) {
    for (auto it = map.begin(); it != map.end(); ++it) {
        const std::string path = prefix.empty() ? it.key() : prefix + "." + it.key();
        const std::string pad(static_cast<std::size_t>(indent), ' ');
        if (it.value().is_object()) {
            out += pad + it.key() + ":\n";
            emit_map(it.value(), path, indent + 2, with_comments, out);
            continue;
        }
        std::string line = fmt::format("{}{}: {}", pad, it.key(), scalar(it.value()));
        const FieldSpec* f = with_comments && !prefix.empty() ? find_field(path) : nullptr;
        if (f) line = fmt::format("{:<40} # {}", line, f->doc);
        out += line + "\n";
    }
}

}  // namespace

std::string to_yaml_written(const Config& cfg) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const auto& f : schema_fields()) {
        if (!cfg.wrote(f.path)) continue;
        const auto ptr = schema_pointer(f.path);
        out[ptr] = cfg.resolved.at(ptr);
    }
    std::string text;
    emit_map(out, "", 0, false, text);
    return text;
}

std::string to_yaml(const nlohmann::ordered_json& resolved, bool with_comments) {
    std::string out;
    emit_map(resolved, "", 0, with_comments, out);
    return out;
}

}  // namespace llmt::config
