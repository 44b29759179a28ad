// The runs of a case-table row (case_runner.h): inputs, the CPU, CUDA and float64 runs, comparisons, timings.
#include "kernels/case_runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <string_view>

#include "core/arena.h"
#include "core/bf16.h"
#include "kernels/device_floats.h"
#include "kernels/ops.h"
#include "kernels/test_util.h"

namespace llmt::kernels::cases {

Tensor Run::operator[](const std::string& name) const {
    const auto it = t_.find(name);
    if (it == t_.end()) throw std::invalid_argument("case table: the op reads a tensor it did not declare: " + name);
    return it->second;
}

void Run::round_as_stored(const std::string& name) {
    if (cuda_ || !bf16_) return;
    const Tensor t = (*this)[name];
    float* p = t.ptr<float>();
    for (int64_t i = 0; i < t.numel(); i++) p[i] = float_from_bf16(bf16_from_float(p[i]));
}

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

size_t numel(const Arg& a) {
    size_t n = 1;
    for (int64_t d : a.shape) n *= static_cast<size_t>(d);
    return n;
}

Tensor with_shape(void* data, const Arg& a, DType dt, Device dev) {
    Tensor t;
    t.data = data;
    t.dtype = dt;
    t.device = dev;
    for (int64_t d : a.shape) t.shape[static_cast<size_t>(t.ndim++)] = d;
    return t;
}

DType dtype_of(Kind k, bool bf16) {
    switch (k) {
        case Kind::kAct:
            return bf16 ? DType::kBF16 : DType::kF32;
        case Kind::kF32:
            return DType::kF32;
        case Kind::kBF16:
            return DType::kBF16;
        case Kind::kI32:
            return DType::kI32;
    }
    return DType::kF32;
}

float rounded(float x) {
    return float_from_bf16(bf16_from_float(x));
}

bool compared(const Arg& a) {
    return a.role != Role::kIn && a.kind != Kind::kI32;
}

// Random inputs of one row (fixed values where the op gives them); bf16 runs round kAct tensors first, so the CPU
// reference and the GPU see the same values.
Values make_inputs(const Call& k, uint32_t seed, bool bf16) {
    Values in;
    uint32_t s = seed;
    for (const Arg& a : k.args) {
        s = s * 31u + 17u;
        if (a.kind == Kind::kI32) {
            std::vector<int32_t> v = a.ids.empty() ? test::randint(numel(a), a.hi, s) : a.ids;
            if (a.shape_ids) a.shape_ids(v);
            in.i[a.name] = std::move(v);
            continue;
        }
        if (a.role == Role::kOut) continue;
        std::vector<float> v = a.values.empty() ? test::randn(numel(a), s, a.scale) : a.values;
        if (a.shape_values) a.shape_values(v);
        if (bf16 && a.kind == Kind::kAct)
            for (auto& x : v) x = rounded(x);
        in.f[a.name] = std::move(v);
    }
    return in;
}

// The knobs of a row, set for the lifetime of the object.
class Knobs {
public:
    explicit Knobs(const Case& c) {
        for (const auto& [knob, value] : c.knobs) set_.push_back(std::make_unique<ScopedKnob>(knob, value));
    }

private:
    std::vector<std::unique_ptr<ScopedKnob>> set_;
};

// Host buffers of a CPU run: inputs copied, outputs NaN (a kBF16 tensor is absent: an empty Tensor).
struct HostCall {
    Values v;
    std::map<std::string, Tensor> tensors;
    HostCall(const Call& k, const Values& in) : v(in) {
        for (const Arg& a : k.args) {
            if (a.kind == Kind::kBF16) {
                tensors[a.name] = Tensor();
            } else if (a.kind == Kind::kI32) {
                tensors[a.name] = with_shape(v.i.at(a.name).data(), a, DType::kI32, Device::kCpu);
            } else {
                if (a.role == Role::kOut) v.f[a.name].assign(numel(a), kNaN);
                tensors[a.name] = with_shape(v.f.at(a.name).data(), a, DType::kF32, Device::kCpu);
            }
        }
    }
};

// The CPU fp32 run. `gpu`: a bf16 run's CUDA results, which the stages after the first read for the op's handoff
// tensors (the CPU's own values of those are what is compared).
Values run_cpu(const Call& k, const Values& in, bool bf16, uint64_t seed, const Values* gpu) {
    HostCall h(k, in);
    Run r(h.tensors, false, bf16, seed);
    std::map<std::string, std::vector<float>> own;
    for (size_t s = 0; s < k.stages.size(); s++) {
        if (s == 1 && gpu)
            for (const std::string& n : k.handoff) {
                own[n] = h.v.f.at(n);
                std::copy(gpu->f.at(n).begin(), gpu->f.at(n).end(), h.v.f.at(n).begin());
            }
        k.stages[s](r);
    }
    for (auto& [n, v] : own) h.v.f[n] = v;
    h.v.scalars = r.scalars();
    return h.v;
}

// Device buffers of a CUDA run: one arena, inputs uploaded, outputs (and compute copies) NaN.
class DeviceCall {
public:
    DeviceCall(const Call& k, const Values& in, bool bf16) : k_(k), bf16_(bf16) {
        for (const Arg& a : k.args) arena_.add(a.name, a.shape, dtype_of(a.kind, bf16));
        arena_.allocate(false, Device::kCuda);
        for (const Arg& a : k.args) {
            if (a.kind == Kind::kI32)
                upload_ids(a.name, in.i.at(a.name));
            else if (a.role == Role::kOut)
                upload(a.name, std::vector<float>(numel(a), kNaN));
            else
                upload(a.name, in.f.at(a.name));
        }
    }
    std::map<std::string, Tensor> tensors() const {
        std::map<std::string, Tensor> t;
        for (const Arg& a : k_.args) t[a.name] = arena_.view(a.name);
        return t;
    }
    std::vector<float> download(const std::string& name) const { return test::download_floats(arena_.view(name)); }

private:
    void upload(const std::string& name, const std::vector<float>& v) { test::upload_floats(arena_.view(name), v); }
    void upload_ids(const std::string& name, const std::vector<int32_t>& v) {
        const Tensor d = arena_.view(name);
        copy(d, Tensor(const_cast<int32_t*>(v.data()), {d.numel()}, DType::kI32));
    }
    const Call& k_;
    bool bf16_;
    Arena arena_;
};

Values run_cuda(const Call& k, const Values& in, bool bf16, uint64_t seed) {
    DeviceCall d(k, in, bf16);
    Run r(d.tensors(), true, bf16, seed);
    for (const auto& stage : k.stages) stage(r);
    Values out;
    for (const Arg& a : k.args) {
        if (a.kind == Kind::kI32) continue;
        if (compared(a) || a.kind == Kind::kBF16) out.f[a.name] = d.download(a.name);
        if (a.unchanged) {
            EXPECT_TRUE(d.download(a.name) == in.f.at(a.name)) << a.name << " is an input: it must not be written";
        }
    }
    out.scalars = r.scalars();
    return out;
}

Ref64 run_f64(const Call& k, const Values& in) {
    Ref64 r;
    for (const Arg& a : k.args) {
        if (a.kind == Kind::kI32) {
            r.i[a.name] = in.i.at(a.name);
        } else if (a.kind != Kind::kBF16) {
            const auto it = in.f.find(a.name);
            r.f[a.name] = it == in.f.end() ? std::vector<double>(numel(a), 0.0)
                                           : std::vector<double>(it->second.begin(), it->second.end());
        }
    }
    k.f64(r);
    return r;
}

std::string_view mode_name(Modes m) {
    return m == kF64 ? "cpu-vs-f64" : m == kTorch ? "cpu-vs-torch" : m == kCuda ? "cuda-vs-cpu" : "bf16-vs-cpu";
}

// got vs want for every compared output of the row; prints each error so the margin shows in the log.
void expect_close(size_t index, const Case& c, const Call& k, Modes mode, const Values& in, const Values& got,
                  const std::map<std::string, std::vector<double>>& want, const std::map<std::string, double>& want_s,
                  const std::string& suffix = "") {
    const std::string row = fmt::format("#{} {}{}", index, describe(c), suffix);
    for (const Arg& a : k.args) {
        if (!compared(a) || a.kind == Kind::kBF16) continue;
        double tol = mode == kBf16 ? a.tol.bf16 : a.tol.fp32;
        if (tol == kNotCompared) continue;
        const auto w = want.find(a.name);
        if (w == want.end()) {
            std::printf("[%s] %s: %s has no reference\n", mode_name(mode).data(), row.c_str(), a.name.c_str());
            continue;
        }
        const std::vector<float>& g = got.f.at(a.name);
        ASSERT_EQ(g.size(), w->second.size()) << row << " " << a.name;
        bool finite = true;
        for (float x : g) finite = finite && std::isfinite(x);
        EXPECT_TRUE(finite) << row << " " << a.name << ": non-finite value (an element left unwritten?)";
        if (tol == kExactRounded) {
            size_t diff = 0;
            for (size_t i = 0; i < g.size(); i++) diff += g[i] != rounded(static_cast<float>(w->second[i]));
            std::printf("[%s] %-60s %-12s %zu of %zu differ from the rounded reference\n", mode_name(mode).data(),
                        row.c_str(), a.name.c_str(), diff, g.size());
            EXPECT_EQ(diff, 0u) << row << " " << a.name << " is the rounded reference, bit for bit";
            continue;
        }
        tol = std::max(tol, c.tol_floor);
        const double e = test::rel_err(g, w->second);
        std::printf("[%s] %-60s %-12s max rel err %.3e (tol %.0e)\n", mode_name(mode).data(), row.c_str(),
                    a.name.c_str(), e, tol);
        EXPECT_LE(e, tol) << row << " " << a.name;
        if (a.delta_tol > 0.0) {  // the change from the start value alone (an update far smaller than the value)
            const std::vector<float>& s0 = in.f.at(a.name);
            std::vector<double> dg(g.size()), dw(g.size());
            for (size_t i = 0; i < g.size(); i++) {
                dg[i] = static_cast<double>(g[i]) - s0[i];
                dw[i] = w->second[i] - s0[i];
            }
            const double de = test::rel_err(dg, dw);
            std::printf("[%s] %-60s %-12s max rel err %.3e (tol %.0e)\n", mode_name(mode).data(), row.c_str(),
                        (a.name + " change").c_str(), de, a.delta_tol);
            EXPECT_LE(de, a.delta_tol) << row << " " << a.name << " change";
        }
    }
    for (const auto& [name, tol] : k.scalars) {
        const double g = got.scalars.at(name), w = want_s.at(name);
        const double e = std::fabs(g - w) / std::max(std::fabs(w), 1e-300);
        const double t = mode == kBf16 ? tol.bf16 : tol.fp32;
        std::printf("[%s] %-60s %-12s rel err %.3e (tol %.0e)\n", mode_name(mode).data(), row.c_str(), name.c_str(), e,
                    t);
        EXPECT_LE(e, t) << row << " " << name;
    }
}

std::map<std::string, std::vector<double>> widened(const Values& v) {
    std::map<std::string, std::vector<double>> w;
    for (const auto& [n, f] : v.f) w[n] = std::vector<double>(f.begin(), f.end());
    return w;
}

std::vector<double> read_doubles(const std::string& path, size_t n) {
    std::ifstream f(path, std::ios::binary);
    std::vector<double> v(n);
    f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(double)));
    if (!f || f.peek() != EOF)
        throw std::runtime_error(
            fmt::format("{}: missing, or not {} float64 values (tools/ref/kernels_ref.py)", path, n));
    return v;
}

