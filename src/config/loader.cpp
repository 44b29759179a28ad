#include "config/loader.h"

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include "config/cross_checks.h"
#include "config/schedule_keys.h"
#include "config/schema.h"
#include "config/typed.h"
#include "config/validator.h"
#include "config/yaml_bounds.h"
#include "core/fs.h"
#include "core/strings.h"

namespace llmt::config {

using nlohmann::ordered_json;

namespace {

std::string format_issues(const std::string& source, const std::vector<ConfigIssue>& issues) {
    std::string s = fmt::format("invalid config '{}' ({} problem{}):", source, issues.size(),
                                issues.size() == 1 ? "" : "s");
    for (const auto& i : issues) {
        s += "\n  " + i.where + ": ";
        if (!i.key.empty()) s += "`" + i.key + "`: ";
        s += i.message;
    }
    return s;
}

// ---- raw-text checks that YAML parsers handle badly ----

bool precheck_text(std::string_view text, Validator& v) {
    if (text.find('\0') != std::string_view::npos) {
        v.add("", v.source(), fmt::format("this is a binary file (NUL byte at offset {}), expected YAML text",
                                          text.find('\0')));
        return false;
    }
    if (std::size_t bad = first_invalid_utf8(text); bad != std::string_view::npos) {
        int line = 1, col = 1;
        for (std::size_t i = 0; i < bad; ++i) {
            if (text[i] == '\n') {
                ++line;
                col = 1;
            } else {
                ++col;
            }
        }
        v.add("", v.where_line(line, col),
              fmt::format("invalid UTF-8 (byte 0x{:02x} at offset {}); config files must be UTF-8 text",
                          static_cast<unsigned char>(text[bad]), bad));
        return false;
    }
    // YAML forbids tabs in indentation; yaml-cpp's own message for it is cryptic.
    int line = 1;
    for (std::size_t i = 0; i < text.size();) {
        std::size_t end = text.find('\n', i);
        if (end == std::string_view::npos) end = text.size();
        std::string_view l = text.substr(i, end - i);
        std::size_t k = 0;
        while (k < l.size() && (l[k] == ' ' || l[k] == '\t')) ++k;
        std::size_t tab = l.substr(0, k).find('\t');
        if (tab != std::string_view::npos && k < l.size() && l[k] != '#') {
            v.add("", v.where_line(line, static_cast<int>(tab) + 1),
                  "tab character used for indentation; YAML requires spaces");
            return false;
        }
        ++line;
        i = end + 1;
    }
    // Flow-collection nesting deeper than any config needs: refuse before the recursive parser sees it.
    int depth = 0, max_depth = 0;
    for (char c : text) {
        if (c == '[' || c == '{') max_depth = std::max(max_depth, ++depth);
        if ((c == ']' || c == '}') && depth > 0) --depth;
    }
    if (max_depth > 32) {
        v.add("", v.source(), fmt::format("nesting {} levels deep; a config is at most a few levels deep", max_depth));
        return false;
    }
    return true;
}

std::string describe_found(const YAML::Node& n) {
    switch (n.Type()) {
        case YAML::NodeType::Null:
            return "nothing (null)";
        case YAML::NodeType::Sequence:
            return "a list";
        case YAML::NodeType::Map:
            return "a mapping";
        case YAML::NodeType::Scalar: {
            std::string s = n.Scalar();
            if (s.size() > 60) s = s.substr(0, 57) + "...";
            return n.Tag() == "!" ? fmt::format("the quoted string \"{}\"", s) : fmt::format("`{}`", s);
        }
        default:
            return "an undefined value";
    }
}

bool is_quoted(const YAML::Node& n) { return n.Tag() == "!"; }

// The scalar spelled as a plain (unquoted) decimal number, or nullopt; the value may be infinite.
std::optional<double> number_literal(const YAML::Node& n) {
    if (!n.IsScalar() || is_quoted(n)) return std::nullopt;
    static const std::regex kNum(R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$)");
    const std::string& s = n.Scalar();
    // No number is this long; std::regex recurses per character and would overflow the stack on a
    // client's megabyte of digits.
    if (s.size() > 512 || !std::regex_match(s, kNum)) return std::nullopt;
    return std::strtod(s.c_str(), nullptr);
}

std::optional<double> parse_number(const YAML::Node& n) {
    auto x = number_literal(n);
    if (!x || !std::isfinite(*x)) return std::nullopt;
    return x;
}

// Why a number literal was refused beyond the field's range, for the message ("" if it fits).
std::string overflow_note(const YAML::Node& n, bool integer) {
    const auto x = number_literal(n);
    if (!x) return "";
    if (!std::isfinite(*x)) return " (beyond the range of a 64-bit float)";
    if (integer && std::abs(*x) > 9007199254740991.0) return " (integers are limited to 2^53 - 1)";
    return "";
}

bool in_range(const FieldSpec& f, double x) {
    if (f.min_exclusive ? !(x > f.min) : !(x >= f.min)) return false;
    return x <= f.max;
}

// Validates one value against its field; returns the JSON value or nullopt (issue recorded).
std::optional<ordered_json> convert(const FieldSpec& f, const YAML::Node& n, const std::string& where,
                                    Validator& v) {
    auto bad = [&](const std::string& extra = "") -> std::optional<ordered_json> {
        v.add(f.path, where,
              fmt::format("expected {}, found {}{}", describe_expected(f), describe_found(n), extra));
        return std::nullopt;
    };
    if (n.IsNull() && !f.derived_note.empty()) return ordered_json(nullptr);  // derive later
    switch (f.type) {
        case FieldType::kInt: {
            auto x = parse_number(n);
            if (!x || *x != std::floor(*x) || std::abs(*x) > 9007199254740991.0 || !in_range(f, *x))
                return bad(overflow_note(n, true));
            return ordered_json(static_cast<int64_t>(*x));
        }
        case FieldType::kFloat: {
            auto x = parse_number(n);
            if (!x || !in_range(f, *x)) return bad(overflow_note(n, false));
            return ordered_json(*x);
        }
        case FieldType::kBool: {
            if (n.IsScalar() && !is_quoted(n)) {
                const std::string& s = n.Scalar();
                if (s == "true" || s == "True" || s == "TRUE") return ordered_json(true);
                if (s == "false" || s == "False" || s == "FALSE") return ordered_json(false);
                if (s == "yes" || s == "no" || s == "on" || s == "off" || s == "y" || s == "n")
                    return bad(" (YAML 1.2 booleans are spelled true/false)");
            }
            return bad();
        }
        case FieldType::kString:
            if (!n.IsScalar()) return bad();
            return ordered_json(n.Scalar());
        case FieldType::kEnum:
            if (n.IsScalar()) {
                for (const auto& c : f.choices)
                    if (c == n.Scalar()) return ordered_json(c);
                if (auto near = nearest_match(n.Scalar(), f.choices))
                    return bad(fmt::format("; did you mean `{}`?", *near));
            }
            return bad();
        case FieldType::kFloatList: {
            if (!n.IsSequence()) return bad();
            if (f.list_len >= 0 && static_cast<int>(n.size()) != f.list_len)
                return bad(fmt::format(" with {} element{}", n.size(), n.size() == 1 ? "" : "s"));
            ordered_json arr = ordered_json::array();
            for (const auto& e : n) {
                auto x = parse_number(e);
                if (!x || !in_range(f, *x)) {
                    v.add(f.path, v.where(e).empty() ? where : where,
                          fmt::format("expected {}, found the element {}", describe_expected(f), describe_found(e)));
                    return std::nullopt;
                }
                arr.push_back(*x);
            }
            return arr;
        }
        case FieldType::kStringList: {
            if (n.IsScalar() && !is_quoted(n) && n.Scalar().empty()) return ordered_json::array();
            if (!n.IsSequence()) return bad();
            ordered_json arr = ordered_json::array();
            for (const auto& e : n) {
                if (!e.IsScalar()) return bad(fmt::format(" (element {} is {})", arr.size(), describe_found(e)));
                arr.push_back(e.Scalar());
            }
            return arr;
        }
    }
    return bad();
}

// Duplicate keys are silently merged by many YAML loaders; we refuse them. An alias is the node it
// names (same mark), so each collection is walked once however many aliases point at it.
void check_duplicates(const YAML::Node& n, const std::string& prefix, Validator& v, std::set<int>& walked,
                      int depth = 0) {
    if (depth > 64) return;
    if ((n.IsMap() || n.IsSequence()) && !n.Mark().is_null() && !walked.insert(n.Mark().pos).second) return;
    if (n.IsMap()) {
        std::map<std::string, YAML::Node> seen;
        for (auto it = n.begin(); it != n.end(); ++it) {
            std::string k = it->first.IsScalar() ? it->first.Scalar() : "<complex key>";
            std::string path = prefix.empty() ? k : prefix + "." + k;
            auto [pos, inserted] = seen.emplace(k, it->first);
            if (!inserted) {
                v.add(path, v.where(it->first),
                      fmt::format("duplicate key (first defined at line {})", pos->second.Mark().line + 1));
            }
            check_duplicates(it->second, path, v, walked, depth + 1);
        }
    } else if (n.IsSequence()) {
        for (const auto& e : n) check_duplicates(e, prefix, v, walked, depth + 1);
    }
}

// The keys directly under a section or group: "model" has n_layer, ..., rope_scaling (a group, once).
std::vector<std::string> keys_of_section(const std::string& section) {
    std::vector<std::string> out;
    const std::string prefix = section + ".";
    for (const auto& f : schema_fields()) {
        if (f.path.compare(0, prefix.size(), prefix) != 0) continue;
        std::string rest = f.path.substr(prefix.size());
        rest = rest.substr(0, rest.find('.'));
        if (std::find(out.begin(), out.end(), rest) == out.end()) out.push_back(rest);
    }
    return out;
}

// Keys earlier versions accepted and this one does not, with where their meaning went: an error that
// points the way, not "unknown key".
std::optional<std::string> removed_key_message(const std::string& path) {
    if (path == "tracking.mlflow_dir")
        return std::string("was removed: MLflow is configured as `tracking.mlflow: {uri, experiment, run_name}`; "
                           "put the file-store directory in tracking.mlflow.uri (a path or a file: URI; a tracking "
                           "server is an http(s):// URL there)");
    return std::nullopt;
}

std::vector<std::string> top_level_names() {
    std::vector<std::string> out = schema_sections();
    for (const auto& f : schema_fields())
        if (f.path.find('.') == std::string::npos) out.push_back(f.path);
    return out;
}

std::vector<std::string> all_paths() {
    std::vector<std::string> out;
    for (const auto& f : schema_fields()) out.push_back(f.path);
    return out;
}

std::string unknown_key_message(const std::string& path, const std::string& leaf,
                                const std::vector<std::string>& siblings, const std::string& section) {
    std::string msg = "unknown key";
    if (auto near = nearest_match(leaf, siblings)) {
        msg += fmt::format("; did you mean `{}`?", section.empty() ? *near : section + "." + *near);
    } else if (auto anywhere = nearest_match(path, all_paths())) {
        msg += fmt::format("; did you mean `{}`?", *anywhere);
    } else {
        std::string list;
        for (std::size_t i = 0; i < siblings.size(); ++i) list += (i ? ", " : "") + siblings[i];
        msg += section.empty() ? fmt::format("; the top level has: {}", list)
                               : fmt::format("; `{}` has: {}", section, list);
    }
    return msg;
}

struct Origin {
    YAML::Node node;
    std::string where;
};

// Where a --set came from, for messages: "--set KEY=VALUE" when short, else the value's size (a
// server's client can send megabytes, and messages never carry them back).
std::string set_origin_text(const std::string& kv) {
    constexpr size_t kShown = 96;
    if (kv.size() <= kShown) return "--set " + kv;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq > kShown)
        return fmt::format("--set {}... ({} bytes)", kv.substr(0, 64), kv.size());
    return fmt::format("--set {}=... (a value of {} bytes)", kv.substr(0, eq), kv.size() - eq - 1);
}

// Applies one "--set a.b=value" to the tree, recording where each key came from.
void apply_set(YAML::Node& root, const std::string& kv, std::map<std::string, std::string>& set_origin,
               Validator& v) {
    std::string where = set_origin_text(kv);
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
        v.add("", where, "expected KEY=VALUE, e.g. --set trainer.lr=3e-4");
        return;
    }
    std::string key(trim(std::string_view(kv).substr(0, eq)));
    std::string value = kv.substr(eq + 1);
    if (auto removed = removed_key_message(key)) {
        v.add(key, where, *removed);
        return;
    }
    if (!find_field(key)) {
        // The deepest known section or group above the key: "model.rope_scaling.fctor" is looked up among
        // model.rope_scaling's keys.
        auto dot = key.rfind('.');
        while (dot != std::string::npos && !is_key_group(key.substr(0, dot)))
            dot = dot == 0 ? std::string::npos : key.rfind('.', dot - 1);
        std::string section = dot == std::string::npos ? "" : key.substr(0, dot);
        std::string leaf = dot == std::string::npos ? key : key.substr(dot + 1);
        const bool known_section = !section.empty();
        v.add(key, where,
              unknown_key_message(key, known_section ? leaf : key,
                                  known_section ? keys_of_section(section) : all_paths(),
                                  known_section ? section : ""));
        return;
    }
    YAML::Node parsed;
    try {
        if (auto issue = find_yaml_bounds_issue(value)) {
            v.add(key, where, fmt::format("the value {}", issue->message));
            return;
        }
        parsed = YAML::Load(value);
    } catch (const YAML::Exception& e) {
        v.add(key, where, fmt::format("cannot parse the value as YAML: {}", e.msg));
        return;
    }
    // Walk (creating) the mappings down to the key's parent: "model.rope_scaling.type" sets
    // root[model][rope_scaling][type]. yaml-cpp's operator[] on a Node returns a handle into the tree.
    std::vector<std::string> parts = split(key, '.');
    YAML::Node node = root;
    std::string walked;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
        walked += (i ? "." : "") + parts[i];
        YAML::Node child = node[parts[i]];
        if (child && !child.IsMap() && !child.IsNull()) {
            v.add(walked, where, "cannot apply: this key in the file is not a mapping");
            return;
        }
        node.reset(child);
    }
    node[parts.back()] = parsed;
    set_origin[key] = where;
}

}  // namespace

