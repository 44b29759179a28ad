// See yaml_emit.h. Kubernetes reads manifests with a YAML 1.1-leaning parser (sigs.k8s.io/yaml over
// go-yaml), so a plain `on` or `0755` would not stay a string: such strings are double-quoted.
#include "k8s/yaml_emit.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <regex>

namespace llmt::k8s {

bool needs_quotes(const std::string& s) {
    if (s.empty()) return true;
    std::string lower(s);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    static const char* const kWords[] = {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"};
    for (const char* w : kWords)
        if (lower == w) return true;
    // Anything numeric-looking: ints (decimal, octal, hex, with _ as in YAML 1.1), floats, .inf/.nan,
    // sexagesimal (1:20). Quoting a string that would not have needed it is harmless.
    static const std::regex kNumeric(R"(^[-+]?(\.?[0-9][0-9_:.eExXoOa-fA-F+-]*|\.inf|\.nan)$)", std::regex::icase);
    return std::regex_match(s, kNumeric);
}

namespace {

void emit(YAML::Emitter& out, const nlohmann::ordered_json& j) {
    switch (j.type()) {
        case nlohmann::json::value_t::object:
            if (j.empty()) {
                out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
                return;
            }
            out << YAML::BeginMap;
            for (const auto& [k, v] : j.items()) {
                out << YAML::Key;
                if (needs_quotes(k)) out << YAML::DoubleQuoted;
                out << k << YAML::Value;
                emit(out, v);
            }
            out << YAML::EndMap;
            return;
        case nlohmann::json::value_t::array:
            if (j.empty()) {
                out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
                return;
            }
            out << YAML::BeginSeq;
            for (const auto& v : j) emit(out, v);
            out << YAML::EndSeq;
            return;
        case nlohmann::json::value_t::string: {
            const auto& s = j.get_ref<const std::string&>();
            if (s.find('\n') != std::string::npos) {
                out << YAML::Literal << s;
            } else {
                if (needs_quotes(s)) out << YAML::DoubleQuoted;
                out << s;
            }
            return;
        }
        case nlohmann::json::value_t::boolean:
            out << j.get<bool>();
            return;
        case nlohmann::json::value_t::number_integer:
            out << j.get<int64_t>();
            return;
        case nlohmann::json::value_t::number_unsigned:
            out << j.get<uint64_t>();
            return;
        case nlohmann::json::value_t::number_float:
            out << j.get<double>();
            return;
        default:
            out << YAML::Null;
            return;
    }
}

}  // namespace

std::string to_yaml(const nlohmann::ordered_json& doc) {
    YAML::Emitter out;
    out.SetIndent(2);
    out.SetSeqFormat(YAML::Block);
    out.SetMapFormat(YAML::Block);
    out.SetBoolFormat(YAML::TrueFalseBool);
    emit(out, doc);
    std::string s = out.c_str();
    if (s.empty() || s.back() != '\n') s += '\n';
    return s;
}

std::string to_yaml_stream(const std::vector<nlohmann::ordered_json>& docs) {
    std::string s;
    for (std::size_t i = 0; i < docs.size(); ++i) {
        if (i) s += "---\n";
        s += to_yaml(docs[i]);
    }
    return s;
}

}  // namespace llmt::k8s
