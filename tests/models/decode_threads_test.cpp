// The decoders' CPU thread policy (kernels::CpuThreadsForWork): a decode step of a small model runs on
// the calling thread only, with no OpenMP worker woken for its one-row ops (on shared cores each such fork waits
// for a descheduled thread), while a prefill wide enough to pay for a second thread still gets one. Observed as
// the threads the process has: libgomp starts its workers at the first parallel region that asks for them and
// keeps them, so each case runs in a fresh process (a "threadsafe" death test re-executes this binary) and counts
// /proc/self/task after decoding. No timing is measured.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <span>
#include <vector>

#include "models/gpt2.h"
#include "models/llama.h"
#include "small_configs.h"
#include "models/model.h"

namespace {

using llmt::models::Gpt2;
using llmt::models::Gpt2Config;
using llmt::models::Llama;
using llmt::models::LlamaConfig;

int process_threads() {
    const std::filesystem::directory_iterator it("/proc/self/task");
    return static_cast<int>(std::distance(begin(it), end(it)));
}

// d_model 256, d_ff 1024 (GPT-2 tiny's layer): the MLP's up projection is 0.5 MFLOP a row, far below the
// 8 MFLOP a thread (kernels/cpu/threads.h); a 64-position prefill is 34 MFLOP, enough for 2 threads. The
// vocabulary is small, so the LM head (outside the layers' scope, its own rule) stays on one thread too.
Gpt2Config gpt2_layer_of_tiny() {
    Gpt2Config c = llmt::models::test::small_gpt2(80);
    c.d_model = 256;
    c.d_ff = 1024;
    c.tie_embeddings = true;
    return c;
}

LlamaConfig llama_layer_of_tiny() {
    LlamaConfig c = llmt::models::test::small_llama(80);
    c.d_model = 256;
    c.d_ff = 512;  // gate_up: 2 x 512 columns, the same 0.5 MFLOP a row
    c.tie_embeddings = true;
    c.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 4};
    return c;
}

// In the fresh process: two OpenMP threads allowed for the decoding; a 1-token prefill and 8 decode steps, then the
// thread count; then a 64-token prefill, then the count again. Prints both for the parent's regex.
template <class M, class Config>
void decode_then_count(const Config& cfg) {
    omp_set_num_threads(1);  // building and initialising the model starts no worker either
    M model(cfg);
    model.init_random(3);
    auto dec = model.decoder();
    omp_set_num_threads(2);
    const std::vector<int32_t> prompt(64, 7);
    dec->prefill(std::span<const int32_t>(prompt.data(), 1));
    for (int i = 0; i < 8; ++i) dec->step(i + 1);
    const int after_decode = process_threads();
    dec->prefill(prompt);
    std::fprintf(stderr, "after decode %d, after a 64-token prefill %d\n", after_decode, process_threads());
    std::exit(0);
}

class DecodeThreads : public ::testing::Test {
protected:
    void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(DecodeThreads, Gpt2DecodeStepsStartNoWorkerAWidePrefillDoes) {
    EXPECT_EXIT(decode_then_count<Gpt2>(gpt2_layer_of_tiny()), ::testing::ExitedWithCode(0),
                "after decode 1, after a 64-token prefill 2");
}

TEST_F(DecodeThreads, LlamaDecodeStepsStartNoWorkerAWidePrefillDoes) {
    EXPECT_EXIT(decode_then_count<Llama>(llama_layer_of_tiny()), ::testing::ExitedWithCode(0),
                "after decode 1, after a 64-token prefill 2");
}

}  // namespace
