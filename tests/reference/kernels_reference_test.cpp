// Every CPU kernel (through kernels/ops.h) against PyTorch: the rows of the kernel case table
// (tests/kernels/case_table.h) marked kTorch. This test writes each row's fp32 inputs (fresh random values; seed
// printed) and their description to a temp dir; tools/ref/kernels_ref.py computes each op and its backward there in
// float64 with torch from the same inputs (the LLaMA ops as transformers' modeling_llama.py writes them), once for
// all rows; each row then runs the CPU op and compares every output (max |ours - torch| / max |torch|).
// Tolerances: the case table's fp32 classes (1e-5 element-wise, 2e-5 reductions, 5e-5 backward passes; reasons in
// case_table.h), under the 1e-4 fp32 acceptance bound this test had: fp32 rounding (6e-8 per op; sums of <= 50k
// terms, blocked) stays near 1e-6, so a wrong index, mask, scale or formula cannot hide under them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/case_runner.h"
#include "support/unique_temp_dir.h"

namespace fs = std::filesystem;

namespace llmt::kernels::cases {
namespace {

// The torch references of every kTorch row, computed once per process in a temp dir (removed at exit).
class TorchRefs {
public:
    static TorchRefs& get() {
        static TorchRefs r;
        return r;
    }
    const std::string& dir() const { return dir_; }
    bool ok() const { return ok_; }
    TorchRefs(const TorchRefs&) = delete;
    TorchRefs& operator=(const TorchRefs&) = delete;

private:
    TorchRefs() : tmp_("llmt_kernels_ref"), dir_(tmp_.path().string()) {
        write_torch_cases(dir_);
        const std::string cmd = "/usr/bin/python3 " LLMT_SOURCE_DIR "/tools/ref/kernels_ref.py " + dir_;
        ok_ = std::system(cmd.c_str()) == 0;
    }
    llmt::testing::UniqueTempDir tmp_;  // removed at exit
    std::string dir_;
    bool ok_ = false;
};

// One test (one ctest process): the torch script runs once for all rows (importing torch costs seconds); each row's
// lines and failures name it.
TEST(CaseTable, CpuVsTorch) {
    const TorchRefs& r = TorchRefs::get();
    ASSERT_TRUE(r.ok()) << "tools/ref/kernels_ref.py failed (needs /usr/bin/python3 with torch)";
    for (size_t i : rows_of(kTorch)) {
        SCOPED_TRACE(test_name(i));
        check_row(i, kTorch, r.dir());
    }
}

}  // namespace
}  // namespace llmt::kernels::cases
