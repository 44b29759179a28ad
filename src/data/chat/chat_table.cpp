// read_chat_table (chat_table.h): each row becomes the JSON object a chat JSONL line would hold, so one
// parser (parse_chat_record) checks both and reports the same errors.
#include "data/chat/chat_table.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/hub_cache.h"
#include "data/shards/corpus.h"
#include "data/tables/hf_files.h"
#include "data/tables/table_reader.h"

namespace llmt::data {

namespace fs = std::filesystem;

namespace {
nlohmann::json optional_string(const std::optional<std::string>& s) {
    return s ? nlohmann::json(*s) : nlohmann::json(nullptr);
}
nlohmann::json cell_json(const TableCell& c, ColumnKind kind) {
    if (c.null) return nullptr;
    if (kind == ColumnKind::kString) return c.text;
    nlohmann::json list = nlohmann::json::array();
    for (const auto& m : c.messages)
        list.push_back({{"role", optional_string(m.role)}, {"content", optional_string(m.content)}});
    return list;
}
}  // namespace

std::vector<ChatRecord> read_chat_table(const fs::path& path) {
    auto table = open_table(path);
    std::vector<ColumnSpec> cols;
    if (table->has_column("messages")) {
        cols = {{"messages", ColumnKind::kMessages}};
    } else if (table->has_column("prompt") && table->has_column("completion")) {
        cols = {{"prompt", ColumnKind::kString}, {"completion", ColumnKind::kString}};
    } else {
        std::string names;
        for (const auto& n : table->column_names()) names += (names.empty() ? "" : ", ") + n;
        throw FormatError(
            fmt::format("{}: neither a 'messages' column nor 'prompt' and 'completion' columns (columns: {})",
                        path.string(), names.empty() ? "none" : names));
    }
    table->select(cols);
    std::vector<ChatRecord> out;
    std::vector<TableCell> row;
    for (uint64_t r = 1; table->next_row(row); ++r) {
        nlohmann::json j = nlohmann::json::object();
        for (std::size_t k = 0; k < cols.size(); ++k) j[cols[k].name] = cell_json(row[k], cols[k].kind);
        ChatRecord rec;
        rec.messages = parse_chat_record(j.dump(), fmt::format("{}: row {}", path.string(), r));
        rec.line = r;
        out.push_back(std::move(rec));
    }
    return out;
}

std::vector<fs::path> chat_input_files(const std::vector<std::string>& paths, const std::string& revision) {
    std::vector<fs::path> out;
    bool any_cache = false;
    for (const auto& p : paths) {
        std::vector<fs::path> files;
        if (is_hf_dataset_dir(p) || is_table_file_name(p)) {
            HfSelection sel;
            sel.revision = revision;
            files = hf_split_files(fs::path(p), sel);
            any_cache = any_cache || hub_cache_repo_of(p).has_value();
        } else {
            files = list_input_files({p});
        }
        out.insert(out.end(), files.begin(), files.end());
    }
    check_revision_used(revision, any_cache, "data.revision (--revision)", "data.paths (--input)");
    return out;
}

}  // namespace llmt::data
