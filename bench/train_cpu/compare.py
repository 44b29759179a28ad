#!/usr/bin/python3
"""bench/train_cpu in one run (issue 26): CPU training throughput, ours vs PyTorch 1.13 fp32 and PyTorch with CPU
bf16 autocast (bench/train_cpu/torch_gpt.py), tiny and small GPT-2 shapes, first on the machine as it is, then
with 2 busy processes (started and stopped here) competing for the cores. Ours runs bf16 GEMMs where the CPU has
AVX512_BF16 (trainer.precision: bf16; kernels/cpu/gemm_bf16.h), fp32, and auto (whichever of the two the GEMM
probe measures faster, train/cpu_precision.h; the probe's figures are printed first, from `llmtrain version --json
--gemm-probe`).

Figures: tokens/s (median step: ours from metrics.jsonl after 2 warm-up steps, PyTorch's median timed step) and
tokens per CPU-second of the process (tokens / (user+system CPU time); ours: the whole process, start-up
included, PyTorch: its timed steps), which shows CPU time lost to spinning and waiting when the cores are shared.
Generation: `llmtrain generate` of --gen-tokens tokens (greedy) from the first config's checkpoint, and PyTorch's
greedy KV-cache decode of the same shape (torch_generate.py), tokens/s and tokens per CPU-second, idle and loaded
(ours: the whole process, start-up included; PyTorch: its decode loop). Every figure is printed with the CPU it came
from (family/model/ISA).

usage: compare.py --bin build/release/llmtrain [--steps 12] [--torch-steps 5] [--threads 2] [--configs tiny,small]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = {"tiny": (4, 256, 4), "small": (6, 384, 6)}  # n_layer, d_model, n_head; T=256, B=8, vocab 50257


def cpu_line():
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            if ":" not in line:
                if info:
                    break
                continue
            k, v = (s.strip() for s in line.split(":", 1))
            info.setdefault(k, v)
    flags = set(info.get("flags", "").split())
    isa = [f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile") if f in flags]
    return (f"{info.get('model name', '?')} (vendor {info.get('vendor_id', '?')}, "
            f"family {info.get('cpu family', '?')}, "
            f"model {info.get('model', '?')}, stepping {info.get('stepping', '?')}); ISA: {' '.join(isa)}; "
            f"{len(os.sched_getaffinity(0))} CPUs usable")


def run_measured(argv, env=None):
    """Runs argv to completion; returns (stdout, stderr, wall seconds). Exits on failure."""
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(argv)}\n{p.stderr[-3000:]}")
    return p.stdout, p.stderr, time.perf_counter() - t0


class ChildCpu:
    """CPU seconds of the children reaped between start() and stop() (getrusage RUSAGE_CHILDREN)."""

    def __enter__(self):
        import resource
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.t0 = r.ru_utime + r.ru_stime
        return self

    def __exit__(self, *exc):
        import resource
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.seconds = r.ru_utime + r.ru_stime - self.t0


def write_config(work, name, precision, steps, threads):
    L, C, H = SHAPES[name]
    cfg = os.path.join(work, f"{name}_{precision}.yaml")
    with open(cfg, "w") as f:
        f.write(f"""run: {{name: bench, seed: 1, device: cpu, threads: {threads}}}
model: {{n_layer: {L}, n_head: {H}, d_model: {C}, block_size: 256, vocab_size: 50257}}
trainer: {{max_steps: {steps}, micro_batch_size: 8, warmup_steps: 1, log_every_steps: 1, eval_every_steps: 0,
          save_every_steps: 0, precision: {precision}}}
