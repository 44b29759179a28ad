#include "config/path_values.h"

#include <fmt/format.h>

namespace llmt::config {

std::vector<PathValue> path_values(const nlohmann::ordered_json& resolved) {
    std::vector<PathValue> out;
    for (const auto& f : schema_fields()) {
        if (f.access == Access::kNone) continue;
        const auto dot = f.path.find('.');
        const nlohmann::ordered_json* v = &resolved;
        if (dot == std::string::npos) {
            if (!v->contains(f.path)) continue;
            v = &(*v)[f.path];
        } else {
            const std::string section = f.path.substr(0, dot), key = f.path.substr(dot + 1);
            if (!v->contains(section) || !(*v)[section].is_object() || !(*v)[section].contains(key)) continue;
            v = &(*v)[section][key];
        }
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
