// The check shared by the optimizers' load_state (optimizer.h).
#include "optim/optimizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

#include "core/error.h"

namespace llmt::optim {

void check_state_owner(const SafetensorsFile& file, const std::string& format, const char* name) {
    // Every optimizer's format tag and its trainer.optimizer value.
    static const std::pair<const char*, const char*> kFormats[] = {{"llmtrain.adamw.v1", "adamw"},
                                                                   {"llmtrain.sgd.v1", "sgd"}};
    const auto it = file.metadata().find("format");
    if (it == file.metadata().end() || it->second == format) return;
    for (const auto& [tag, owner] : kFormats)
        if (it->second == tag)
            throw CheckpointError(fmt::format(
                "optimizer state '{}' was written by trainer.optimizer {} and this run's trainer.optimizer is {}: "
                "one optimizer cannot continue from another's state (hint: resume with trainer.optimizer: {}, or "
                "start a new run)",
                file.path(), owner, name, owner));
}

void check_state_matches(const SafetensorsFile& file, const std::map<std::string, std::string>& metadata,
                         const std::vector<TensorSpec>& specs, const std::string& note) {
    std::vector<std::string> diffs;
    const auto& meta = file.metadata();
    for (const auto& [k, want] : metadata) {
        auto it = meta.find(k);
        if (it == meta.end()) {
            diffs.push_back(fmt::format("metadata '{}' missing (expected '{}')", k, want));
        } else if (it->second != want) {
            diffs.push_back(fmt::format("metadata '{}' is '{}', expected '{}'", k, it->second, want));
        }
    }
    for (auto& d : diff_tensors(file, specs)) diffs.push_back(std::move(d));
    if (diffs.empty()) return;
    throw CheckpointError(
        fmt::format("optimizer state '{}' does not match this model/optimizer ({} difference{}{}):\n  {}", file.path(),
                    diffs.size(), diffs.size() == 1 ? "" : "s", note, fmt::join(diffs, "\n  ")));
}

}  // namespace llmt::optim
