// The access policy for server-side jobs (server/jobs/job_access.h) on real files: roots, denied paths,
// symlinks out of a root, "..", globs, relative values, pods' paths, write values, endpoints; the
// schema's classes (a path-valued key must be classified); the environment jobs get (server/jobs/job_env.h).
#include <gtest/gtest.h>

#include <map>
#include <unistd.h>

#include <algorithm>

#include <filesystem>
#include <fstream>

#include "config/loader.h"
#include "config/path_values.h"
#include "config/schema.h"
#include "core/fs.h"
#include "models/hf_resolve.h"
#include "server/api_error.h"
#include "server/jobs/job_access.h"
#include "server/jobs/job_env.h"
#include "server/jobs/job_request.h"
#include "server/estimate/preset_cache.h"

namespace {

namespace fs = std::filesystem;
using namespace llmt::server;
using llmt::config::Access;
using llmt::config::PathValue;

class JobAccessTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("llmt_access_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_ / "data/shards");
        fs::create_directories(dir_ / "data/server");
        fs::create_directories(dir_ / "outside");
        std::ofstream(dir_ / "data/shards/train_0.bin") << "x";
        std::ofstream(dir_ / "outside/secret") << "llmt_secret\n";
        fs::create_symlink(dir_ / "outside/secret", dir_ / "data/shards/link");
        policy_.read_roots = {fs::canonical(dir_ / "data")};
        policy_.denied = {fs::canonical(dir_ / "data/server")};
        policy_.relative_base = dir_;
    }
    void TearDown() override { fs::remove_all(dir_); }

    static PathValue read(const std::string& v, bool glob = false) {
        return {"data.x", "data.x", v, Access::kRead, glob};
    }
    // The refusal's field, or "" when the value is allowed.
    std::string refused(const PathValue& v, const JobAccessPolicy& p) {
        try {
            check_job_access(std::vector<PathValue>{v}, p);
            return "";
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status(), 400);
            EXPECT_EQ(e.code(), "path_not_allowed");
            message_ = e.what();
            return e.field();
        }
    }
    std::string refused(const PathValue& v) { return refused(v, policy_); }

    fs::path dir_;
    JobAccessPolicy policy_;
    std::string message_;
};

TEST_F(JobAccessTest, ReadsUnderARootAreAllowedAndOthersRefusedNamingTheKey) {
    EXPECT_EQ(refused(read((dir_ / "data/shards/train_0.bin").string())), "");
    EXPECT_EQ(refused(read("data/shards/train_0.bin")), "");  // relative to the jobs' working directory
    EXPECT_EQ(refused(read((dir_ / "data/shards/not_yet_there.bin").string())), "");
    EXPECT_EQ(refused(read((dir_ / "outside/secret").string())), "data.x");
    EXPECT_NE(message_.find("outside what jobs on this server may read"), std::string::npos) << message_;
    EXPECT_NE(message_.find("--allow-read"), std::string::npos) << message_;
    EXPECT_EQ(refused(read("/etc/passwd")), "data.x");
    EXPECT_EQ(refused(read("outside/secret")), "data.x");
}

TEST_F(JobAccessTest, EscapesThroughDotDotSymlinksAndPrefixesAreRefused) {
    EXPECT_EQ(refused(read((dir_ / "data/shards/../../outside/secret").string())), "data.x");
    EXPECT_EQ(refused(read("data/../outside/secret")), "data.x");
    EXPECT_EQ(refused(read((dir_ / "data/shards/link").string())), "data.x");  // a symlink out of the root
    fs::create_directories(dir_ / "data2");
    EXPECT_EQ(refused(read((dir_ / "data2").string())), "data.x");  // "data2" is not under "data"
}