void write_raw(const std::string& path, const void* data, size_t bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    if (!f) throw std::runtime_error("cannot write " + path);
}

uint32_t row_seed(size_t index) {
    return base_seed("") * 7919u + static_cast<uint32_t>(index) * 131u;
}

}  // namespace

uint32_t base_seed(const char* tag) {
    static const uint32_t s = [tag] {
        const char* e = std::getenv("LLMT_TEST_SEED");
        const uint32_t v = e ? static_cast<uint32_t>(std::strtoul(e, nullptr, 10)) : std::random_device{}();
        std::printf("[case-table%s] seed %u (replay with LLMT_TEST_SEED=%u)\n", tag, v, v);
        return v;
    }();
    return s;
}

std::string describe(const Case& c) {
    const Dims& d = c.d;
    std::string s = c.op;
    const std::pair<const char*, int> ints[] = {{"B", c.packing.empty() ? d.B : 1},
                                                {"T", d.T},
                                                {"C", d.C},
                                                {"OC", d.OC},
                                                {"NH", d.NH},
                                                {"KV", d.KV},
                                                {"V", d.V},
                                                {"Vp", d.Vp},
                                                {"F", d.F},
                                                {"N", d.N},
                                                {"maxT", d.maxT},
                                                {"pos0", d.pos0},
                                                {"t0", d.t0},
                                                {"reps", d.reps}};
    for (const auto& [name, v] : ints)
        if (v > 1 ||
            (v == 1 && std::string_view(name) != "B" && std::string_view(name) != "NH" &&
             std::string_view(name) != "T" && std::string_view(name) != "C" && std::string_view(name) != "reps"))
            s += fmt::format(" {}={}", name, v);
    if (!d.bias) s += " no-bias";
    if (!c.packing.empty()) s += fmt::format(" packed({} rows)", c.packing.size());
    if (*c.variant) s += fmt::format(" {}", c.variant);
    for (const auto& [knob, value] : c.knobs) s += fmt::format(" {}={}", knob_info(knob).name, value);
    return s;
}

