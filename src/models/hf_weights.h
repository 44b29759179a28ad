// Hugging Face weight files, in and out: one model.safetensors, or shards listed by
// model.safetensors.index.json ({"metadata": {"total_size": bytes}, "weight_map": {tensor: shard file}}),
// as transformers' save_pretrained writes them. Reading converts F32/BF16/F16 to fp32 (core/safetensors.h);
// writing converts fp32 to bf16 (round to nearest even) when asked and shards above a size limit.
// docs/formats/hf_directories.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/safetensors.h"

namespace llmt::models {

inline constexpr std::string_view kHfWeightsFile = "model.safetensors";
inline constexpr std::string_view kHfIndexFile = "model.safetensors.index.json";

// The weights of one model: a single safetensors file or every shard of an index, opened and
// validated. Immutable after open: safe to read from several threads. Movable, not copyable.
class HfWeights {
public:
    // Opens `path`: a .safetensors file; a directory with model.safetensors.index.json (sharded; preferred
    // when both are present, as transformers does); or a directory with model.safetensors. Every shard must
    // exist and be a valid safetensors file; every tensor of the weight_map must be in the shard the index
    // names, and every tensor of a shard in the weight_map for that shard (none in two shards). With
    // `verify`, each file's checksums (when it has them) and the finiteness of every value are checked
    // (core/safetensors_integrity.h, Checksums::kIfPresent). Throws IoError when a file cannot be read,
    // InputError when `path` holds no weights, FormatError naming the index, the shard and the tensor.
    static HfWeights open(const std::filesystem::path& path, bool verify = true);

    HfWeights(HfWeights&&) noexcept = default;
    HfWeights& operator=(HfWeights&&) noexcept = default;

    // The file or index that was opened, for messages.
    const std::filesystem::path& source() const { return source_; }
    bool sharded() const { return sharded_; }
    std::size_t shard_count() const { return shards_.size(); }
    // The opened files: the one file, or the shards in order of first mention in the index.
    const std::vector<SafetensorsFile>& files() const { return shards_; }

    std::vector<std::string> names() const;  // sorted
    bool contains(std::string_view name) const { return shard_of_.find(name) != shard_of_.end(); }
    // dtype, shape and size; throws FormatError naming the source when `name` is absent.
    const TensorInfo& info(std::string_view name) const;
    // The file that holds `name` ("DIR/model-00002-of-00004.safetensors").
    const std::string& file_of(std::string_view name) const;

    // Copies tensor `name` into dst (numel(expected_shape) floats), converting F32/BF16/F16/F64.
    // Throws FormatError naming the file and the tensor when absent, of another shape or not a float.
    void read_f32(std::string_view name, float* dst, const Shape& expected_shape) const;

private:
    HfWeights() = default;
    const SafetensorsFile& shard(std::string_view name) const;

    std::filesystem::path source_;
    bool sharded_ = false;
    std::vector<SafetensorsFile> shards_;
    std::map<std::string, std::size_t, std::less<>> shard_of_;
};

// One tensor to write, in HF name and layout; fp32 values that stay valid during the write.
struct HfTensor {
    std::string name;
    Shape shape;
    const float* data = nullptr;
};

enum class HfDType { kF32, kBF16 };

struct HfWriteOptions {
    HfDType dtype = HfDType::kBF16;
    // A shard holds tensors up to this many bytes (a larger tensor gets a shard of its own);
    // transformers' default max_shard_size is "5GB" = 5e9 bytes.
    std::uint64_t max_shard_bytes = 5'000'000'000ULL;
    std::map<std::string, std::string> metadata;  // added to every file's "__metadata__" (with format: pt)
};

// Writes the tensors into the existing directory `dir`: model.safetensors when their total size is at most
// max_shard_bytes, else model-0000K-of-0000N.safetensors (filled in the given order, a new shard when the
// next tensor would go over the limit) and model.safetensors.index.json. Each file is written atomically
// (core/safetensors.h), but a set of shards is not: write into a fresh directory (HfExportDir) and rename.
// Returns the file names written, the index last. Throws InputError for an empty list, an empty or
// repeated name, a null pointer; IoError on write failure.
std::vector<std::string> write_hf_weights(const std::filesystem::path& dir, const std::vector<HfTensor>& tensors,
                                          const HfWriteOptions& options = {});

// A model directory written whole or not at all: files go into `<target>.tmp.<pid>` beside the target,
// and commit() puts it in place. A target that exists must be an empty directory or a previous export
// (only the files an export writes: config.json, generation_config.json, model*.safetensors,
// model.safetensors.index.json, tokenizer files); it is replaced as a whole, never merged, so no stale
// shard of an older export survives. Anything else there is refused, naming the first foreign entry.
// Destruction without commit() removes the temp directory. Not safe against two writers of one target.
class HfExportDir {
public:
    // Checks the target and creates the temp directory. Throws InputError (a target we must not
    // replace), IoError.
    explicit HfExportDir(std::filesystem::path target);
    ~HfExportDir();
    HfExportDir(const HfExportDir&) = delete;
    HfExportDir& operator=(const HfExportDir&) = delete;

    const std::filesystem::path& dir() const { return tmp_; }  // where to write the files
    const std::filesystem::path& final_dir() const { return target_; }
    // fsyncs the files, moves an older export aside, renames the temp directory to the target, removes
    // the older export and fsyncs the parent. Throws IoError.
    void commit();

private:
    std::filesystem::path target_, tmp_;
    bool committed_ = false;
};

}  // namespace llmt::models
