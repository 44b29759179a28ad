// The optimizer files of a checkpoint and their index in state.json (train/optimizer_shards.h), and ZeRO-1's
// split of the arena (train/dist_context.h zero_shard).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "train/checkpoint.h"
#include "train/dist_context.h"
#include "train/optimizer_shards.h"
#include "train/train_state.h"

using namespace llmt;
using namespace llmt::train;

namespace {

// A Checkpoint of step_10 whose model file is an empty safetensors file (only state.json is read here).
Checkpoint checkpoint() {
    const std::filesystem::path f =
        std::filesystem::temp_directory_path() / ("llmt_opt_index_" + std::to_string(::getpid()) + ".safetensors");
    write_safetensors(f, {}, {});
    Checkpoint ck{"/runs/r/checkpoints/step_10", 10,   models::HfWeights::open(f, false), std::nullopt,
                  nlohmann::json::object(),      false};
    std::filesystem::remove(f);
    return ck;
}

}  // namespace

TEST(ZeroShard, EqualChunksAndTheRemainderOnTheLastRank) {
    EXPECT_EQ(zero_shard(10, 3, 0).begin, 0u);
    EXPECT_EQ(zero_shard(10, 3, 0).end, 3u);
    EXPECT_EQ(zero_shard(10, 3, 1).begin, 3u);
    EXPECT_EQ(zero_shard(10, 3, 2).begin, 6u);
    EXPECT_EQ(zero_shard(10, 3, 2).end, 10u);
    EXPECT_EQ(zero_shard(64, 2, 1).begin, 32u);  // arenas are whole 64-byte lines: 2, 4, 8, 16 divide them
    EXPECT_EQ(zero_shard(10, 1, 0).end, 10u);
    EXPECT_THROW(zero_shard(3, 4, 0), InternalError);
}

TEST(OptimizerShards, FilesAndTheirIndex) {
    auto files = optimizer_shard_files(10, 3, true);
    ASSERT_EQ(files.size(), 3u);
    EXPECT_EQ(files[2].file, "optimizer.rank2.safetensors");
    EXPECT_EQ(files[2].begin, 6u);
    files = optimizer_shard_files(10, 3, false);
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(files[0].file, "optimizer.safetensors");
    EXPECT_EQ(files[0].end, 10u);

    Checkpoint ck = checkpoint();
    ck.state = {{"optimizer_shards", optimizer_index_json(optimizer_shard_files(10, 2, true))}};
    TrainState st;
    auto back = read_optimizer_index(ck, st);
    ASSERT_EQ(back.size(), 2u);
    EXPECT_EQ(back[1].file, "optimizer.rank1.safetensors");
    EXPECT_EQ(back[1].begin, 5u);
    EXPECT_EQ(back[1].end, 10u);

    // Before the index: the files follow from world_size and zero_stage.
    ck.state = nlohmann::json::object();
    st.world_size = 3;
    st.zero_stage = 1;
    back = read_optimizer_index(ck, st);
    ASSERT_EQ(back.size(), 3u);
    EXPECT_EQ(back[2].file, "optimizer.rank2.safetensors");
    st.zero_stage = 0;
    back = read_optimizer_index(ck, st);
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(back[0].file, "optimizer.safetensors");
}

TEST(OptimizerShards, AMalformedIndexIsNamed) {
    Checkpoint ck = checkpoint();
    const TrainState st;
    auto expect_error = [&](const nlohmann::json& index, const std::string& words) {
        ck.state = {{"optimizer_shards", index}};
        try {
            read_optimizer_index(ck, st);
            ADD_FAILURE() << "accepted " << index.dump();
        } catch (const CheckpointError& e) {
            const std::string m = e.what();
            EXPECT_NE(m.find("step_10/state.json': field \"optimizer_shards\""), std::string::npos) << m;
            EXPECT_NE(m.find(words), std::string::npos) << m;
        }
    };
    expect_error(nlohmann::json::object(), "non-empty array");
    expect_error(nlohmann::json::array(), "non-empty array");
    expect_error({{{"file", "optimizer.rank0.safetensors"}, {"slice_begin", 0}}}, "entry");
    expect_error({{{"file", "../model.safetensors"}, {"slice_begin", 0}, {"slice_end", 4}}}, "a file name inside");
    expect_error({{{"file", "optimizer.rank0.safetensors"}, {"slice_begin", 4}, {"slice_end", 4}}}, "empty slice");
    expect_error({{{"file", "optimizer.rank0.safetensors"}, {"slice_begin", -1}, {"slice_end", 4}}}, "entry");
}
