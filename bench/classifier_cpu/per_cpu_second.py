#!/usr/bin/python3
"""Images per CPU-second for bench/classifier_cpu (issue 21): the figure that stays steady when other
processes share the cores (wall-clock images/s then depend on the scheduler; CPU time counts only what
each side itself spent, all its threads together).

  ours, training:  `llmtrain train` CPU time (getrusage of the child) at S0 and S0 + STEPS steps; the
                   difference is STEPS steps' worth (start-up, the data load, the final evaluation and the
                   checkpoint cancel).
  ours, inference: `llmtrain eval` of the second run's checkpoint on the 10,000 test images and on the first
                   SMALL of them (both written here as raw IDX); the difference is 10,000 - SMALL images.
  PyTorch:         torch_classifier.py's process_time() around its timed loops (fp32 and --autocast).

Usage: per_cpu_second.py --bin build/release/llmtrain [--steps 40] [--threads 1] [--archs cnn,mlp]
Prints one table; ratios against the faster PyTorch mode."""
import argparse
import gzip
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = "/usr/share/datasets/fashion-mnist"
TORCH_ARGS = {"cnn": ["--arch", "cnn", "--conv", "32,64", "--hidden", "128", "--dropout", "0.25"],
              "mlp": ["--arch", "mlp", "--conv", "", "--hidden", "256,128", "--dropout", "0.1"]}


def child_cpu(argv):
    """CPU seconds (user + system) the command took."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def write_test_sets(work, small):
    """The test set raw (not gzip: its decompression would count as inference) as all-images and all-labels,
    and its first `small` images as sub-images and sub-labels."""
    with gzip.open(f"{DATA}/t10k-images-idx3-ubyte.gz") as f:
        magic, n, h, w = struct.unpack(">IIII", f.read(16))
        pixels = f.read(n * h * w)
    with gzip.open(f"{DATA}/t10k-labels-idx1-ubyte.gz") as f:
        lmagic, _ = struct.unpack(">II", f.read(8))
        labels = f.read(n)
    for name, k in (("all", n), ("sub", small)):
        with open(f"{work}/{name}-images", "wb") as f:
            f.write(struct.pack(">IIII", magic, k, h, w) + pixels[: k * h * w])
        with open(f"{work}/{name}-labels", "wb") as f:
            f.write(struct.pack(">II", lmagic, k) + labels[:k])


def ours(a, work, arch, precision):
    common = ["--set", f"run.threads={a.threads}", "--set", "run.device=cpu",
              "--set", f"trainer.precision={precision}"]
    def train(steps, run_id):
        return child_cpu([a.bin, "train", "--config", f"configs/presets/fashion_mnist_{arch}.yaml", "--set",
                          "trainer.epochs=0", "--set", f"trainer.max_steps={steps}", "--set", "trainer.warmup_steps=2",
                          "--set", "trainer.eval_every_steps=0", "--set", "trainer.save_every_steps=0", "--set",
                          f"output.root_dir={work}/runs", "--set", f"output.run_id={run_id}", *common])
    tag = f"{arch}-{precision}"
    c0 = train(a.s0, tag + "-a")
    c1 = train(a.s0 + a.steps, tag + "-b")
    train_ips = a.steps * 128 / (c1 - c0)
    def evaluate(extra):
        return child_cpu([a.bin, "eval", "--config", f"configs/presets/fashion_mnist_{arch}.yaml", "--checkpoint",
                          f"{work}/runs/{tag}-b", *common, *extra])
    full = evaluate(["--set", f"data.test_images={work}/all-images", "--set", f"data.test_labels={work}/all-labels"])
    part = evaluate(["--set", f"data.test_images={work}/sub-images", "--set", f"data.test_labels={work}/sub-labels"])
    return train_ips, (10000 - a.small) / (full - part)


def torch_side(a, arch, autocast):
    out = subprocess.run(["/usr/bin/python3", f"{HERE}/torch_classifier.py", *TORCH_ARGS[arch], "--batch", "128",
                          "--threads", str(a.threads), "--steps", str(a.steps)] + (["--autocast"] if autocast else []),
                         check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    return j["train_images_per_cpu_sec"], j["infer_images_per_cpu_sec"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--s0", type=int, default=5)
    ap.add_argument("--small", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--archs", default="cnn,mlp")
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    print(f"images per CPU-second, {a.threads} thread(s), batch 128, {a.steps} timed steps; load "
          f"{' '.join(open('/proc/loadavg').read().split()[:3])}")
    print(f"{'model':<5} {'ours':<5} {'train/CPU-s':>12} {'torch fp32':>11} {'torch bf16':>11} {'ratio':>6} | "
          f"{'infer/CPU-s':>12} {'torch fp32':>11} {'torch bf16':>11} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as work:
        write_test_sets(work, a.small)
        for arch in a.archs.split(","):
            tf, tfi = torch_side(a, arch, False)
            tb, tbi = torch_side(a, arch, True)
            for precision in ("fp32", "bf16"):
                ot, oi = ours(a, work, arch, precision)
                print(f"{arch:<5} {precision:<5} {ot:12.0f} {tf:11.0f} {tb:11.0f} {ot / max(tf, tb):5.2f}x | "
                      f"{oi:12.0f} {tfi:11.0f} {tbi:11.0f} {oi / max(tfi, tbi):5.2f}x", flush=True)
    print(f"load after: {' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    sys.exit(main())
