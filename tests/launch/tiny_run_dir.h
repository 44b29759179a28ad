// The launch tests' run directory: shards of a counting corpus (12 sentences "The count goes i then i+1."
// a document, 200 documents) prepared by the real `llmtrain data prepare`, and tiny.yaml, a 2-layer GPT-2
// run of max_steps steps on them, deterministic on one thread, checkpointing every 2 steps.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/fs.h"
#include "support/subprocess.h"

namespace llmt::testing {

// Writes root/corpus.txt, root/shards/{train,val}_*.bin and root/tiny.yaml (runs under root/runs).
inline void make_tiny_run_dir(const std::filesystem::path& root, int max_steps) {
    std::string corpus;
    for (int d = 0; d < 200; ++d) {
        for (int i = 0; i < 12; ++i)
            corpus += "The count goes " + std::to_string(i) + " then " + std::to_string(i + 1) + ".\n";
        corpus += "\n";
    }
    write_file_atomic(root / "corpus.txt", corpus);
    auto r = run_process({llmtrain_bin(), "data", "prepare", "--input", (root / "corpus.txt").string(), "--format",
                          "text", "--out", (root / "shards").string(), "--val-fraction", "0.1"},
                         "", 300);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ofstream(root / "tiny.yaml")
        << "run: {name: t, seed: 7, device: cpu, threads: 1, deterministic: true}\n"
           "model: {n_layer: 2, n_head: 2, d_model: 32, block_size: 32, vocab_pad_multiple: 64}\n"
           "trainer: {max_steps: "
        << max_steps
        << ", micro_batch_size: 4, grad_accum_steps: 1, lr: 3.0e-3, min_lr: 3.0e-4, "
           "warmup_steps: 2, log_every_steps: 1, eval_every_steps: 0, save_every_steps: 2, keep_last: 2}\n"
        << "data: {train_shards: " << (root / "shards/train_*.bin").string()
        << ", val_shards: " << (root / "shards/val_*.bin").string() << "}\n"
        << "output: {root_dir: " << (root / "runs").string() << "}\n";
}

}  // namespace llmt::testing