std::vector<size_t> rows_of(unsigned mode) {
    std::vector<size_t> r;
    for (size_t i = 0; i < kernel_cases().size(); i++)
        if (kernel_cases()[i].modes & mode) r.push_back(i);
    return r;
}

std::string test_name(size_t index) {
    return fmt::format("{}_{}", kernel_cases().at(index).op, index);
}

void check_row(size_t index, Modes mode, const std::string& torch_dir) {
    const Case& c = kernel_cases().at(index);
    const Call k = op_def(c.op).build(c);
    const Knobs knobs(c);
    const bool bf16 = mode == kBf16;
    const uint32_t seed = row_seed(index);
    const Values in = make_inputs(k, seed, bf16);
    if (mode == kTorch) {
        const Values got = run_cpu(k, in, false, seed, nullptr);
        std::map<std::string, std::vector<double>> want;
        std::map<std::string, double> want_s;
        for (const Arg& a : k.args)
            if (compared(a) && a.kind != Kind::kBF16 && a.tol.fp32 != kNotCompared)
                want[a.name] = read_doubles(fmt::format("{}/{}_{}.ref.bin", torch_dir, index, a.name), numel(a));
        for (const auto& [name, tol] : k.scalars)
            want_s[name] = read_doubles(fmt::format("{}/{}_{}.ref.bin", torch_dir, index, name), 1)[0];
        expect_close(index, c, k, mode, in, got, want, want_s);
        return;
    }
    if (mode == kF64) {
        ASSERT_TRUE(static_cast<bool>(k.f64)) << describe(c) << ": kF64 row of an op without a float64 reference";
        const Values got = run_cpu(k, in, false, seed, nullptr);
        const Ref64 want = run_f64(k, in);
        expect_close(index, c, k, mode, in, got, want.f, want.scalars);
        return;
    }
    const Values gpu = run_cuda(k, in, bf16, seed);
    const Values cpu = run_cpu(k, in, bf16, seed, bf16 ? &gpu : nullptr);
    const auto want = widened(cpu);
    expect_close(index, c, k, mode, in, gpu, want, cpu.scalars);
    if (k.gpu_check) k.gpu_check(in, gpu);
    if (c.flags & kTwice) {
        const Values again = run_cuda(k, in, bf16, seed);
        expect_close(index, c, k, mode, in, again, want, cpu.scalars, " (run 2)");
        if (!(c.flags & kSameBits)) return;
        for (const auto& [name, v] : gpu.f) {
            if (name == c.unordered) continue;
            // EXPECT_TRUE, not EXPECT_EQ: a failure must not print millions of elements.
            EXPECT_TRUE(std::memcmp(v.data(), again.f.at(name).data(), v.size() * sizeof(float)) == 0)
                << describe(c) << ": " << name << " differs between two runs";
        }
    }
}