data: {{train_shards: {work}/train_*.bin}}
output: {{root_dir: {work}/runs, run_id: RUNID}}
tracking: {{jsonl: true}}
""")
    return cfg


def ours_train(a, work, name, precision, tag):
    cfg = write_config(work, name, precision, a.steps, a.threads)
    run_id = f"{name}_{precision}_{tag}"
    with ChildCpu() as cpu:
        run_measured([a.bin, "train", "--config", cfg, "--set", f"output.run_id={run_id}"])
    rows = [json.loads(l) for l in open(f"{work}/runs/{run_id}/metrics.jsonl") if '"loss"' in l]
    tps = statistics.median(r["tokens_per_sec"] for r in rows[2:])
    return dict(tok_s=tps, tok_per_cpu_s=a.steps * 8 * 256 / cpu.seconds, run=f"{work}/runs/{run_id}")


OPENBLAS_DIR = "/tmp/torch_cpu_bench_openblas"  # shared with bench/train_cpu/torch_cpu_gpt.py
OPENBLAS_LIBDIR = os.path.join(OPENBLAS_DIR, "usr/lib/x86_64-linux-gnu/openblas-openmp")


def torch_env():
    """PyTorch's environment as in issue 4's peer: Debian's torch links libblas.so.3 (BLAS_INFO=generic), the
    netlib reference BLAS unless an alternative is set, so it runs on Debian's libopenblas0-openmp (downloaded with
    apt-get download, extracted, never installed) through LD_LIBRARY_PATH, with glibc's malloc thresholds raised."""
    if not os.path.exists(os.path.join(OPENBLAS_LIBDIR, "libblas.so.3")):
        deb = os.path.join(OPENBLAS_DIR, "deb")
        os.makedirs(deb, exist_ok=True)
        subprocess.run(["apt-get", "download", "libopenblas0-openmp"], cwd=deb, check=True, capture_output=True)
        pkg = sorted(f for f in os.listdir(deb) if f.endswith(".deb"))[-1]
        subprocess.run(["dpkg-deb", "-x", os.path.join(deb, pkg), OPENBLAS_DIR], check=True)
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = OPENBLAS_LIBDIR + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["GLIBC_TUNABLES"] = "glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=8589934592"
    return env


def torch_train(a, name, autocast):
    argv = ["/usr/bin/python3", os.path.join(HERE, "torch_gpt.py"), "--config", name, "--threads", str(a.threads),
            "--warmup", "2", "--steps", str(a.torch_steps)] + (["--autocast"] if autocast else [])
    out, _, _ = run_measured(argv, env=torch_env())
    return json.loads(out.strip().splitlines()[-1])


def ours_generate(a, run_dir):
    argv = [a.bin, "generate", "--checkpoint", run_dir, "--prompt-ids", "50256", "-n", str(a.gen_tokens),
            "--temperature", "0"]
    load = os.getloadavg()[0]
    with ChildCpu() as cpu:
        _, err, wall = run_measured(argv)
    rate = None
    for line in err.splitlines():
        if line.startswith("generate:") and "tokens/s" in line:
            rate = float(line.split("(")[1].split(" tokens/s")[0])
    return dict(tok_s=rate, tok_per_cpu_s=a.gen_tokens / cpu.seconds, wall_s=wall, load_before=load)


def torch_generate(a, name):
    argv = ["/usr/bin/python3", os.path.join(HERE, "torch_generate.py"), "--config", name, "--threads",
            str(a.threads), "--tokens", str(a.gen_tokens)]
    out, _, _ = run_measured(argv, env=torch_env())
    return json.loads(out.strip().splitlines()[-1])


class Busy:
    """n processes spinning on the CPU for the duration of the with-block."""

    def __init__(self, n):
        self.n = n

    def __enter__(self):
        self.procs = [subprocess.Popen(["/usr/bin/python3", "-c", "while True: pass"]) for _ in range(self.n)]
        time.sleep(0.5)
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def generate_checkpoint(a, work):
    """--generate-only: a checkpoint of the first config to decode from (2 training steps, not measured)."""
    cfg = write_config(work, a.configs[0], "fp32", 2, a.threads)
    run_measured([a.bin, "train", "--config", cfg, "--set", "output.run_id=gen_ckpt"])
    return f"{work}/runs/gen_ckpt"


def measure(a, work, tag):
    res = {"train": {}, "generate": None, "torch generate": None}
    if a.generate_only:
        res["generate"] = ours_generate(a, a.gen_checkpoint)
        res["torch generate"] = torch_generate(a, a.configs[0])
        return res
    for name in a.configs:
        r = res["train"][name] = {}
        r["ours fp32"] = ours_train(a, work, name, "fp32", tag)
        if a.bf16:
            r["ours bf16"] = ours_train(a, work, name, "bf16", tag)
        r["ours auto"] = ours_train(a, work, name, "auto", tag)  # the probe's pick (trainer.precision: auto)
        r["torch fp32"] = torch_train(a, name, False)
        r["torch bf16 autocast"] = torch_train(a, name, True)
    first = a.configs[0]
    res["generate"] = ours_generate(a, res["train"][first]["ours bf16" if a.bf16 else "ours fp32"]["run"])
    res["torch generate"] = torch_generate(a, first)
    return res


