// The optimizer updates of the case table (case_table.h): AdamW (one buffer, and runs of one buffer in one launch) and
// SGD over runs. fp32 master state on every backend; the CUDA runs also write the bf16 compute copy in the same pass,
// checked against the rounded master weights (gpu_check). No float64 reference here: tests/reference compares the CPU
// updates with torch.optim.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/bf16.h"
#include "kernels/case_args.h"
#include "kernels/ops.h"

namespace llmt::kernels::cases {
namespace {

// The compute copy (bf16) is the rounded master weights inside every run; with `gaps_untouched`, the poison (NaN)
// stays between runs.
void expect_copy_rounds_master(const Values& gpu, const std::vector<AdamWRun>& runs, bool gaps_untouched) {
    const auto& p = gpu.f.at("params");
    const auto& lp = gpu.f.at("params_lp");
    size_t inside = 0, n_inside = 0, gaps = 0, gaps_nan = 0;
    size_t r = 0;
    for (int64_t i = 0; i < static_cast<int64_t>(p.size()); i++) {
        while (r < runs.size() && runs[r].end <= i) r++;
        if (r < runs.size() && runs[r].begin <= i) {
            n_inside++;
            const float want = float_from_bf16(bf16_from_float(p[static_cast<size_t>(i)]));
            inside += std::memcmp(&lp[static_cast<size_t>(i)], &want, sizeof(float)) == 0;
        } else {
            gaps++;
            gaps_nan += std::isnan(lp[static_cast<size_t>(i)]);
        }
    }
    EXPECT_EQ(inside, n_inside) << "the bf16 copy is the rounded master weights in every run";
    if (gaps_untouched) {
        EXPECT_EQ(gaps_nan, gaps) << "elements between runs are not written";
    }
}

AdamWParams adamw_hp() {
    AdamWParams hp;
    hp.lr = 1e-3f;
    hp.beta2 = 0.95f;
    hp.weight_decay = 0.1f;
    hp.grad_scale = 0.7f;
    hp.step = 3;
    return hp;
}

void square(std::vector<float>& v) {
    for (auto& x : v) x = x * x;  // second moments are non-negative
}

// The update (about lr = 1e-3 in size) is compared on its own too: fp32 cancellation in p - p0 costs
// ~2.4e-7 / 1e-3 relative (|p| <= ~4) => 1e-3.
std::vector<Arg> adamw_args(int64_t N) {
    Arg p = inout("params", {N}, {kTolElementwise, kTolF32}, Kind::kF32);
    p.delta_tol = 1e-3;
    Arg v = inout("v", {N}, {kTolElementwise, kTolF32}, Kind::kF32, 0.1f);
    v.shape_values = square;
    return {p,
            inout("m", {N}, {kTolElementwise, kTolF32}, Kind::kF32, 0.1f), v, input("grads", {N}, 1.0f, Kind::kF32),
            output("params_lp", {N}, {}, Kind::kBF16)};
}

// d.reps steps from hp.step on (the same gradients each step).
Call adamw(const Case& c) {
    const int N = c.d.N, reps = c.d.reps;
    Call k;
    k.args = adamw_args(N);
    const AdamWParams p = adamw_hp();
    k.params = {{"lr", p.lr},           {"beta1", p.beta1},           {"beta2", p.beta2},
                {"eps", p.eps},         {"weight_decay", p.weight_decay}, {"grad_scale", p.grad_scale},
                {"step", double(p.step)}};
    k.stages = {[=](Run& r) {
        AdamWParams hp = adamw_hp();
        for (int s = 0; s < reps; s++, hp.step++)
            adamw_update(r["params"], r["m"], r["v"], r["grads"], hp, r["params_lp"]);
    }};
    k.gpu_check = [N](const Values&, const Values& gpu) { expect_copy_rounds_master(gpu, {{0, N, true}}, false); };
    return k;
}

// 300 runs of odd lengths (starting and ending inside 16-byte groups), a gap after some, decay on every other.
std::vector<AdamWRun> odd_runs() {
    std::vector<AdamWRun> runs;
    int64_t at = 0;
    for (int r = 0; r < 300; r++) {
        const int64_t len = 1 + (r * 37) % 61;
        runs.push_back({at, at + len, r % 2 == 0});
        at += len + (r % 7 == 3 ? 5 : 0);
    }
    return runs;
}

Call adamw_runs(const Case&) {
    const std::vector<AdamWRun> runs = odd_runs();
    const int64_t N = runs.back().end + 3;
    Call k;
    k.args = adamw_args(N);
    k.stages = {[=](Run& r) {
        AdamWParams hp = adamw_hp();
        hp.lr = 1e-2f;
        hp.weight_decay = 0.5f;
        adamw_update_runs(r["params"], r["m"], r["v"], r["grads"], hp, runs, r["params_lp"]);
    }};
    k.gpu_check = [runs](const Values&, const Values& gpu) { expect_copy_rounds_master(gpu, runs, true); };
    return k;
}

// sgd_update_runs over three runs with a gap, d.reps steps (the first sets the buffer): the row's variant picks
// momentum, Nesterov, dampening or plain SGD (no buffer).
Call sgd(const Case& c) {
    const int N = c.d.N, reps = c.d.reps;
    const std::vector<AdamWRun> runs = {{0, 30000, true}, {30000, 30011, false}, {30020, N, true}};
    const std::string v = c.variant;
    SgdParams hp;
    hp.lr = 0.05f;
    hp.momentum = v == "plain" ? 0.0f : v == "dampening" ? 0.8f : 0.9f;
    hp.dampening = v == "dampening" ? 0.3f : 0.0f;
    hp.nesterov = v == "nesterov";
    hp.weight_decay = 0.1f;
    hp.grad_scale = 0.7f;
    const bool has_buf = hp.momentum != 0.0f;
    Call k;
    k.args = {inout("params", {N}, {kTolElementwise, kTolF32}, Kind::kF32),
              table("buf", {N}, std::vector<float>(static_cast<size_t>(N), 0.0f)),
              input("grads", {N}, 1.0f, Kind::kF32), output("params_lp", {N}, {}, Kind::kBF16)};
    if (has_buf) {
        k.args[1].role = Role::kInOut;
        k.args[1].tol = {kTolElementwise, kTolF32};
    }
    k.stages = {[=](Run& r) mutable {
        for (int s = 0; s < reps; s++) {
            hp.first_step = s == 0;
            sgd_update_runs(r["params"], has_buf ? r["buf"] : Tensor(), r["grads"], hp, runs, r["params_lp"]);
        }
    }};
    k.gpu_check = [runs](const Values& in, const Values& gpu) {
        expect_copy_rounds_master(gpu, runs, false);
        const auto &p = gpu.f.at("params"), &p0 = in.f.at("params");
        for (size_t i = 30011; i < 30020; i++) EXPECT_EQ(p[i], p0[i]) << "gap element " << i << " was written";
    };
    return k;
}

}  // namespace

void add_update_ops(std::vector<OpDef>& defs) {
    defs.insert(defs.end(), {
                                {"adamw", adamw},
                                {"adamw_runs", adamw_runs},
                                {"sgd", sgd},
                            });
}

}  // namespace llmt::kernels::cases
