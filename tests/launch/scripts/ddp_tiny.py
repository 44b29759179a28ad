# A 2-process PyTorch DDP script as users write them for torchrun: gloo, init_process_group("env://"), an
# all-reduce and a few steps of a tiny model. Used by tests/launch/torch_script_test.cpp (llmtrain launch)
# and tests/server/command_job_test.cpp (a command job of llmtrain serve).
#   --fail-rank R --fail-how kill|raise: on the first attempt (TORCHELASTIC_RESTART_COUNT=0), rank R kills
#   itself with SIGKILL or raises, after the all-reduce; @record writes the raise to TORCHELASTIC_ERROR_FILE.
# Writes LLMTRAIN_METRICS_FILE (JSON lines, rank 0) and LLMTRAIN_OUTPUT_DIR/model.pt when they are set.
import argparse, json, os, signal

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

TORCHRUN_VARS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                 "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                 "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
                 "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE", "OMP_NUM_THREADS"]


@record
def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--fail-rank", type=int, default=-1)
    p.add_argument("--fail-how", choices=["kill", "raise"], default="kill")
    a = p.parse_args()
    env = {k: os.environ.get(k, "<unset>") for k in TORCHRUN_VARS}
    print("env " + " ".join(f"{k}={v}" for k, v in env.items()), flush=True)

    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    assert t.item() == world * (world + 1) / 2, t
    print(f"allreduce ok sum={t.item():g}", flush=True)

    if rank == a.fail_rank and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
        if a.fail_how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError(f"rank {rank} fails on purpose on attempt 0")

    torch.manual_seed(0)  # same initial weights on every rank (DDP also broadcasts rank 0's)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own shard of data
    x = torch.randn(8, 4, generator=g)
    y = x.sum(dim=1, keepdim=True)
    metrics = os.environ.get("LLMTRAIN_METRICS_FILE") if rank == 0 else None
    for step in range(1, a.steps + 1):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if metrics:
            with open(metrics, "a") as f:
                f.write(json.dumps({"step": step, "train_loss": loss.item()}) + "\n")
    # DDP keeps the replicas equal: the max over ranks of |w - mean(w)| is 0.
    w = torch.cat([q.detach().flatten() for q in model.parameters()])
    mean = w.clone()
    dist.all_reduce(mean)
    mean /= world
    gap = (w - mean).abs().max()
    dist.all_reduce(gap, op=dist.ReduceOp.MAX)
    assert gap.item() < 1e-6, gap  # float32 sums of 2 equal values: exact up to rounding of the division
    out = os.environ.get("LLMTRAIN_OUTPUT_DIR")
    if out and rank == 0:
        torch.save(model.module.state_dict(), os.path.join(out, "model.pt"))
    print(f"done rank={rank} steps={a.steps} loss={loss.item():.6f} replicas_equal", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
