#include "config/path_values.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace llmt::config {

namespace {

// The IDX files are read only by data.source idx: under another source their (default) values name no
// file the job opens, so they are no paths of it (the loader refuses them set: config/classifier_checks.h).
bool read_by_source(const std::string& field, const nlohmann::ordered_json& resolved) {
    static const char* const kIdxFiles[] = {"data.train_images", "data.train_labels", "data.test_images",
                                            "data.test_labels"};
    if (std::find(std::begin(kIdxFiles), std::end(kIdxFiles), field) == std::end(kIdxFiles)) return true;
    const auto* source = resolved_value(resolved, "data.source");
    return source && source->is_string() && source->get<std::string>() == "idx";
}

}  // namespace

std::vector<PathValue> path_values(const nlohmann::ordered_json& resolved) {
    std::vector<PathValue> out;
    for (const auto& f : schema_fields()) {
        if (f.access == Access::kNone || !read_by_source(f.path, resolved)) continue;
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