// A hub cache folder under a root (models--ORG--NAME): its snapshots' links into blobs/ are followed; a link
// that leaves the folder is refused, even to a file under a read root, since the job reads it as the model.
TEST_F(JobAccessTest, HubCacheLinksStayInsideTheirFolder) {
    const fs::path repo = dir_ / "data/hub/models--org--m";
    const fs::path snap = repo / "snapshots/0123456789abcdef0123456789abcdef01234567";
    fs::create_directories(repo / "refs");
    fs::create_directories(repo / "blobs");
    fs::create_directories(snap);
    std::ofstream(repo / "refs/main") << snap.filename().string();
    std::ofstream(repo / "blobs/abc") << "{}";
    fs::create_symlink("../../blobs/abc", snap / "config.json");
    const PathValue init_from{"model.init_from", "model.init_from", repo.string(), Access::kRead, false};
    EXPECT_EQ(refused(init_from), "");
    EXPECT_EQ(refused(read(snap.string())), "");
    EXPECT_EQ(refused(read((snap / "config.json").string())), "");
    // Out of the folder: to the shards under the same root, and out of every root.
    fs::create_symlink(dir_ / "data/shards/train_0.bin", snap / "model.safetensors");
    EXPECT_EQ(refused(init_from), "model.init_from");
    EXPECT_NE(message_.find("model.safetensors' links to"), std::string::npos) << message_;
    EXPECT_NE(message_.find("outside the hub cache folder"), std::string::npos) << message_;
    EXPECT_EQ(refused(read(snap.string())), "data.x");
    EXPECT_EQ(refused(read((snap / "model.safetensors").string())), "data.x");
    fs::remove(snap / "model.safetensors");
    fs::create_symlink(dir_ / "outside/secret", snap / "tokenizer.json");
    EXPECT_EQ(refused(init_from), "model.init_from");
    // Another revision's snapshot counts too: the job may pick any with model.revision.
    fs::remove(snap / "tokenizer.json");
    fs::create_directories(repo / "snapshots/ffff");
    fs::create_symlink(dir_ / "outside/secret", repo / "snapshots/ffff/tokenizer.json");
    EXPECT_EQ(refused(init_from), "model.init_from");
    // Pods' paths are another machine's: checked lexically, not resolved here.
    JobAccessPolicy pods = policy_;
    pods.local = false;
    EXPECT_EQ(refused(init_from, pods), "");
}

TEST_F(JobAccessTest, DeniedPathsStayUnreadableUnderARoot) {
    std::ofstream(dir_ / "data/server/tokens") << "llmt_admin admin admin\n";
    EXPECT_EQ(refused(read((dir_ / "data/server/tokens").string())), "data.x");
    EXPECT_EQ(refused(read((dir_ / "data/server").string())), "data.x");
    EXPECT_EQ(refused(read((dir_ / "data/server/*").string(), true)), "data.x");
}

TEST_F(JobAccessTest, TheAnswerDoesNotTellWhetherAFileExists) {
    refused(read((dir_ / "outside/secret").string()));
    const std::string existing = message_.substr(message_.find("' is"));
    refused(read((dir_ / "outside/no_such_file").string()));
    EXPECT_EQ(message_.substr(message_.find("' is")), existing);
}

TEST_F(JobAccessTest, GlobsAreCheckedByTheirFixedDirectoriesAndMayNotClimbAfterAWildcard) {
    EXPECT_EQ(refused(read((dir_ / "data/shards/train_*.bin").string(), true)), "");
    EXPECT_EQ(refused(read("data/shards/*.bin", true)), "");
    EXPECT_EQ(refused(read((dir_ / "outside/*").string(), true)), "data.x");
    EXPECT_EQ(refused(read((dir_ / "data/*/../../outside/secret").string(), true)), "data.x");
    EXPECT_NE(message_.find("after a wildcard"), std::string::npos) << message_;
    EXPECT_EQ(refused(read("*", true)), "data.x");  // the working directory itself is not a root
}

TEST_F(JobAccessTest, PodPathsAreCheckedLexicallyAndMustBeAbsolute) {
    JobAccessPolicy pods;
    pods.local = false;
    pods.read_roots = {"/data", "/models"};
    EXPECT_EQ(refused(read("/data/shards/train_*.bin", true), pods), "");
    EXPECT_EQ(refused(read("/models/llama"), pods), "");
    EXPECT_EQ(refused(read("/out/other-job/model.safetensors"), pods), "data.x");
    EXPECT_EQ(refused(read("/data/../out/x"), pods), "data.x");
    EXPECT_EQ(refused(read("data/shards/x.bin"), pods), "data.x");
    EXPECT_NE(message_.find("relative"), std::string::npos) << message_;
}

