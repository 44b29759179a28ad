#include "config/emit.h"

#include <fmt/format.h>

#include <regex>

#include "config/schema.h"

namespace llmt::config {
namespace {

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
        static const std::regex kPlain(R"(^[A-Za-z_/][A-Za-z0-9_./*-]*$)");
        static const std::regex kReserved(R"(^(true|false|True|False|TRUE|FALSE|null|Null|NULL|yes|no|on|off|y|n)$)");
        if (std::regex_match(s, kPlain) && !std::regex_match(s, kReserved)) return s;
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

std::string to_yaml(const nlohmann::ordered_json& resolved, bool with_comments) {
    std::string out;
    for (auto it = resolved.begin(); it != resolved.end(); ++it) {
        if (it.value().is_object()) {
            out += it.key() + ":\n";
            for (auto jt = it.value().begin(); jt != it.value().end(); ++jt) {
                std::string line = fmt::format("  {}: {}", jt.key(), scalar(jt.value()));
                const FieldSpec* f = with_comments ? find_field(it.key() + "." + jt.key()) : nullptr;
                if (f) line = fmt::format("{:<40} # {}", line, f->doc);
                out += line + "\n";
            }
        } else {
            out += fmt::format("{}: {}\n", it.key(), scalar(it.value()));
        }
    }
    return out;
}

}  // namespace llmt::config
