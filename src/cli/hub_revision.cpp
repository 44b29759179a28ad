#include "cli/hub_revision.h"

#include <CLI/CLI.hpp>

#include "core/hub_cache.h"

namespace llmt::cli {

void add_revision_option(CLI::App& cmd, std::string* revision, std::string_view flag, std::string_view inputs) {
    cmd.add_option(std::string(flag), *revision,
                   std::string("the branch or tag (under refs/) or commit hash of ") + std::string(inputs) +
                       " when given as a hub cache folder (models--ORG--NAME, datasets--ORG--NAME)")
        ->capture_default_str();
}

void resolve_hub_options(const std::string& revision, const std::vector<std::string*>& paths, std::string_view flag,
                         std::string_view inputs) {
    bool used = false;
    for (std::string* p : paths) {
        if (p->empty()) continue;
        bool in_cache = false;
        *p = resolve_hub_path(*p, revision, &in_cache).string();
        used = used || in_cache;
    }
    check_revision_used(revision, used, flag, inputs);
}

}  // namespace llmt::cli
