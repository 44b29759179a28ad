// Which files of a Hugging Face dataset directory hold a split (docs/data.md "Hugging Face datasets"):
// a hub snapshot of Parquet/Arrow shards, a `save_to_disk` Dataset or DatasetDict directory, a hub
// cache repository folder (datasets--ORG--NAME), or a single .parquet/.arrow file.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace llmt::data {

struct HfSelection {
    std::string split = "train";
    std::string config;             // a hub snapshot's <config>/ folder; empty: the default one
    std::string revision = "main";  // for hub cache repository folders
};

// The table files of `input` for the selection, in the order their documents are read (sorted
// relative paths; a save_to_disk directory: the order state.json lists). Throws InputError when the
// split or config is not there, naming those found, or when the directory holds no table files.
std::vector<std::filesystem::path> hf_split_files(const std::filesystem::path& input, const HfSelection& sel);

// The same over several inputs, concatenated in the order given.
std::vector<std::filesystem::path> hf_split_files(const std::vector<std::string>& inputs, const HfSelection& sel);

// True when `dir` is a dataset directory hf_split_files understands (holds .parquet/.arrow files, a
// state.json or dataset_dict.json, or is a hub cache repository folder) rather than text/JSONL.
bool is_hf_dataset_dir(const std::filesystem::path& dir);

}  // namespace llmt::data
