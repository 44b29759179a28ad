#include "config/loader.h"

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include "config/arch_table.h"
#include "config/schedule_keys.h"
#include "config/classifier_checks.h"
#include "config/data_checks.h"
#include "config/schema.h"
#include "config/typed.h"
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

// Collects issues while validating one config.
class Validator {
public:
    explicit Validator(std::string source) : source_(std::move(source)) {}

    void add(std::string key, std::string where, std::string message) {
        issues_.push_back({std::move(key), std::move(where), std::move(message)});
    }
    std::string where(const YAML::Node& n) const {
        const auto m = n.Mark();
        if (m.is_null()) return source_;
        return fmt::format("{}:{}:{}", source_, m.line + 1, m.column + 1);
    }
    std::string where_line(int line, int col) const { return fmt::format("{}:{}:{}", source_, line, col); }
    bool ok() const { return issues_.empty(); }
    // Throws every issue, in file order (line, then column); --set and whole-file issues last.
    [[noreturn]] void raise() {
        auto pos = [this](const ConfigIssue& i) {
            long line = 1L << 40, col = 0;
            if (i.where.rfind(source_ + ":", 0) == 0)
                std::sscanf(i.where.c_str() + source_.size() + 1, "%ld:%ld", &line, &col);
            return std::pair{line, col};
        };
        std::stable_sort(issues_.begin(), issues_.end(),
                         [&](const ConfigIssue& a, const ConfigIssue& b) { return pos(a) < pos(b); });
        throw ConfigValidationError(source_, issues_);
    }
    const std::string& source() const { return source_; }
    std::size_t count() const { return issues_.size(); }
    // Drops the issues from index `first` on that name one of `keys` (as their key or in their message):
    // checks that read a key whose value was refused compared its default, not what the user wrote.
    void drop_mentioning(std::size_t first, const std::set<std::string>& keys) {
        auto mentions = [&](const ConfigIssue& i) {
            for (const auto& k : keys)
                if (i.key == k || i.message.find(k) != std::string::npos) return true;
            return false;
        };
        issues_.erase(std::remove_if(issues_.begin() + static_cast<std::ptrdiff_t>(first), issues_.end(), mentions),
                      issues_.end());
    }

private:
    std::string source_;
    std::vector<ConfigIssue> issues_;
};

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

int64_t as_i(const ordered_json& j) { return j.get<int64_t>(); }

// The resolved value at "section.key".
const ordered_json& value_at(const ordered_json& r, const std::string& path) { return r.at(schema_pointer(path)); }

bool is_default(const ordered_json& r, const std::string& path) {
    return value_at(r, path) == find_field(path)->default_value;
}

// tracking.mlflow.uri: the schemes this version speaks (MLflow itself knows more: databricks, a SQL
// database); an empty value is checked when the run starts, against $MLFLOW_TRACKING_URI.
void check_mlflow_uri(const ordered_json& r, const std::function<std::string(const std::string&)>& at, Validator& v) {
    const std::string uri = value_at(r, "tracking.mlflow.uri");
    if (uri.empty() || local_path_of_uri(uri) || uri.rfind("http://", 0) == 0 || uri.rfind("https://", 0) == 0) return;
    v.add("tracking.mlflow.uri", at("tracking.mlflow.uri"),
          fmt::format("expected a directory, a file: URI (an MLflow file store) or an http(s):// URL (an MLflow "
                      "tracking server), found \"{}\"{}",
                      uri.substr(0, 200),
                      uri.rfind("file://", 0) == 0
                          ? " (a file:// URI names this machine: file:///path or file://localhost/path)"
                          : ": this version speaks no other scheme"));
}

// output.sync: empty (off) or s3://bucket[/prefix] (docs/object_storage.md); bucket names as S3 allows them.
void check_sync_uri(const ordered_json& r, const std::function<std::string(const std::string&)>& at, Validator& v) {
    const std::string uri = value_at(r, "output.sync");
    if (uri.empty()) return;
    bool ok = uri.rfind("s3://", 0) == 0 && uri.size() > 5;
    const std::string bucket = ok ? uri.substr(5, uri.find('/', 5) - 5) : "";
    ok = ok && bucket.size() >= 3 && bucket.size() <= 63 && uri.find("//", 5) == std::string::npos &&
         uri.find("..") == std::string::npos &&
         bucket.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") == std::string::npos;
    if (!ok)
        v.add("output.sync", at("output.sync"),
              fmt::format("expected s3://bucket/prefix (a bucket of 3-63 characters of a-z, 0-9, '.' and '-'; no "
                          "empty or '..' segment), found \"{}\"; this version syncs to S3-compatible stores only",
                          uri.substr(0, 200)));
}