TEST_F(JobAccessTest, WriteValuesAreRelativeAndPlacedInTheJobsDirectory) {
    PathValue w{"data.cache_dir", "data.cache_dir", "", Access::kWrite, false};
    for (const char* bad : {"/tmp/anywhere", "../jobs/7/runs", "cache/../../x"}) {
        w.value = bad;
        EXPECT_EQ(refused(w), "data.cache_dir") << bad;
    }
    w.value = "my/cache";
    EXPECT_EQ(refused(w), "");
    auto cfg = llmt::config::load_config_string("data: {source: text, paths: [a.txt], cache_dir: my/cache}\n", "t");
    auto sets = job_write_overrides(cfg, "/srv/jobs/7");
    EXPECT_NE(std::find(sets.begin(), sets.end(), "data.cache_dir=/srv/jobs/7/my/cache"), sets.end());
    for (const auto& s : sets) {
        EXPECT_EQ(s.rfind("output.", 0), std::string::npos) << s;  // the server's own keys
    }
    // Shards read data.cache_dir only for the CPU precision probe's cache (trainer.precision auto or bf16):
    // then it is placed in the job's directory too, and with fp32 it is left alone.
    const std::string shards = "data: {train_shards: s/*.bin}\ntrainer: {eval_every_steps: 0, precision: ";
    auto placed = [&](const std::string& precision) {
        const auto s = job_write_overrides(llmt::config::load_config_string(shards + precision + "}\n", "t"),
                                           "/srv/jobs/7");
        return std::find(s.begin(), s.end(), "data.cache_dir=/srv/jobs/7/data/cache") != s.end();
    };
    EXPECT_TRUE(placed("auto"));
    EXPECT_TRUE(placed("bf16"));
    EXPECT_FALSE(placed("fp32"));
}

TEST_F(JobAccessTest, EndpointsMustStartWithAnAllowedOneAtABoundary) {
    PathValue e{"tracking.uri", "tracking.uri", "https://mlflow.example", Access::kEndpoint, false};
    EXPECT_EQ(refused(e), "tracking.uri");  // none allowed
    policy_.endpoints = {"https://mlflow.example"};
    EXPECT_EQ(refused(e), "");
    e.value = "https://mlflow.example/api";
    EXPECT_EQ(refused(e), "");
    e.value = "https://mlflow.example.evil.net";
    EXPECT_EQ(refused(e), "tracking.uri");
}

TEST_F(JobAccessTest, ServerSetOutputKeysAreNotTheSubmittersToPlace) {
    auto cfg = llmt::config::load_config_string(
        "data: {source: text, paths: [data/a.txt]}\noutput: {root_dir: /etc}\n", "t");
    EXPECT_NO_THROW(check_job_access(cfg, policy_));
}

// tracking.mlflow.uri is an endpoint when it is a tracking server's URL, and a write path (the file
// store's directory, placed in the job's directory) when it is a path or a file: URI.
TEST_F(JobAccessTest, TheMlflowUriIsAnEndpointOrAWritePathByItsValue) {
    auto cfg_of = [](const std::string& uri) {
        return llmt::config::load_config_string(
            "data: {source: text, paths: [data/shards/train_0.bin]}\ntracking: {mlflow: {uri: \"" + uri + "\"}}\n",
            "t");
    };
    auto mlflow_value = [](const llmt::config::Config& cfg) {
        for (const auto& v : llmt::config::path_values(cfg.resolved))
            if (v.field == "tracking.mlflow.uri") return v;
        return PathValue{};
    };
    PathValue v = mlflow_value(cfg_of("https://mlflow.example/x"));
    EXPECT_EQ(v.access, Access::kEndpoint);
    EXPECT_EQ(v.value, "https://mlflow.example/x");
    v = mlflow_value(cfg_of("file:mlruns"));
    EXPECT_EQ(v.access, Access::kWrite);
    EXPECT_EQ(v.value, "mlruns");
    EXPECT_EQ(mlflow_value(cfg_of("file:///abs/mlruns")).value, "/abs/mlruns");

    policy_.endpoints = {"https://mlflow.example"};
    auto refused_key = [&](const llmt::config::Config& cfg) -> std::string {
        try {
            check_job_access(cfg, policy_);
            return "";
        } catch (const ApiError& e) {
            return e.field();
        }
    };
    EXPECT_EQ(refused_key(cfg_of("https://mlflow.example/x")), "");
    EXPECT_EQ(refused_key(cfg_of("http://other.example")), "tracking.mlflow.uri");
    EXPECT_EQ(refused_key(cfg_of("file:///abs/mlruns")), "tracking.mlflow.uri");  // outside the job's directory
    EXPECT_EQ(refused_key(cfg_of("../mlruns")), "tracking.mlflow.uri");
    EXPECT_EQ(refused_key(cfg_of("file:mlruns")), "");
    const auto sets = job_write_overrides(cfg_of("file:mlruns"), "/srv/jobs/7");
    EXPECT_NE(std::find(sets.begin(), sets.end(), "tracking.mlflow.uri=/srv/jobs/7/mlruns"), sets.end());
    // A URL is not rewritten into the job's directory.
    for (const auto& s : job_write_overrides(cfg_of("https://mlflow.example/x"), "/srv/jobs/7"))
        EXPECT_EQ(s.rfind("tracking.mlflow.uri", 0), std::string::npos) << s;
}