def record(a, work, idle):
    """Our idle figures become rows of the measured-throughput table (configs/throughput.jsonl; RECORD=0 skips)."""
    if os.environ.get("RECORD", "1") == "0":
        return
    precision = "bf16" if a.bf16 else "fp32"
    for name, r in idle["train"].items():
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "..", "record_throughput.py"), "--bin", a.bin,
                        "--config", os.path.join(work, f"{name}_{precision}.yaml"), "--tokens-per-s",
                        f"{r['ours ' + precision]['tok_s']:.0f}", "--world-size", "1", "--threads-per-rank",
                        str(a.threads), "--device", "cpu", "--command", "bench/train_cpu/run.sh", "--source",
                        "bench/train_cpu", "--machine", cpu_line()], check=True)


def print_table(label, res, ours_key):
    print(f"\n{label}")
    if res["train"]:
        print(f"{'config':<7}{'mode':<22}{'tok/s':>9}{'tok/CPU-s':>11}")
    for name, r in res["train"].items():
        for mode, v in r.items():
            print(f"{name:<7}{mode:<22}{v['tok_s']:>9.0f}{v['tok_per_cpu_s']:>11.0f}")
        best_torch = max(r["torch fp32"]["tok_s"], r["torch bf16 autocast"]["tok_s"])
        print(f"{name:<7}{'ratio ' + ours_key + ' / faster torch':<31}{r[ours_key]['tok_s'] / best_torch:.2f}x")
    g, t = res["generate"], res["torch generate"]
    print(f"generate {g['tok_s']:.1f} tok/s (as `llmtrain generate` reports), {g['tok_per_cpu_s']:.1f} tok/CPU-s "
          f"(load average before: {g['load_before']:.2f})")
    print(f"torch generate {t['tok_s']:.1f} tok/s, {t['tok_per_cpu_s']:.1f} tok/CPU-s; "
          f"ours / torch {g['tok_s'] / t['tok_s']:.2f}x tok/s, "
          f"{g['tok_per_cpu_s'] / t['tok_per_cpu_s']:.2f}x tok/CPU-s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--torch-steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gen-tokens", type=int, default=200)
    ap.add_argument("--configs", default="tiny,small")
    ap.add_argument("--busy", type=int, default=2)
    ap.add_argument("--json", default="")
    ap.add_argument("--generate-only", action="store_true", help="only the generation figures, idle and loaded")
    a = ap.parse_args()
    a.configs = a.configs.split(",")
    info = json.loads(subprocess.run([a.bin, "version", "--json"], capture_output=True, text=True, check=True).stdout)
    a.bf16 = "avx512_bf16" in open("/proc/cpuinfo").read().split()
    print(f"cpu: {cpu_line()}")
    probe = json.loads(subprocess.run([a.bin, "version", "--json", "--gemm-probe"], capture_output=True, text=True,
                                      check=True, env=dict(os.environ, OMP_NUM_THREADS=str(a.threads))).stdout)
    g = probe["cpu_gemm_probe"]
    print(f"gemm probe ({g['shapes']}, {g['threads']} threads): fp32 {g['fp32_gflops']:.1f} GFLOP/s, bf16 "
          f"{g['bf16_gflops']:.1f} GFLOP/s ({g['bf16_how']}); trainer.precision auto takes {g['auto_takes']}")
    print(f"load at start: {open('/proc/loadavg').read().split()[:3]}; ours: {a.bin} ({info.get('blas', '?')} GEMMs); "
          f"{a.threads} threads each; T=256 B=8 vocab 50257")
    with tempfile.TemporaryDirectory() as work:
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "..", "random_shard.py"), f"{work}/train_000000.bin"],
                       check=True, stdout=subprocess.DEVNULL)
        if a.generate_only:
            a.gen_checkpoint = generate_checkpoint(a, work)
        idle = measure(a, work, "idle")
        if not a.generate_only:
            record(a, work, idle)
        with Busy(a.busy):
            loaded = measure(a, work, "busy")
    ours_key = "ours bf16" if a.bf16 else "ours fp32"
    print_table("as the machine is (no busy processes of ours):", idle, ours_key)
    print_table(f"with {a.busy} busy processes on the cores:", loaded, ours_key)
    print("\nunder load / idle, tokens per CPU-second (target >= 0.80):")
    for name in idle["train"]:
        for mode in idle["train"][name]:
            i, l = idle["train"][name][mode], loaded["train"][name][mode]
            print(f"  {name:<6}{mode:<22}{l['tok_per_cpu_s'] / i['tok_per_cpu_s']:.2f}")
    for key in ("generate", "torch generate"):
        print(f"  {key:<28}{loaded[key]['tok_per_cpu_s'] / idle[key]['tok_per_cpu_s']:.2f}")
    print(f"load at end: {open('/proc/loadavg').read().split()[:3]}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(cpu=cpu_line(), idle=idle, loaded=loaded), f, indent=1)


if __name__ == "__main__":
    main()
