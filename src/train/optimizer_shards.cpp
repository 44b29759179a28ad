// Optimizer state files of a checkpoint and their index (optimizer_shards.h).
#include "train/optimizer_shards.h"

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "optim/optimizer.h"
#include "train/checkpoint.h"
#include "train/dist_context.h"
#include "train/train_state.h"

namespace llmt::train {

std::string zero_optimizer_file(int rank) { return fmt::format("optimizer.rank{}.safetensors", rank); }

std::vector<OptimizerShardFile> optimizer_shard_files(std::size_t arena_numel, int world, bool zero1) {
    if (!zero1) return {{kOptimizerFile, 0, arena_numel}};
    std::vector<OptimizerShardFile> out;
    for (int k = 0; k < world; ++k) {
        const optim::ArenaSlice s = zero_shard(arena_numel, world, k);
        out.push_back({zero_optimizer_file(k), s.begin, s.end});
    }
    return out;
}

nlohmann::json optimizer_index_json(const std::vector<OptimizerShardFile>& files) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& f : files) a.push_back({{"file", f.file}, {"slice_begin", f.begin}, {"slice_end", f.end}});
    return a;
}

std::vector<OptimizerShardFile> read_optimizer_index(const Checkpoint& ck, const TrainState& st) {
    const auto it = ck.state.find("optimizer_shards");
    if (it == ck.state.end()) {  // before the index: the files follow from world_size and zero_stage
        if (st.zero_stage != 1) return {{kOptimizerFile, 0, SIZE_MAX}};
        std::vector<OptimizerShardFile> out;
        for (int k = 0; k < st.world_size; ++k) out.push_back({zero_optimizer_file(k), 0, SIZE_MAX});
        return out;
    }
    const std::string where = (ck.dir / kStateFile).string();
    auto bad = [&](const std::string& what) {
        return CheckpointError(fmt::format("'{}': field \"optimizer_shards\" {}", where, what));
    };
    if (!it->is_array() || it->empty()) throw bad("must be a non-empty array of {file, slice_begin, slice_end}");
    std::vector<OptimizerShardFile> out;
    for (const auto& e : *it) {
        const auto f = e.is_object() ? e.find("file") : e.end();
        const auto b = e.is_object() ? e.find("slice_begin") : e.end();
        const auto n = e.is_object() ? e.find("slice_end") : e.end();
        auto count = [&](nlohmann::json::const_iterator v) {
            return v != e.end() && v->is_number_integer() && (v->is_number_unsigned() || v->get<std::int64_t>() >= 0);
        };
        if (f == e.end() || !f->is_string() || !count(b) || !count(n))
            throw bad(fmt::format("entry {} must be {{\"file\": name, \"slice_begin\": n, \"slice_end\": n}}",
                                  e.dump().substr(0, 80)));
        OptimizerShardFile s{f->get<std::string>(), b->get<std::size_t>(), n->get<std::size_t>()};
        if (s.file.empty() || s.file.find('/') != std::string::npos || s.file == "." || s.file == "..")
            throw bad(fmt::format("names '{}', expected a file name inside the checkpoint directory", s.file));
        if (s.begin >= s.end)
            throw bad(fmt::format("entry '{}' has the empty slice [{}, {})", s.file, s.begin, s.end));
        out.push_back(std::move(s));
    }
    return out;
}

std::size_t restore_optimizer_state(optim::Optimizer& opt, const Checkpoint& ck,
                                    const std::vector<OptimizerShardFile>& index, optim::ArenaSlice slice) {
    // optimizer.safetensors is opened and verified by load_checkpoint already.
    auto open = [&](const std::string& name) {
        if (name == kOptimizerFile && ck.optimizer) return std::optional<SafetensorsFile>();
        const std::filesystem::path p = ck.dir / name;
        std::error_code ec;
        if (!std::filesystem::exists(p, ec))
            throw CheckpointError(fmt::format("checkpoint '{}' has no {} (listed in its state.json, or written by "
                                              "the ranks its state.json names)",
                                              ck.dir.string(), name));
        std::optional<SafetensorsFile> f = SafetensorsFile::open(p);
        verify_checkpoint_file(ck, *f);
        return f;
    };
    std::vector<std::optional<SafetensorsFile>> opened;
    opened.reserve(index.size());  // files points into it: no reallocation
    std::vector<const SafetensorsFile*> files;
    for (const auto& s : index) {
        if (s.end <= slice.begin || s.begin >= slice.end) continue;  // holds none of this rank's slice
        opened.push_back(open(s.file));
        files.push_back(opened.back() ? &*opened.back() : &*ck.optimizer);
    }
    if (files.empty())
        throw CheckpointError(fmt::format("checkpoint '{}': no optimizer state file holds arena elements [{}, {})",
                                          ck.dir.string(), slice.begin, slice.end));
    const auto& meta = files.front()->metadata();
    const auto b = meta.find("slice_begin"), e = meta.find("slice_end");
    const bool same_slice = files.size() == 1 && b != meta.end() && e != meta.end() &&
                            b->second == std::to_string(slice.begin) && e->second == std::to_string(slice.end);
    if (same_slice) {
        opt.load_state(*files.front());
    } else {
        opt.load_state_shards(files);
    }
    return files.size();
}

}  // namespace llmt::train