// The lora.* keys other than lora.r act only with an adapter: written with lora.r 0 they would be ignored,
// so they are refused, naming the key.
void refuse_lora_keys_without_adapters(const ordered_json& r, const std::function<std::string(const std::string&)>& at,
                          Validator& v) {
    if (as_i(value_at(r, "lora.r")) > 0) return;
    for (const char* key : {"lora.alpha", "lora.dropout", "lora.target_modules", "lora.use_rslora", "lora.init_from"})
        if (!is_default(r, key))
            v.add(key, at(key),
                  fmt::format("has no effect without adapters (lora.r is 0); set lora.r or remove it (default {})",
                              find_field(key)->default_value.dump()));
}

// run.deterministic: CPU runs are bit-reproducible (fixed thread partitions and reduction orders in every
// CPU kernel); the CUDA kernels are not (float atomics in the LayerNorm, bias, embedding and attention
// backward passes, and cuBLASLt picks its GEMM algorithm by timing), so true on CUDA is refused.
void check_deterministic(const ordered_json& r, const std::function<std::string(const std::string&)>& at,
                         Validator& v) {
    if (value_at(r, "run.deterministic").get<bool>() && value_at(r, "run.device") == "cuda")
        v.add("run.deterministic", at("run.deterministic"),
              "true cannot be honoured with run.device: cuda (the GPU kernels accumulate with float atomics "
              "and cuBLASLt chooses GEMM algorithms by timing); use run.device: cpu for bit-reproducible runs, "
              "or run.deterministic: false");
}

// The hyper-parameters of the optimizer not chosen (trainer.optimizer) would be silently ignored: a
// non-default value is refused, naming the key. Nesterov momentum needs momentum and no dampening (as
// torch.optim.SGD requires).
void check_optimizer_keys(const ordered_json& r, const std::function<std::string(const std::string&)>& at,
                          Validator& v) {
    const std::string opt = value_at(r, "trainer.optimizer");
    const std::vector<std::string> adamw_keys = {"trainer.betas", "trainer.eps"};
    const std::vector<std::string> sgd_keys = {"trainer.momentum", "trainer.dampening", "trainer.nesterov"};
    for (const std::string& key : opt == "sgd" ? adamw_keys : sgd_keys)
        if (!is_default(r, key))
            v.add(key, at(key),
                  fmt::format("is read only with trainer.optimizer {}, and trainer.optimizer is {}; remove it "
                              "(default {}) or set trainer.optimizer: {}",
                              opt == "sgd" ? "adamw" : "sgd", opt, find_field(key)->default_value.dump(),
                              opt == "sgd" ? "adamw" : "sgd"));
    if (opt == "sgd" && value_at(r, "trainer.nesterov").get<bool>() &&
        (value_at(r, "trainer.momentum").get<double>() <= 0 || value_at(r, "trainer.dampening").get<double>() != 0))
        v.add("trainer.nesterov", at("trainer.nesterov"),
              fmt::format("Nesterov momentum needs trainer.momentum > 0 and trainer.dampening 0, found momentum {} "
                          "and dampening {}",
                          value_at(r, "trainer.momentum").get<double>(),
                          value_at(r, "trainer.dampening").get<double>()));
}

// data.* keys that the configured source never reads: a non-default value would be silently ignored.
void check_data_keys_read(const ordered_json& r, const std::function<std::string(const std::string&)>& at,
                          Validator& v) {
    const std::string source = value_at(r, "data.source");
    for (const auto& [key, readers] : unread_data_keys(source, value_at(r, "trainer.precision").get<std::string>()))
        if (!is_default(r, key))
            v.add(key, at(key),
                  fmt::format("is read only with data.source {}, and data.source is {}; remove it (or change "
                              "data.source)",
                              readers, source));
}

}  // namespace

