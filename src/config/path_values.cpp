#include "config/path_values.h"

#include <fmt/format.h>

namespace llmt::config {

std::vector<PathValue> path_values(const nlohmann::ordered_json& resolved) {
    std::vector<PathValue> out;
    for (const auto& f : schema_fields()) {
        if (f.access == Access::kNone) continue;
        const auto ptr = schema_pointer(f.path);
        if (!resolved.contains(ptr)) continue;
        const nlohmann::ordered_json* v = &resolved[ptr];
        auto add = [&](const std::string& key, const nlohmann::ordered_json& item) {
            if (!item.is_string()) return;
            const std::string value = item.get<std::string>();
            if (names_a_path(f, value)) out.push_back({key, f.path, value, f.access, f.glob});
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