ConfigValidationError::ConfigValidationError(std::string source, std::vector<ConfigIssue> issues)
    : ConfigError(format_issues(source, issues)), source_(std::move(source)), issues_(std::move(issues)) {}

Config load_config_string(std::string_view text, const std::string& source_name, const std::vector<std::string>& sets,
                          ConfigUse use) {
    Validator v(source_name);
    if (text.size() > kMaxConfigBytes) {
        v.add("", source_name,
              fmt::format("file is {} bytes; configs are limited to {} bytes", text.size(), kMaxConfigBytes));
        v.raise();
    }
    if (!precheck_text(text, v)) v.raise();

    YAML::Node root;
    try {
        if (auto issue = find_yaml_bounds_issue(text)) {
            v.add("", issue->line ? v.where_line(issue->line, issue->column) : source_name, issue->message);
            v.raise();
        }
        root = YAML::Load(std::string(text));
    } catch (const YAML::DeepRecursion& e) {
        v.add("", v.where_line(e.mark.line + 1, e.mark.column + 1),
              fmt::format("nested {} levels deep; a config is at most a few levels deep", e.depth()));
        v.raise();
    } catch (const YAML::Exception& e) {
        v.add("", e.mark.is_null() ? source_name : v.where_line(e.mark.line + 1, e.mark.column + 1),
              fmt::format("not valid YAML: {}", e.msg));
        v.raise();
    }
    if (root.IsNull()) {
        v.add("", source_name,
              "the config is empty; expected a mapping with the sections run, model, data, trainer, ... "
              "(see configs/presets/)");
        v.raise();
    }
    if (!root.IsMap()) {
        v.add(
            "", v.where(root),
            fmt::format("the top level is {}; expected a mapping with the sections run, model, data, trainer, ...",
                        root.IsScalar() ? "a single scalar (text without `key: value` lines)" : describe_found(root)));
        v.raise();
    }
    std::set<int> walked;
    check_duplicates(root, "", v, walked);
    if (!v.ok()) v.raise();

    std::map<std::string, std::string> set_origin;
    for (const auto& s : sets) apply_set(root, s, set_origin, v);

    // Walk the tree: every key must be known; groups (sections, tracking.mlflow) are mappings of keys.
    std::map<std::string, YAML::Node> values;  // path -> node
    std::map<std::string, std::string> loc;    // path -> where (file:line:col or --set)
    std::set<std::string> meant;               // keys an unknown key was probably meant to be
    std::function<void(const YAML::Node&, const std::string&, int)> walk = [&](const YAML::Node& map,
                                                                               const std::string& prefix, int depth) {
        for (auto it = map.begin(); it != map.end(); ++it) {
            const std::string leaf = it->first.IsScalar() ? it->first.Scalar() : "<complex key>";
            const std::string path = prefix.empty() ? leaf : prefix + "." + leaf;
            if (find_field(path)) {
                values[path] = it->second;
                loc[path] = set_origin.count(path) ? set_origin[path] : v.where(it->first);
            } else if (auto removed = removed_key_message(path)) {
                v.add(path, v.where(it->first), *removed);
            } else if (is_key_group(path) && depth < 4) {
                const YAML::Node sub = it->second;  // a copy: the iterator yields a temporary
                if (sub.IsNull()) continue;         // "trainer:" with nothing under it: all defaults
                if (!sub.IsMap()) {
                    v.add(path, v.where(it->second),
                          fmt::format("expected a mapping of keys ({}), found {}",
                                      fmt::join(keys_of_section(path), ", "), describe_found(sub)));
                    continue;
                }
                walk(sub, path, depth + 1);
            } else if (prefix.empty()) {
                v.add(path, v.where(it->first), unknown_key_message(path, path, top_level_names(), ""));
            } else {
                v.add(path, v.where(it->first), unknown_key_message(path, leaf, keys_of_section(prefix), prefix));
                if (auto near = nearest_match(leaf, keys_of_section(prefix))) meant.insert(prefix + "." + *near);
            }
        }
    };
    walk(root, "", 0);

    // Materialize every field: the given value, or its default.
    ordered_json resolved = ordered_json::object();
    std::set<std::string> refused;  // keys whose value failed its type or range (their default stands in)
    for (const auto& f : schema_fields()) {
        ordered_json value = f.default_value;
        if (auto it = values.find(f.path); it != values.end()) {
            if (auto c = convert(f, it->second, loc[f.path], v)) {
                value = *c;
            } else {
                refused.insert(f.path);
            }
        }
        resolved[schema_pointer(f.path)] = value;
    }
    // Each value on its own: reported even when another key has the wrong type.
    refuse_lora_keys_without_adapters(resolved, locator(loc, v), v);
    // The cross-field checks in the same pass (all problems at once), less those about a refused key.
    // A misspelt key's value never reached the key it meant, so checks against that key's default would
    // report a problem the user did not write (n_heads: 8 -> "d_model not divisible by n_head 12").
    for (const std::string& k : meant)
        if (!values.count(k)) refused.insert(k);
    std::vector<std::string> warnings;
    auto written_at = [&](const std::string& k) {  // where the key was written, "" when it was not
        return values.count(k) && !values.at(k).IsNull() ? loc[k] : std::string();
    };
    if (!refused.count("trainer.max_steps") && !refused.count("trainer.epochs"))
        if (auto w = max_steps_over_epochs(resolved, written_at("trainer.max_steps"), written_at("trainer.epochs")))
            warnings.push_back(*w);
    if (!refused.count("trainer.warmup_steps") && !refused.count("trainer.max_steps"))
        if (auto w = clamp_warmup_to_run(resolved, locator(loc, v)("trainer.warmup_steps"))) warnings.push_back(*w);
    const std::size_t before_cross = v.count();
    cross_checks(resolved, loc, v, use);
    v.drop_mentioning(before_cross, refused);
    if (!v.ok()) v.raise();

    Config cfg = from_resolved(resolved);
    cfg.source = source_name;
    cfg.warnings = std::move(warnings);
    for (const auto& [path, node] : values)
        if (!node.IsNull()) cfg.written[path] = loc[path];  // "n_kv_head: null" asks for the derived value
    return cfg;
}

void recheck_model_section(Config& cfg, const std::map<std::string, std::string>& origins) {
    Validator v(cfg.source);
    std::map<std::string, std::string> loc = cfg.written;
    for (const auto& [key, where] : origins) loc[key] = where;
    model_checks(cfg.resolved, locator(loc, v), v);
    if (!v.ok()) v.raise();
    cfg.model = from_resolved(cfg.resolved).model;
}

Config load_config_file(const std::filesystem::path& path, const std::vector<std::string>& sets) {
    std::string text;
    try {
        text = read_file(path, kMaxConfigBytes);
    } catch (const InputError& e) {
        throw ConfigValidationError(path.string(), {{"", path.string(), e.what()}});
    } catch (const IoError& e) {
        throw ConfigValidationError(path.string(), {{"", path.string(), e.what()}});
    }
    return load_config_string(text, path.string(), sets);
}

}  // namespace llmt::config