void write_torch_cases(const std::string& dir) {
    std::string json = "[";
    const auto& rows = kernel_cases();
    for (size_t i = 0; i < rows.size(); i++) {
        const Case& c = rows[i];
        if (!(c.modes & kTorch)) continue;
        const Call k = op_def(c.op).build(c);
        const Values in = make_inputs(k, row_seed(i), false);
        std::string args, params;
        for (const Arg& a : k.args) {
            if (a.kind == Kind::kBF16) continue;
            if (a.kind == Kind::kI32) {
                const auto& v = in.i.at(a.name);
                write_raw(fmt::format("{}/{}_{}.bin", dir, i, a.name), v.data(), v.size() * sizeof(int32_t));
            } else if (a.role != Role::kOut) {
                const auto& v = in.f.at(a.name);
                write_raw(fmt::format("{}/{}_{}.bin", dir, i, a.name), v.data(), v.size() * sizeof(float));
            }
            args += fmt::format(R"({}{{"name": "{}", "shape": [{}], "dtype": "{}"}})", args.empty() ? "" : ", ",
                                a.name, fmt::join(a.shape, ", "), a.kind == Kind::kI32 ? "i32" : "f32");
        }
        for (const auto& [name, v] : k.params)
            params += fmt::format(R"({}"{}": {:.17g})", params.empty() ? "" : ", ", name, v);
        const Dims& d = c.d;
        json += fmt::format(
            R"({}{{"row": {}, "op": "{}", "params": {{{}}}, "args": [{}],
 "dims": {{"B": {}, "T": {}, "C": {}, "OC": {}, "NH": {}, "KV": {}, "V": {}, "Vp": {}, "F": {}, "N": {}, "maxT": {},
 "pos0": {}, "t0": {}, "reps": {}, "theta": {:.17g}, "bias": {}}}}})",
            json.size() > 1 ? ",\n" : "", i, c.op, params, args, batch_rows(c), d.T, d.C, d.OC, d.NH,
            d.KV ? d.KV : d.NH, d.V, d.Vp, d.F, d.N, d.maxT, d.pos0, d.t0, d.reps, d.theta, d.bias ? "true" : "false");
    }
    json += "]\n";
    write_raw(dir + "/cases.json", json.data(), json.size());
}

