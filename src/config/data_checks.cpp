#include "config/data_checks.h"

#include <fmt/format.h>

#include "config/arch_table.h"

namespace llmt::config {

using nlohmann::ordered_json;

std::vector<std::pair<std::string, std::string>> unread_data_keys(const std::string& source,
                                                                  const std::string& precision) {
    if (source == "shards") {
        std::vector<std::pair<std::string, std::string>> keys = {{"data.paths", "text, jsonl, hf or chat"},
                                                                 {"data.val_fraction", "text, jsonl, hf or chat"},
                                                                 {"data.text_field", "jsonl or hf"},
                                                                 {"data.packing", "chat"},
                                                                 {"data.split", "hf"},
                                                                 {"data.val_split", "hf"},
                                                                 {"data.config_name", "hf"},
                                                                 {"data.revision", "hf or chat"}};
        // The CPU precision probe's cache (train/cpu_precision.h) is read with auto or bf16.
        if (precision == "fp32")
            keys.push_back({"data.cache_dir", "text, jsonl, hf or chat (or trainer.precision auto or bf16)"});
        return keys;
    }
    // text/jsonl/chat are tokenized into data.cache_dir, whatever data.shard_format says.
    std::vector<std::pair<std::string, std::string>> keys = {
        {"data.train_shards", "shards"}, {"data.val_shards", "shards"}, {"data.shard_format", "shards"}};
    if (source == "idx") {  // images: nothing is tokenized (classifier_checks.h covers the idx-only keys)
        keys.push_back({"data.paths", "text, jsonl, hf or chat"});
        keys.push_back({"data.cache_dir", "text, jsonl, hf or chat"});
    }
    if (source != "jsonl" && source != "hf") keys.push_back({"data.text_field", "jsonl or hf"});
    if (source != "hf") {
        for (const char* k : {"data.split", "data.val_split", "data.config_name"}) keys.push_back({k, "hf"});
    }
    if (source != "chat") keys.push_back({"data.packing", "chat"});
    if (source != "hf" && source != "chat") keys.push_back({"data.revision", "hf or chat"});
    return keys;
}

std::vector<DataProblem> training_data_problems(const ordered_json& r) {
    std::vector<DataProblem> out;
    const auto& t = r["trainer"];
    const auto& d = r["data"];
    if (d["source"] == "shards") {
        if (d["train_shards"].get<std::string>().empty())
            out.push_back({"data.train_shards", "data.source",
                           "data.source is shards, so data.train_shards (a glob) is required"});
        if (d["val_shards"].get<std::string>().empty() && t["eval_every_steps"].get<int64_t>() > 0)
            out.push_back({"data.val_shards", "trainer.eval_every_steps",
                           "evaluation is on (trainer.eval_every_steps > 0), so data.val_shards (a glob) is required; "
                           "set trainer.eval_every_steps: 0 to train without evaluation"});
    } else if (d["source"] != "idx" && d["paths"].empty()) {
        out.push_back({"data.paths", "data.source",
                       fmt::format("data.source is {}, so data.paths needs at least one file or directory",
                                   d["source"].get<std::string>())});
    }
    if (d["source"] == "chat") {
        if (d["tokenizer"] == "gpt2")
            out.push_back(
                {"data.tokenizer", "data.tokenizer",
                 "data.source is chat, so data.tokenizer must be a model directory holding tokenizer.json and "
                 "tokenizer_config.json (the chat template); gpt2 has no chat template"});
        // With model.init_from the architecture comes from its config.json later (the trainer checks it then).
        const bool arch_known = r["model"]["init_from"] == "scratch" || r["model"]["init_from"] == "";
        if (arch_known && r["model"]["arch"].is_string() &&
            !has_rotary_positions(r["model"]["arch"].get<std::string>()))
            out.push_back(
                {"data.source", "data.source",
                 fmt::format("chat needs a model with rotary positions (model.arch: {}): packed examples restart "
                             "their position ids",
                             families_with_rotary_positions())});
    }
    return out;
}

}  // namespace llmt::config
