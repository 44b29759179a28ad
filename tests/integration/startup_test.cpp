// Start-up footprint (docs/architecture.md, "Start-up"): the vendor libraries only one code path needs are
// loaded on first use. `version` and `--help` load none of them; a CPU training run loads the CPU GEMM
// library it uses and never cuBLASLt, NCCL or cuDNN, both seen through the loader's own log
// (LD_DEBUG=files names every object it opens, dlopen'ed ones too) and, in this process, /proc/self/maps
// after CPU ops ran.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/fs.h"
#include "kernels/ops.h"
#include "support/subprocess.h"
#include "support/train_fixture.h"

namespace {

namespace fs = std::filesystem;
using llmt::testing::llmtrain_bin;
using llmt::testing::ProcResult;
using llmt::testing::run_process;

const std::vector<std::string> kGpuLibraries = {"libcublasLt", "libcublas.", "libnccl", "libcudnn", "libcuda."};
const std::vector<std::string> kGemmLibraries = {"libdnnl", "libopenblas"};

// The objects the dynamic loader opened, from LD_DEBUG=files output ("file=libX.so.N [0];  ...").
std::string loaded_objects(const std::string& ld_debug) {
    std::string files;
    std::istringstream in(ld_debug);
    for (std::string line; std::getline(in, line);)
        if (const size_t at = line.find("file="); at != std::string::npos) files += line.substr(at) + "\n";
    return files;
}

void expect_none_of(const std::string& objects, const std::vector<std::string>& libs, const std::string& what) {
    for (const std::string& lib : libs)
        EXPECT_EQ(objects.find(lib), std::string::npos) << what << " loaded " << lib << ":\n" << objects;
}

ProcResult run_traced(std::vector<std::string> args) {
    args.insert(args.begin(), llmtrain_bin());
    return run_process(args, "", 300, {"LD_DEBUG=files"});
}

TEST(Startup, VersionAndHelpLoadNoVendorLibrary) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"version"}, {"version", "--json"}, {"--help"}}) {
        const ProcResult r = run_traced(args);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const std::string objects = loaded_objects(r.err);
        ASSERT_FALSE(objects.empty()) << "LD_DEBUG=files printed nothing: " << r.err.substr(0, 500);
        expect_none_of(objects, kGpuLibraries, args[0]);
        expect_none_of(objects, kGemmLibraries, args[0]);
    }
}

// A few CPU training steps: the GEMM library in use is loaded (lazily, and it works), no GPU library is.
TEST(Startup, CpuTrainingLoadsNoGpuLibrary) {
    const fs::path root = fs::temp_directory_path() / ("llmt_startup_" + std::to_string(::getpid()));
    fs::create_directories(root);
    const ProcResult prep = llmt::testing::prepare_synthetic_shards(root);
    ASSERT_EQ(prep.exit_code, 0) << prep.err;
    std::ofstream(root / "tiny.yaml") << R"(run: {name: t, seed: 7, device: cpu, threads: 1}
model: {n_layer: 1, n_head: 2, d_model: 32, block_size: 32, vocab_pad_multiple: 64}
trainer: {max_steps: 2, micro_batch_size: 2, lr: 1.0e-3, warmup_steps: 1, log_every_steps: 1, eval_every_steps: 0,
          save_every_steps: 0}
)" << "data: {train_shards: " << (root / "shards/train_*.bin").string()
                                    << ", val_shards: " << (root / "shards/val_*.bin").string() << "}\n";
    const ProcResult r = run_traced({"train", "--config", (root / "tiny.yaml").string(), "--set",
                                     "output.root_dir=" + (root / "runs").string()});
    fs::remove_all(root);
    ASSERT_EQ(r.exit_code, 0) << r.err.substr(r.err.size() > 4000 ? r.err.size() - 4000 : 0);
    const std::string objects = loaded_objects(r.err);
    expect_none_of(objects, kGpuLibraries, "CPU training");
    const std::string gemm = llmt::kernels::gemm_backend_name();  // the default, as in the child
    EXPECT_NE(objects.find(gemm == "onednn" ? "libdnnl" : "libopenblas"), std::string::npos)
        << "the " << gemm << " library was not loaded by a run that needs it:\n" << objects;
}

// The same in this process: CPU ops through ops.h, then /proc/self/maps.
TEST(Startup, CpuOpsMapNoGpuLibrary) {
    std::vector<float> x(4 * 8, 0.5f), w(3 * 8, 0.25f), b(3, 1.0f), out(4 * 3);
    using llmt::Tensor;
    llmt::kernels::matmul_forward(Tensor(out.data(), {4, 3}), Tensor(x.data(), {4, 8}), Tensor(w.data(), {3, 8}),
                                  Tensor(b.data(), {3}));
    EXPECT_FLOAT_EQ(out[0], 2.0f);  // 8 * 0.5 * 0.25 + 1
    const std::string maps = llmt::read_file("/proc/self/maps");
    for (const std::string& lib : kGpuLibraries)
        EXPECT_EQ(maps.find(lib), std::string::npos) << "CPU ops mapped " << lib;
}

}  // namespace