namespace {

// Median seconds of one run of the row's stages on `device` (the tensors of `r`), repeated until ~0.2 s or 200 runs
// (at least 5) after two warm-up runs.
double median_seconds(const Call& k, Run& r, Device device) {
    auto once = [&] {
        for (const auto& stage : k.stages) stage(r);
        synchronize(device);
    };
    once();
    once();
    std::vector<double> t;
    double total = 0.0;
    while (t.size() < 5 || (total < 0.2 && t.size() < 200)) {
        const auto t0 = std::chrono::steady_clock::now();
        once();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        t.push_back(s);
        total += s;
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

}  // namespace

int perf_main(unsigned modes, const std::string& op) {
    if ((modes & (kCuda | kBf16)) && device_count(Device::kCuda) == 0) {
        std::fprintf(stderr, "--perf: no CUDA device (or built without CUDA)\n");
        return 1;
    }
    std::printf("%-5s %-4s %-90s %12s\n", "mode", "row", "case", "median us");
    const auto& rows = kernel_cases();
    for (size_t i = 0; i < rows.size(); i++) {
        const Case& c = rows[i];
        if (!op.empty() && op != c.op) continue;
        for (const Modes m : {kF64, kCuda, kBf16}) {
            if (!(modes & m) || !(c.modes & m)) continue;
            const Call k = op_def(c.op).build(c);
            const Knobs knobs(c);
            const bool bf16 = m == kBf16;
            const Values in = make_inputs(k, row_seed(i), bf16);
            double s = 0.0;
            if (m == kF64) {
                HostCall h(k, in);
                Run r(h.tensors, false, false, row_seed(i));
                s = median_seconds(k, r, Device::kCpu);
            } else {
                DeviceCall d(k, in, bf16);
                Run r(d.tensors(), true, bf16, row_seed(i));
                s = median_seconds(k, r, Device::kCuda);
            }
            std::printf("%-5s %-4zu %-90s %12.1f\n",
                        m == kF64    ? "cpu"
                        : m == kCuda ? "fp32"
                                     : "bf16",
                        i, describe(c).c_str(), s * 1e6);
            std::fflush(stdout);
        }
    }
    return 0;
}

int case_table_main(int argc, char** argv, unsigned perf_modes) {
    for (int i = 1; i < argc; i++)
        if (std::string_view(argv[i]) == "--perf") return perf_main(perf_modes, i + 1 < argc ? argv[i + 1] : "");
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}

}  // namespace llmt::kernels::cases
