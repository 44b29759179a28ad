// A real `llmtrain serve` with one CPU slot and a quotas file that lets no job labelled team=held run: such jobs
// stay queued, so a test fills the queue (or the store) without training anything.
#pragma once

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "server/server_fixture.h"

namespace llmt::testing {

// Writes root/quotas.json and starts the server in root/srv with `extra` flags after its own.
inline std::unique_ptr<ServeProcess> serve_with_held_label(const std::filesystem::path& root,
                                                           const std::vector<std::string>& extra = {}) {
    std::ofstream(root / "quotas.json") << R"({"team=held": {"max_running": 0}})";
    std::vector<std::string> flags = {"--capacity", "cpus=1,gpus=0", "--quotas-file", (root / "quotas.json").string()};
    flags.insert(flags.end(), extra.begin(), extra.end());
    return std::make_unique<ServeProcess>(root / "srv", flags);
}

}  // namespace llmt::testing