// Every path- or URI-valued key is classified: this list changes only with a look at the policy.
TEST(SchemaAccess, PathValuedKeysAreClassified) {
    std::vector<std::string> read, write, endpoint;
    for (const auto& f : llmt::config::schema_fields()) {
        if (f.access == Access::kRead) read.push_back(f.path);
        if (f.access == Access::kWrite) write.push_back(f.path);
        if (f.access == Access::kEndpoint) endpoint.push_back(f.path);
        if (f.access != Access::kNone) {
            EXPECT_TRUE(f.type == llmt::config::FieldType::kString || f.type == llmt::config::FieldType::kStringList)
                << f.path;
        }
    }
    EXPECT_EQ(read, (std::vector<std::string>{"model.init_from", "lora.init_from", "data.paths", "data.tokenizer",
                                              "data.train_shards", "data.val_shards", "data.train_images",
                                              "data.train_labels", "data.test_images", "data.test_labels"}));
    EXPECT_EQ(write, (std::vector<std::string>{"data.cache_dir", "tracking.tensorboard_dir", "output.root_dir"}));
    // tracking.mlflow.uri: a tracking server's URL is an endpoint; a directory or file: URI is a write path.
    // output.sync: an s3:// bucket prefix, checked against serve --allow-endpoint s3://...
    EXPECT_EQ(endpoint, (std::vector<std::string>{"tracking.mlflow.uri", "output.sync"}));
}

TEST(SchemaAccess, PathValuesListEveryFileOfAConfigButNames) {
    auto cfg = llmt::config::load_config_string(
        "data: {source: text, paths: [a.txt, b.txt], tokenizer: gpt2}\nmodel: {init_from: scratch}\n", "t");
    std::vector<std::string> keys;
    for (const auto& v : llmt::config::path_values(cfg.resolved)) keys.push_back(v.key + "=" + v.value);
    EXPECT_EQ(keys, (std::vector<std::string>{"data.paths[0]=a.txt", "data.paths[1]=b.txt",
                                              "data.cache_dir=data/cache", "output.root_dir=runs"}));
}

// s3:// values of model.init_from and the shard globs are endpoints (the bucket is checked
// against --allow-endpoint), never read paths; output.sync always is one.
TEST(SchemaAccess, S3InputsAreEndpoints) {
    auto cfg = llmt::config::load_config_string(
        "data: {source: shards, train_shards: \"s3://b-1/d/train_*.bin\", val_shards: /data/val_*.bin}\n"
        "model: {init_from: s3://b-1/models/m}\noutput: {sync: s3://b-2/runs}\n",
        "t");
    std::map<std::string, Access> got;
    for (const auto& v : llmt::config::path_values(cfg.resolved)) got[v.key] = v.access;
    EXPECT_EQ(got["model.init_from"], Access::kEndpoint);
    EXPECT_EQ(got["data.train_shards"], Access::kEndpoint);
    EXPECT_EQ(got["data.val_shards"], Access::kRead);
    EXPECT_EQ(got["output.sync"], Access::kEndpoint);
    JobAccessPolicy p;
    p.local = true;
    p.read_roots = {"/data"};
    p.endpoints = {"s3://b-1"};
    try {
        check_job_access(cfg, p);
        FAIL() << "output.sync under s3://b-2 passed";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.field(), "output.sync") << e.what();
    }
    p.endpoints = {"s3://b-1", "s3://b-2/runs"};
    EXPECT_NO_THROW(check_job_access(cfg, p));
}

