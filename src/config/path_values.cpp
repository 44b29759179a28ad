#include "config/path_values.h"

#include <fmt/format.h>

namespace llmt::config {

std::vector<PathValue> path_values(const nlohmann::ordered_json& resolved) {
    std::vector<PathValue> out;
    for (const auto& f : schema_fields()) {
        if (f.access == Access::kNone) continue;
        const nlohmann::ordered_json* v = resolved_value(resolved, f.path);
        if (!v) continue;
        auto add = [&](const std::string& key, const nlohmann::ordered_json& item) {
            if (!item.is_string()) return;
            const std::string value = item.get<std::string>();
            if (!names_a_path(f, value)) return;
            const Access access = access_of(f, value);
            // A file: URI's write value is the directory it names, which is what the policy places; an s3://
            // value of a read key is an endpoint, kept as written.
            const bool file_uri = f.file_uri_is_write && access == Access::kWrite;
            out.push_back({key, f.path, file_uri ? *local_path_of_uri(value) : value, access, f.glob});
        };
        if (v->is_array()) {
            for (size_t i = 0; i < v->size(); ++i) add(fmt::format("{}[{}]", f.path, i), (*v)[i]);
        } else {
            add(f.path, *v);
        }
    }
    return out;
}

}  // namespace llmt::config