namespace {

// Where a key's value came from (file:line:col, --set, or the default), for messages.
std::function<std::string(const std::string&)> locator(const std::map<std::string, std::string>& loc,
                                                       const Validator& v) {
    return [&loc, &v](const std::string& path) -> std::string {
        auto it = loc.find(path);
        return it == loc.end() ? v.source() + " (default)" : it->second;
    };
}

// model.rope_scaling: its llama3 keys only with type llama3, whose ramp divides by (high - low).
void check_rope_scaling(const ordered_json& r, const std::function<std::string(const std::string&)>& at,
                        Validator& v) {
    static const char* kLlama3Keys[] = {"model.rope_scaling.factor", "model.rope_scaling.low_freq_factor",
                                        "model.rope_scaling.high_freq_factor",
                                        "model.rope_scaling.original_max_position_embeddings"};
    if (value_at(r, "model.rope_scaling.type") != "llama3") {
        for (const char* key : kLlama3Keys)
            if (!is_default(r, key))
                v.add(key, at(key),
                      fmt::format("is read only with model.rope_scaling.type llama3, and the type is {}; remove it "
                                  "(default {}) or set model.rope_scaling.type: llama3",
                                  value_at(r, "model.rope_scaling.type").get<std::string>(),
                                  find_field(key)->default_value.dump()));
    } else if (value_at(r, "model.rope_scaling.high_freq_factor").get<double>() <=
               value_at(r, "model.rope_scaling.low_freq_factor").get<double>()) {
        // The llama3 ramp divides by (high - low).
        v.add("model.rope_scaling.high_freq_factor", at("model.rope_scaling.high_freq_factor"),
              fmt::format("must be > model.rope_scaling.low_freq_factor ({}), found {}",
                          value_at(r, "model.rope_scaling.low_freq_factor").get<double>(),
                          value_at(r, "model.rope_scaling.high_freq_factor").get<double>()));
    }
}

// The model section: derived defaults (a null value), then the cross-field and per-architecture checks.
// Run by the loader, and again after a Hugging Face config.json changed model keys (recheck_model_section).
void model_checks(ordered_json& r, const std::function<std::string(const std::string&)>& at, Validator& v) {
    auto& m = r["model"];
    if (m["n_kv_head"].is_null()) m["n_kv_head"] = m["n_head"];
    if (m["d_ff"].is_null()) m["d_ff"] = 4 * as_i(m["d_model"]);
    if (m["head_dim"].is_null()) m["head_dim"] = as_i(m["d_model"]) / as_i(m["n_head"]);
    const std::string arch = m["arch"];

    // transformers requires this of LlamaConfig too (validate_architecture), even with another head_dim.
    if (as_i(m["d_model"]) % as_i(m["n_head"]) != 0)
        v.add("model.d_model", at("model.d_model"),
              fmt::format("must be divisible by model.n_head ({} % {} = {})", as_i(m["d_model"]), as_i(m["n_head"]),
                          as_i(m["d_model"]) % as_i(m["n_head"])));
    if (as_i(m["n_head"]) % as_i(m["n_kv_head"]) != 0)
        v.add("model.n_kv_head", at("model.n_kv_head"),
              fmt::format("model.n_head ({}) must be a multiple of model.n_kv_head ({})", as_i(m["n_head"]),
                          as_i(m["n_kv_head"])));
    const ArchEntry* family = find_arch(arch);
    if (family && !family->grouped_query) {
        if (as_i(m["n_kv_head"]) != as_i(m["n_head"]))
            v.add("model.n_kv_head", at("model.n_kv_head"),
                  fmt::format("{} uses full multi-head attention: must equal model.n_head ({})", arch,
                              as_i(m["n_head"])));
        // (An indivisible d_model is reported above; the derived head_dim would only repeat it.)
        if (as_i(m["d_model"]) % as_i(m["n_head"]) == 0 &&
            as_i(m["head_dim"]) * as_i(m["n_head"]) != as_i(m["d_model"]))
            v.add(
                "model.head_dim", at("model.head_dim"),
                fmt::format("{} heads split model.d_model: must be model.d_model / model.n_head ({}), found {}", arch,
                            as_i(m["d_model"]) / std::max<int64_t>(1, as_i(m["n_head"])), as_i(m["head_dim"])));
    }
    // A key of another family's section would be silently ignored (only among families of this kind: the
    // classifier checks name what the other kind reads).
    for (const std::string& key : family_keys()) {
        if (!family || family->reads(key) || is_default(r, key)) continue;
        bool same_kind = false;
        for (const ArchEntry& e : arch_table()) same_kind |= e.kind == family->kind && e.reads(key);
        if (same_kind)
            v.add(key, at(key),
                  fmt::format("is read only with model.arch {}, and model.arch is {}; remove it (default {})",
                              families_reading(key), arch, find_field(key)->default_value.dump()));
    }
    // RoPE needs pairs of channels.
    if (family && family->rotary_positions && as_i(m["head_dim"]) % 2 != 0)
        v.add("model.head_dim", at("model.head_dim"),
              fmt::format("RoPE rotates pairs of channels: must be even, found {}", as_i(m["head_dim"])));
    // The llama3 keys under a family with the RoPE section (the family-key check above names them under
    // any other).
    if (family && family->reads("model.rope_scaling.type")) check_rope_scaling(r, at, v);
}

// dist.zero_stage: 2 is not built; 3 (ZeRO-3, train/zero3_state.h) shards the units of the decoder-only
// transformers: not an image classifier.
void zero_stage_checks(const ordered_json& r, const std::function<std::string(const std::string&)>& at, Validator& v) {
    const int stage = r["dist"]["zero_stage"].get<int>();
    if (stage == 2)
        v.add("dist.zero_stage", at("dist.zero_stage"),
              "2 is not built: use 1 (optimizer state and fp32 masters sharded) or 3 (parameters, gradients and "
              "optimizer state sharded per layer)");
    if (stage != 3) return;
    const std::string arch = r["model"]["arch"].get<std::string>();
    if (is_classifier_arch(arch))
        v.add("dist.zero_stage", at("dist.zero_stage"),
              fmt::format("3 shards the layers of the language models; model.arch {} is an image classifier (use "
                          "dist.zero_stage 0 or 1)", arch));
}

void cross_checks(ordered_json& r, const std::map<std::string, std::string>& loc, Validator& v, ConfigUse use) {
    const auto at = locator(loc, v);
    auto& t = r["trainer"];
    model_checks(r, at, v);
    for (const auto& p : classifier_problems(r, use == ConfigUse::kTraining)) v.add(p.key, at(p.key), p.message);
    // trainer.min_lr unwritten: a tenth of trainer.lr (as nanoGPT, the Chinchilla runs and our presets decay).
    if (t["min_lr"].is_null()) t["min_lr"] = 0.1 * t["lr"].get<double>();
    if (t["min_lr"].get<double>() > t["lr"].get<double>())
        v.add("trainer.min_lr", at("trainer.min_lr"),
              fmt::format("must be <= trainer.lr ({}), found {}", t["lr"].get<double>(), t["min_lr"].get<double>()));
    zero_stage_checks(r, at, v);
    if (r["dist"]["backend"] == "nccl" && r["run"]["device"] != "cuda")
        v.add(
            "dist.backend", at("dist.backend"),
            fmt::format("nccl needs run.device: cuda (found run.device: {})", r["run"]["device"].get<std::string>()));
    if (use == ConfigUse::kTraining)
        for (const auto& p : training_data_problems(r)) v.add(p.key, at(p.located_at), p.message);
    static const std::regex kName("^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$");
    for (const char* key : {"run.name", "output.run_id"}) {
        auto dot = std::string(key).find('.');
        std::string s = r[std::string(key).substr(0, dot)][std::string(key).substr(dot + 1)];
        if (std::string(key) == "output.run_id" && s.empty()) continue;
        if (!std::regex_match(s, kName) || s.find("..") != std::string::npos)
            v.add(key, at(key),
                  fmt::format("expected 1-63 characters of letters, digits, '_', '.', '-' starting with a letter or "
                              "digit (it names a directory), found {}",
                              s.size() <= 64 ? "\"" + s + "\"" : fmt::format("a value of {} bytes", s.size())));
    }
    if (r["output"]["root_dir"].get<std::string>().empty())
        v.add("output.root_dir", at("output.root_dir"), "must not be empty");
    check_deterministic(r, at, v);
    check_data_keys_read(r, at, v);
    check_optimizer_keys(r, at, v);
    check_mlflow_uri(r, at, v);
    check_sync_uri(r, at, v);
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
