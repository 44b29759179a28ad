#!/usr/bin/env python3
"""Appends one measured training-throughput row to configs/throughput.jsonl (the table `llmtrain estimate`
and the server's estimates read; src/server/estimate/throughput.h has the fields). Called by the training
benchmarks (bench/train_cpu/run.sh, bench/ddp_cpu/train.sh, bench/train_gpu, bench/train_classifier)
after each measured run; RECORD=0 in their environment skips it. The model's FLOPs/token (an image
classifier's FLOPs/image and shape) come from `llmtrain estimate --json`, so the formula lives in one
place (models::Gpt2Config::flops_per_token, models::ClassifierConfig::train_flops_per_image).

usage: record_throughput.py --bin BUILD/llmtrain --config CFG.yaml (--tokens-per-s X | --images-per-s X)
         --world-size W
         --device cpu|cuda [--threads-per-rank T] [--card NAME] [--machine TEXT] --command CMD --source NAME
         [--out configs/throughput.jsonl]
"""
import argparse
import datetime
import json
import os
import subprocess
import sys


def cpu_card():
    model = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{model} ({os.cpu_count()} cores)"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--config", required=True)
    rate = p.add_mutually_exclusive_group(required=True)
    rate.add_argument("--tokens-per-s", type=float, help="a language model's training rate, all ranks")
    rate.add_argument("--images-per-s", type=float, help="an image classifier's (model.arch mlp/cnn), all ranks")
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--device", choices=["cpu", "cuda"], required=True)
    p.add_argument("--threads-per-rank", type=int, default=0)
    p.add_argument("--card", default="")
    p.add_argument("--machine", default="")
    p.add_argument("--command", required=True)
    p.add_argument("--source", required=True)
    p.add_argument("--out", default="configs/throughput.jsonl")
    a = p.parse_args()
    if os.environ.get("RECORD", "1") == "0":
        return
    measured = a.images_per_s if a.images_per_s is not None else a.tokens_per_s
    if not measured > 0:
        sys.exit(f"record_throughput: the rate must be > 0, got {measured}")
    est = json.loads(subprocess.run([a.bin, "estimate", "--config", a.config, "--json",
                                     "--throughput-file", "/dev/null"],
                                    check=True, capture_output=True, text=True).stdout)
    cfg = json.loads(subprocess.run([a.bin, "print-config", "--config", a.config, "--json"], check=True,
                                    capture_output=True, text=True).stdout)
    m, t = cfg["model"], cfg["trainer"]
    classifier = m.get("arch") in ("mlp", "cnn")
    if classifier != (a.images_per_s is not None):
        what = "an image classifier: pass --images-per-s" if classifier else "a language model: pass --tokens-per-s"
        sys.exit(f"record_throughput: {a.config} is {what}")
    card = a.card or (cpu_card() if a.device == "cpu" else "")
    if not card:
        sys.exit("record_throughput: --card is required for cuda rows (the GPU's name)")
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    row = {
        "device": a.device,
        "card": card,
        "world_size": a.world_size,
        "threads_per_rank": a.threads_per_rank,
        "model": est["model"] if classifier else
                 f"L{m['n_layer']} d{m['d_model']} h{m['n_head']} T{m['block_size']} V{m['vocab_size']}",
        "precision": t.get("precision", ""),
        "micro_batch_size": t["micro_batch_size"],
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "machine": a.machine or f"{cpu_card()}, load {load}",
        "command": a.command,
        "source": a.source,
    }
    if classifier:
        row.update({"arch": m["arch"], "flops_per_image": est["flops_per_image"], "images_per_s": round(measured, 1)})
    else:
        row.update({"flops_per_token": est["flops_per_token"], "tokens_per_s": round(measured, 1)})
    row.update({k: row.pop(k) for k in ("date", "machine", "command", "source")})  # provenance last, as before
    with open(a.out, "a") as f:
        f.write(json.dumps(row) + "\n")
    print(f"recorded in {a.out}: {row['model']} x{a.world_size} {a.device} {round(measured, 1)} "
          f"{'images' if classifier else 'tok'}/s", file=sys.stderr)


if __name__ == "__main__":
    main()