TEST(PresetRoots, AreThePresetsDataDirectories) {
    const fs::path src = LLMT_SOURCE_DIR;
    auto roots = preset_read_roots(src / "configs/presets", src);
    std::sort(roots.begin(), roots.end());
    // The GPT-2 presets read the default corpus's shards, llama3_1b.yaml its data/shards/llama3 shards;
    // llama3_tiny_cpu.yaml reads the default corpus's text (data.paths under data/corpus) and Meta's Llama 3
    // tokenizer (data.tokenizer: data/tokenizers/llama3; data/tokenizers holds only the public tokenizer
    // files scripts/setup.sh installs).
    // llama3_lora_chat.yaml reads the chat example (data/chat) and the tiny base exported into data/models.
    // The Fashion-MNIST presets read Debian's dataset-fashion-mnist (the IDX keys' defaults).
    std::vector<fs::path> expected = {fs::weakly_canonical(src / "data/chat"),
                                      fs::weakly_canonical(src / "data/corpus"),
                                      fs::weakly_canonical(src / "data/models"),
                                      fs::weakly_canonical(src / "data/shards/gpt2_corpus"),
                                      fs::weakly_canonical(src / "data/shards/llama3"),
                                      fs::weakly_canonical(src / "data/tokenizers"),
                                      fs::weakly_canonical("/usr/share/datasets/fashion-mnist")};
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(roots, expected);
}

TEST(JobEnv, JobsGetTheSafeVariablesAndTheNamedOnesOnly) {
    std::vector<std::string> vars = {"PATH=/usr/bin", "HOME=/root", "LANG=C.UTF-8", "OMP_NUM_THREADS=2",
                                     "LLMTRAIN_HOME=/opt/l", "AWS_SECRET_ACCESS_KEY=s3cr3t", "HF_TOKEN=hf_x",
                                     "MLFLOW_TRACKING_TOKEN=t", "MY_PASSWORD=p", "NCCL_DEBUG=INFO"};
    std::vector<char*> env;
    for (auto& v : vars) env.push_back(v.data());
    env.push_back(nullptr);
    EXPECT_EQ(job_environment(env.data(), {}),
              (std::vector<std::string>{"PATH=/usr/bin", "LANG=C.UTF-8", "OMP_NUM_THREADS=2", "LLMTRAIN_HOME=/opt/l",
                                        "NCCL_DEBUG=INFO"}));
    EXPECT_EQ(job_environment(env.data(), {"HF_TOKEN"}).size(), 6u);
    EXPECT_THROW(check_env_name("A=B"), llmt::UsageError);
    EXPECT_THROW(check_env_name("1X"), llmt::UsageError);
    EXPECT_NO_THROW(check_env_name("HF_TOKEN"));
}

}  // namespace

// A job whose config writes only model.init_from (a LLaMA directory): the config the server hands the job
// keeps the other model keys unwritten, so the directory's config.json supplies them there. Re-emitting every
// resolved key made arch gpt2, n_layer 12, ... "written" and the job failed on the disagreement.
TEST(JobConfig, UnwrittenModelKeysStayUnwrittenForTheJob) {
    const fs::path dir = fs::temp_directory_path() / ("llmt_job_hf_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    llmt::write_file_atomic(
        dir / "config.json",
        R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
                                "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
                                "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
                                "tie_word_embeddings": true})");
    llmt::write_file_atomic(dir / "model.safetensors", "");  // resolution needs it present; not read here
    const std::string yaml = "model: {init_from: " + dir.string() + ", block_size: 64}\n"
                             "data: {train_shards: shards/train_*.bin}\ntrainer: {eval_every_steps: 0}\n";
    PresetCache presets(fs::path(LLMT_SOURCE_DIR) / "configs/presets");
    const ParsedJob job = parse_job_request({{"name", "hf"}, {"config", yaml}}, presets);
    EXPECT_EQ(job.config_yaml.find("n_layer"), std::string::npos) << job.config_yaml;
    auto cfg = llmt::config::load_config_string(job.config_yaml, "job config");
    llmt::models::prepare_init_from(cfg);
    EXPECT_EQ(cfg.model.arch, "llama");
    EXPECT_EQ(cfg.model.n_layer, 2);
    EXPECT_EQ(cfg.model.n_kv_head, 2);
    EXPECT_EQ(cfg.model.block_size, 64);
    fs::remove_all(dir);
}
