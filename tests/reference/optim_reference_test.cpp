// src/optim against PyTorch (tools/ref/adamw_ref.py): AdamW steps vs torch.optim.AdamW with the same
// decay grouping (two param groups), also when the arena is split into ZeRO-1 slices; LR schedules vs
// torch's LambdaLR; global-norm clipping vs torch.nn.utils.clip_grad_norm_.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>

#include "core/safetensors.h"
#include "optim/adamw.h"
#include "optim/grad_clip.h"
#include "optim/lr_schedule.h"

namespace fs = std::filesystem;
using namespace llmt;
using namespace llmt::optim;

namespace {

struct Param {
    const char* name;
    Shape shape;
    bool decay;
};
const std::vector<Param> kParams = {
    {"transformer.wte.weight", {50, 16}, false},
    {"transformer.h.0.ln_1.weight", {16}, false},
    {"transformer.h.0.ln_1.bias", {16}, false},
    {"transformer.h.0.attn.c_attn.weight", {16, 48}, true},
    {"transformer.h.0.attn.c_attn.bias", {48}, false},
    {"transformer.h.0.mlp.c_fc.weight", {16, 64}, true},
};

std::size_t numel(const Shape& s) {
    std::size_t n = 1;
    for (auto d : s) n *= static_cast<std::size_t>(d);
    return n;
}

const SafetensorsFile& ref() {
    static std::unique_ptr<SafetensorsFile> f = [] {
        fs::path out = fs::temp_directory_path() / fmt::format("llmt_adamw_ref_{}.safetensors", ::getpid());
        std::string cmd = "/usr/bin/python3 " LLMT_SOURCE_DIR "/tools/ref/adamw_ref.py " + out.string();
        if (std::system(cmd.c_str()) != 0) {
            ADD_FAILURE() << cmd << " failed (python3-torch is installed by scripts/setup.sh)";
            return std::unique_ptr<SafetensorsFile>();
        }
        auto p = std::make_unique<SafetensorsFile>(SafetensorsFile::open(out));
        fs::remove(out);  // the mapping stays valid
        return p;
    }();
    if (!f) throw std::runtime_error("reference file unavailable");
    return *f;
}

double meta(const std::string& key) { return std::stod(ref().metadata().at(key)); }

// The parameter layout of the arena: params back to back, with a 5-element gap after the second (padding the optimizer
// must leave alone).
struct ParamLayout {
    std::vector<ParamSlot> slots;
    std::size_t numel = 0;
    ParamLayout() {
        for (std::size_t i = 0; i < kParams.size(); ++i) {
            slots.push_back({kParams[i].name, kParams[i].shape, numel, kParams[i].decay});
            numel += ::numel(kParams[i].shape) + (i == 1 ? 5 : 0);
        }
    }
    // Fills the arena from tensors "<prefix><name>"; gaps get `fill`.
    std::vector<float> load(const std::string& prefix, float fill = 0.0f) const {
        std::vector<float> a(numel, fill);
        for (const auto& s : slots) ref().read_f32(prefix + s.name, a.data() + s.offset, s.shape);
        return a;
    }
};

// max |ours - ref| / max |ref| over one tensor: a norm-wise relative error, which stays meaningful
// for elements of m that are near zero.
double rel_err(const float* ours, const float* theirs, std::size_t n) {
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < n; ++i) {
        diff = std::max(diff, std::fabs(static_cast<double>(ours[i]) - theirs[i]));
        scale = std::max(scale, std::fabs(static_cast<double>(theirs[i])));
    }
    return scale == 0 ? diff : diff / scale;
}

// Our AdamW does the same fp32 operations as torch's _single_tensor_adamw, in the same order, with
// three rounding differences: torch forms (1 - beta) in double from the Python float (0.1 -> 0.1f)
// where the kernel gets fp32 betas (1 - 0.9f = 0.100000024f), a 2.4e-7 relative difference in the
// weight of each new gradient in m and v that does not grow with steps; torch divides by
// sqrt(bias_correction2) where we multiply by its inverse; lr is fp32 here, double there (<= 1 ulp,
// 6e-8, each). Measured: params 7e-8, m/v 3.5e-7. 1e-6 covers that and still catches real errors: a
// parameter put in the wrong decay group shows 5e-4 after one step, a wrong bias correction more.
constexpr double kTol = 1e-6;

