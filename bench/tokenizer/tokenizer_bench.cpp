// Times our encoder (GPT-2, Llama 3: any --tokenizer SPEC) on a text file: load time, then encode MB/s
// on 1 thread (encode_ordinary) and on N threads (encode_parallel), best of --repeat runs. Prints one JSON object per
// line for run.sh. Usage: tokenizer_bench CORPUS [--tokenizer SPEC] [--threads 1,2] [--repeat 5]
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/fs.h"
#include "data/tokenizer/tokenizer.h"

namespace {
double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// CPU seconds of the whole process (all threads): less sensitive than wall time to other load.
double cpu_s() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s CORPUS [--tokenizer SPEC] [--threads 1,2] [--repeat 5]\n", argv[0]);
        return 2;
    }
    std::string corpus = argv[1], spec = "gpt2", threads_arg = "1,2";
    int repeat = 5;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--tokenizer")) spec = argv[i + 1];
        else if (!std::strcmp(argv[i], "--threads")) threads_arg = argv[i + 1];
        else if (!std::strcmp(argv[i], "--repeat")) repeat = std::stoi(argv[i + 1]);
    }
    try {
        const std::string text = llmt::read_file(corpus);
        double t0 = now_s();
        const auto tok = llmt::data::Tokenizer::load(spec);
        std::printf("{\"what\": \"load\", \"seconds\": %.4f}\n", now_s() - t0);
        std::vector<int> threads;
        for (std::size_t p = 0; p < threads_arg.size();) {
            std::size_t c = threads_arg.find(',', p);
            if (c == std::string::npos) c = threads_arg.size();
            threads.push_back(std::stoi(threads_arg.substr(p, c - p)));
            p = c + 1;
        }
        for (int t : threads) {
            double best = 1e30, best_cpu = 1e30;
            std::size_t ntok = 0;
            for (int r = 0; r < repeat; ++r) {
                // Each run starts with cold word caches on fresh threads (encode_parallel) or, for 1 thread,
                // with this thread's cache warm from the previous run, as a long-running encoder's would be.
                t0 = now_s();
                const double c0 = cpu_s();
                const auto ids = t == 1 ? tok.encode_ordinary(text) : llmt::data::encode_parallel(tok, text, false, t);
                best = std::min(best, now_s() - t0);
                best_cpu = std::min(best_cpu, cpu_s() - c0);
                ntok = ids.size();
            }
            std::printf(
                "{\"what\": \"llmtrain\", \"threads\": %d, \"mb_per_s\": %.2f, \"mb_per_cpu_s\": %.2f, \"tokens\": "
                "%zu, \"bytes\": %zu}\n",
                t, text.size() / best / 1e6, text.size() / best_cpu / 1e6, ntok, text.size());
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tokenizer_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
