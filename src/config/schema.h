// The config schema (docs/design.md §3): every key with its type, default, range and one line of doc.
// The loader validates against it, print-config materializes every default from it, and `--set`
// overrides go through it, so the three cannot drift apart.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace llmt::config {

enum class FieldType { kInt, kFloat, kBool, kString, kEnum, kFloatList, kStringList };

// What a string-valued key's value names, for the server's access policy (docs/security.md): every
// kString/kStringList field states one, so a new path- or URI-valued key cannot escape the policy.
enum class Access {
    kNone,      // not a path (a name, a field, a pattern of values)
    kRead,      // a file, directory or glob the run reads
    kWrite,     // a directory the run creates and writes
    kEndpoint,  // a URI the run connects to (tracking server, object store)
};

struct FieldSpec {
    std::string path;  // "trainer.lr"
    FieldType type = FieldType::kString;
    // Default value; null means "derived from other keys" (see derived_note) or "required".
    nlohmann::ordered_json default_value;
    bool required = false;
    double min = -1e300;  // inclusive bounds for numbers (and for each element of float lists)
    double max = 1e300;
    bool min_exclusive = false;
    std::vector<std::string> choices;  // for kEnum
    int list_len = -1;                 // exact length for lists, -1 = any
    std::string derived_note;          // "n_head" for model.n_kv_head, ...
    std::string doc;
    Access access = Access::kNone;     // kString / kStringList: what the value names
    bool glob = false;                 // kRead: the value is a glob (its matches are read)
    std::vector<std::string> not_paths;  // values that name no file ("scratch", "gpt2", "")
    // A kEndpoint key whose value may instead be a local directory (a plain path or a file: URI), which
    // is then a kWrite value (tracking.mlflow.uri: a file store or a tracking server).
    bool file_uri_is_write = false;
    // A kRead key whose value may instead be an s3:// URI, which is then a kEndpoint value (fetched from
    // the store: model.init_from, data.train_shards, data.val_shards; docs/object_storage.md).
    bool s3_uri_is_endpoint = false;
};

// All fields, in the order print-config prints them.
const std::vector<FieldSpec>& schema_fields();

// The field at `path`, or nullptr.
const FieldSpec* find_field(const std::string& path);

// Where field `path` ("model.rope_scaling.type") lives in a resolved config: a JSON pointer
// ("/model/rope_scaling/type"). Keys nest: a section, then keys, some of them groups of keys.
nlohmann::ordered_json::json_pointer schema_pointer(const std::string& path);

// Whether `path` is a section or a group of keys ("model", "model.rope_scaling"): some field lies under it.
bool is_key_group(const std::string& path);

// The parts of a key path ("tracking.mlflow.uri" -> tracking, mlflow, uri).
std::vector<std::string> split_path(const std::string& path);
// The value at `path` in a resolved config, or nullptr.
const nlohmann::ordered_json* resolved_value(const nlohmann::ordered_json& resolved, const std::string& path);

// What `value` of field `f` names: f.access, except for file_uri_is_write keys, whose http(s) URLs are
// kEndpoint and whose paths and file: URIs are kWrite.
Access access_of(const FieldSpec& f, const std::string& value);
// The local path a plain path or file: URI names ("file:///a/b" -> "/a/b", "file:rel" -> "rel"); nullopt
// for a URI of another scheme.
std::optional<std::string> local_path_of_uri(const std::string& value);

// Section names in order: run, model, lora, data, trainer, dist, tracking, output.
const std::vector<std::string>& schema_sections();

// Whether `value` of field `f` names a file, directory or URI (not one of f.not_paths).
bool names_a_path(const FieldSpec& f, const std::string& value);

// "an integer >= 1", "one of cpu, cuda, auto", ... for error messages.
std::string describe_expected(const FieldSpec& f);

inline constexpr int kSchemaVersion = 1;

}  // namespace llmt::config
