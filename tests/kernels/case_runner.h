// Runs the rows of the kernel case table (case_table.h) on a backend and compares the results: the inputs of a row,
// its CPU, CUDA and float64 runs, the comparisons with gtest expectations, and the --perf timings.
#pragma once

#include <string>
#include <vector>

#include "kernels/case_table.h"

namespace llmt::kernels::cases {

// The seed of this process's inputs (LLMT_TEST_SEED, else random), printed once with `tag`.
uint32_t base_seed(const char* tag);
// "encoder B=3 T=37 C=96 V=101 maxT=64 [LLMTRAIN_X=1]": what a printed line or failure names.
std::string describe(const Case& c);
// The gtest name of row `index` (op and index: letters, digits and '_').
std::string test_name(size_t index);
// The indices of the rows that run in `mode` (the gtest parameters of each comparison).
std::vector<size_t> rows_of(unsigned mode);

// Runs row `index` in one mode (kF64, kCuda, kBf16, or kTorch with the references in `torch_dir`) and checks it
// (gtest expectations).
void check_row(size_t index, Modes mode, const std::string& torch_dir = "");

// For kTorch: writes the inputs of every kTorch row to `dir` as raw arrays (<row>_<name>.bin: float32 or int32) and
// their description to dir/cases.json (row, op, dims, params, tensors), which tools/ref/kernels_ref.py reads; it
// writes dir/<row>_<name>.ref.bin (float64) for each compared output.
void write_torch_cases(const std::string& dir);

// --perf: times every row of the given modes (kF64 rows time the CPU fp32 op; kCuda and kBf16 the CUDA ones) and
// prints one line each (median of repeated runs); with `op`, only that op's rows. Returns the process exit code.
int perf_main(unsigned modes, const std::string& op = "");

// main() of both case-table binaries: `--perf [OP]` times, anything else runs the gtest cases.
int case_table_main(int argc, char** argv, unsigned perf_modes);

}  // namespace llmt::kernels::cases
