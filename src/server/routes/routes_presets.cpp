// GET /v1/presets: the preset names a job's "config" may name (the *.yaml files of --presets-dir), each
// with the comment lines its file starts with; the dashboard's submit form lists them.

#include <algorithm>
#include <fstream>

#include "server/context.h"
#include "server/routes/router.h"

namespace llmt::server {

namespace fs = std::filesystem;

namespace {

// The leading "# ..." lines of a preset file, joined with spaces.
std::string description_of(const fs::path& file) {
    std::ifstream in(file);
    std::string line, out;
    while (std::getline(in, line) && line.rfind('#', 0) == 0) {
        size_t start = line.find_first_not_of("# ");
        if (start == std::string::npos) continue;
        if (!out.empty()) out += ' ';
        out += line.substr(start);
    }
    return out;
}

}  // namespace

void register_preset_routes(Router& router, ServerContext& ctx) {
    router.add({"GET", "/v1/presets", Role::kViewer, "Preset names a job's config may name, with their descriptions",
                nlohmann::json::object(), [&ctx](Call& c) {
                    std::vector<std::pair<std::string, std::string>> found;
                    std::error_code ec;
                    for (auto it = fs::directory_iterator(ctx.opts.presets_dir, ec);
                         !ec && it != fs::directory_iterator(); it.increment(ec)) {
                        if (it->path().extension() != ".yaml" || !it->is_regular_file(ec)) continue;
                        found.emplace_back(it->path().stem().string(), description_of(it->path()));
                    }
                    std::sort(found.begin(), found.end());
                    nlohmann::json presets = nlohmann::json::array();
                    for (const auto& [name, desc] : found) presets.push_back({{"name", name}, {"description", desc}});
                    c.reply(200, {{"presets", presets}});
                }});
}

}  // namespace llmt::server
