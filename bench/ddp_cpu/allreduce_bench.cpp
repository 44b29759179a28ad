// All-reduce bandwidth on one machine, 2 processes: our ProcessGroup (GlooProcessGroup::allreduce),
// the same buffer through the Reducer's buckets, and a raw Gloo allreduce (gloo's own FileStore
// rendezvous and context, nothing of ours) on the same buffer, interleaved in one run.
// Bandwidth is algorithmic: buffer bytes / seconds (nccl-tests' algbw). Median of the iterations.
// Usage: ddp_allreduce_bench [--sizes-mb 1,4,16,64,256] [--bucket-mb 25] [--iters N]
#include <fmt/format.h>
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "distributed/gloo_process_group.h"
#include "distributed/reducer.h"
#include "distributed/tcp_store.h"

using namespace llmt;
using namespace llmt::dist;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct Args {
    std::vector<size_t> sizes_mb = {1, 4, 16, 64, 256};
    double bucket_mb = 25;
    int iters = 0;  // 0: by size
};

Args parse(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        std::string k = argv[i];
        if (i + 1 >= argc) break;
        std::string v = argv[++i];
        if (k == "--sizes-mb") {
            a.sizes_mb.clear();
            std::stringstream ss(v);
            std::string t;
            while (std::getline(ss, t, ',')) a.sizes_mb.push_back(std::stoul(t));
        } else if (k == "--bucket-mb") {
            a.bucket_mb = std::stod(v);
        } else if (k == "--iters") {
            a.iters = std::stoi(v);
        }
    }
    return a;
}

void run_rank(int rank, int port, const std::string& gloo_dir, const Args& args) {
    const int world = 2;
    TcpStore store("127.0.0.1", port, false, world, std::chrono::seconds(60));
    rendezvous(store, rank, world, std::chrono::seconds(60));
    GlooProcessGroup pg(store, rank, world, std::chrono::seconds(120), GlooDevice{"", "127.0.0.1"});

    // Raw Gloo: its own rendezvous (gloo::rendezvous::FileStore), device and context.
    gloo::rendezvous::FileStore fstore(gloo_dir);
    gloo::rendezvous::PrefixStore pstore("raw", fstore);
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    auto raw = std::make_shared<gloo::rendezvous::Context>(rank, world);
    raw->setTimeout(std::chrono::seconds(120));
    raw->connectFullMesh(pstore, dev);

    if (rank == 0) {
        fmt::print("# all-reduce, 2 processes on 127.0.0.1, f32 sum (Reducer: average, {} MB buckets)\n",
                   args.bucket_mb);
        fmt::print("{:>8} {:>6} {:>12} {:>12} {:>12} {:>10} {:>10}\n", "size_MB", "iters", "ours_GB/s", "raw_GB/s",
                   "reducer_GB/s", "ours/raw", "red/raw");
    }
    for (size_t mb : args.sizes_mb) {
        const size_t n = mb * (1u << 20) / sizeof(float);
        std::vector<float> buf(n, 1.f);
        const int iters = args.iters > 0 ? args.iters : std::max(3, static_cast<int>(64 / mb));
        Reducer red(pg, buf.data(), n * sizeof(float), static_cast<size_t>(args.bucket_mb * (1 << 20)), false);
        std::vector<double> t_ours, t_raw, t_red;
        for (int it = 0; it < iters + 1; ++it) {  // iteration 0 warms up (page faults, connections)
            pg.barrier();
            double t0 = now_s();
            pg.allreduce(Tensor(buf.data(), {static_cast<int64_t>(n)}), ReduceOp::kSum);
            double t1 = now_s();
            pg.barrier();
            double t2 = now_s();
            gloo::AllreduceOptions opts(raw);
            opts.setOutput(buf.data(), n);
            opts.setReduceFunction(
                static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
            opts.setTag(static_cast<uint32_t>(it));
            gloo::allreduce(opts);
            double t3 = now_s();
            pg.barrier();
            double t4 = now_s();
            red.begin_backward(true);
            red.finish();
            double t5 = now_s();
            // Keep the values bounded: sums of ones double every iteration.
            std::fill(buf.begin(), buf.end(), 1.f);
            if (it == 0) continue;
            t_ours.push_back(t1 - t0);
            t_raw.push_back(t3 - t2);
            t_red.push_back(t5 - t4);
        }
        const double gb = static_cast<double>(n * sizeof(float)) / 1e9;
        double ours = gb / median(t_ours), rawbw = gb / median(t_raw), redbw = gb / median(t_red);
        if (rank == 0) {
            fmt::print("{:>8} {:>6} {:>12.3f} {:>12.3f} {:>12.3f} {:>10.3f} {:>10.3f}\n", mb, iters, ours, rawbw,
                       redbw, ours / rawbw, redbw / rawbw);
            std::fflush(stdout);
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    Args args = parse(argc, argv);
    TcpStore server("127.0.0.1", 0, true, 2, std::chrono::seconds(60));
    auto dir = std::filesystem::temp_directory_path() / ("llmt_ddp_bench_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    std::vector<pid_t> pids;
    for (int r = 0; r < 2; ++r) {
        pid_t pid = fork();
        if (pid == 0) {
            int code = 0;
            try {
                run_rank(r, server.port(), dir.string(), args);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "rank %d: %s\n", r, e.what());
                code = 1;
            }
            std::fflush(stdout);
            _exit(code);
        }
        pids.push_back(pid);
    }
    int rc = 0;
    for (pid_t p : pids) {
        int status = 0;
        waitpid(p, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
    }
    std::filesystem::remove_all(dir);
    return rc;
}