void run_and_compare(const std::vector<ArenaSlice>& slices) {
    ParamLayout ar;
    AdamWConfig cfg;
    cfg.beta1 = static_cast<float>(meta("beta1"));
    cfg.beta2 = static_cast<float>(meta("beta2"));
    cfg.eps = static_cast<float>(meta("eps"));
    cfg.weight_decay = static_cast<float>(meta("weight_decay"));
    const int steps = static_cast<int>(meta("steps"));
    std::vector<double> lrs(static_cast<std::size_t>(steps));
    ref().read_exact("lr", StDType::kF64, {steps}, lrs.data());

    std::vector<AdamW> opts;
    for (auto sl : slices) opts.emplace_back(ar.slots, ar.numel, cfg, sl);
    const float kGapFill = 12345.0f;
    std::vector<float> params = ar.load("p0.", kGapFill);
    for (int k = 0; k < steps; ++k) {
        std::vector<float> grads = ar.load(fmt::format("g{}.", k), 1.0f);
        for (auto& o : opts) o.step(params.data(), grads.data(), static_cast<float>(lrs[static_cast<std::size_t>(k)]));
        if (k == 0 || k == steps - 1) {
            std::vector<float> want = ar.load(k == 0 ? "p1." : "pN.", kGapFill);
            for (const auto& s : ar.slots) {
                double e = rel_err(params.data() + s.offset, want.data() + s.offset, numel(s.shape));
                EXPECT_LT(e, kTol) << "params after step " << k + 1 << ": " << s.name;
            }
            EXPECT_EQ(params, params);  // (no NaN in the arena)
        }
    }
    // Gap elements were never touched.
    const auto& gap_after = ar.slots[1];
    for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(params[gap_after.offset + 16 + i], kGapFill);

    // State after `steps` steps: gather each slot's exp_avg / exp_avg_sq from the slices' exports.
    std::vector<float> m(ar.numel, 0.f), v(ar.numel, 0.f);
    for (const auto& o : opts) {
        EXPECT_EQ(o.step_count(), steps);
        auto specs = o.state_specs();
        auto refs = o.state_tensors();
        for (std::size_t i = 0; i + 1 < refs.size(); i += 2) {
            std::string name = refs[i].name.substr(0, refs[i].name.size() - std::string(".exp_avg").size());
            auto it =
                std::find_if(ar.slots.begin(), ar.slots.end(), [&](const ParamSlot& s) { return s.name == name; });
            ASSERT_NE(it, ar.slots.end()) << refs[i].name;
            std::size_t start = std::max(it->offset, o.begin());
            std::size_t n = numel(refs[i].shape);
            std::copy_n(static_cast<const float*>(refs[i].data), n, m.data() + start);
            std::copy_n(static_cast<const float*>(refs[i + 1].data), n, v.data() + start);
        }
    }
    std::vector<float> want_m = ar.load("m."), want_v = ar.load("v.");
    for (const auto& s : ar.slots) {
        EXPECT_LT(rel_err(m.data() + s.offset, want_m.data() + s.offset, numel(s.shape)), kTol)
            << "exp_avg " << s.name;
        EXPECT_LT(rel_err(v.data() + s.offset, want_v.data() + s.offset, numel(s.shape)), kTol)
            << "exp_avg_sq " << s.name;
    }
}

}  // namespace

TEST(OptimReference, AdamWMatchesTorchWithTwoParamGroups) { run_and_compare({ArenaSlice{}}); }

TEST(OptimReference, AdamWZero1SlicesMatchTorch) {
    // Three shards whose boundaries cut through the embedding and the attention weight, as ZeRO-1's
    // equal split of the flat arena does.
    ParamLayout ar;
    std::size_t a = 123, b = ar.slots[3].offset + 100;
    run_and_compare({ArenaSlice{0, a}, ArenaSlice{a, b}, ArenaSlice{b, SIZE_MAX}});
}

TEST(OptimReference, ClipGradNormMatchesTorch) {
    ParamLayout ar;
    std::vector<float> g = ar.load("clip.in.");
    double torch_norm = 0;
    ref().read_exact("clip.norm", StDType::kF64, {}, &torch_norm);
    double norm = clip_grad_norm(g.data(), g.size(), meta("clip_max"));
    // torch sums squares in fp32 per tensor, then takes the norm of the norms in fp32: its result
    // carries ~1e-7 relative rounding; ours is fp64. 1e-6 bounds the difference.
    EXPECT_NEAR(norm, torch_norm, 1e-6 * torch_norm);
    EXPECT_GT(norm, 10.0);  // the case must actually clip
    std::vector<float> want = ar.load("clip.out.");
    for (const auto& s : ar.slots) {
        // Scaled grads differ by the coefficient's relative difference (the norms' above) plus 1 ulp.
        EXPECT_LT(rel_err(g.data() + s.offset, want.data() + s.offset, numel(s.shape)), 1e-6) << s.name;
    }
    double after = std::sqrt(grad_sum_squares(g.data(), g.size()));
    EXPECT_NEAR(after, meta("clip_max"), 1e-5);
}

TEST(OptimReference, SchedulesMatchTorchLambdaLR) {
    for (const char* kind : {"cosine", "linear", "constant"}) {
        for (int w : {0, 10, 100, 150}) {
            LrSchedule s;
            s.kind = parse_schedule_kind(kind);
            s.lr = 6e-4;
            s.min_lr = 6e-5;
            s.warmup_steps = w;
            s.max_steps = 100;
            std::vector<double> want(101);
            ref().read_exact(fmt::format("sched.{}.w{}", kind, w), StDType::kF64, {101}, want.data());
            for (int step = 0; step <= 100; ++step) {
                // LambdaLR computes base_lr * (value / base_lr) in double: equal to ours up to a few ulps.
                EXPECT_NEAR(s.at(step), want[static_cast<std::size_t>(step)], 1e-12 * 6e-4)
                    << kind << " warmup " << w << " step " << step;
            }
        }
    }
}
