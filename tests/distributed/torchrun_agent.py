"""torchrun's elastic agent, driven through torch's own launcher API (torch.distributed.launcher.api),
for machines whose `torchrun` command cannot start (Debian's torch 1.13 under Python 3.11: its
--redirects/--tee parsing yields None and the agent dies before starting a worker). Everything after
parsing is torchrun's code path: the same LaunchConfig torchrun builds, its rendezvous (static or c10d),
the agent store workers reach with TORCHELASTIC_USE_AGENT_STORE=True, and --max-restarts.

  torchrun_agent.py --nnodes N --nproc-per-node P [--node-rank R] [--rdzv-backend static|c10d]
                    [--rdzv-endpoint HOST:PORT] [--rdzv-id ID] [--max-restarts K] [--standalone]
                    -- COMMAND ARGS...     (the command runs as with torchrun --no-python)
"""
import argparse
import dataclasses
import sys
import uuid

from torch.distributed.elastic.multiprocessing import Std
from torch.distributed.launcher.api import LaunchConfig, elastic_launch


def main(argv):
    split = argv.index("--")
    p = argparse.ArgumentParser()
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--nproc-per-node", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--rdzv-backend", default="static")
    p.add_argument("--rdzv-endpoint", default="127.0.0.1:29500")
    p.add_argument("--rdzv-id", default="none")
    p.add_argument("--max-restarts", type=int, default=0)
    p.add_argument("--standalone", action="store_true")
    a = p.parse_args(argv[:split])
    cmd = argv[split + 1:]
    if a.standalone:  # as torchrun --standalone: c10d on a free local port, a fresh id
        a.rdzv_backend, a.rdzv_endpoint, a.rdzv_id = "c10d", "localhost:0", str(uuid.uuid4())
    conf = {"rank": a.node_rank} if a.rdzv_backend == "static" else {}
    fields = {f.name for f in dataclasses.fields(LaunchConfig)}
    logs = {"redirects": Std.NONE, "tee": Std.NONE} if "redirects" in fields else {}  # 2.x: logs_specs
    config = LaunchConfig(
        min_nodes=a.nnodes, max_nodes=a.nnodes, nproc_per_node=a.nproc_per_node, run_id=a.rdzv_id,
        role="default", rdzv_endpoint=a.rdzv_endpoint, rdzv_backend=a.rdzv_backend, rdzv_configs=conf,
        max_restarts=a.max_restarts, monitor_interval=0.5, start_method="spawn", **logs)
    elastic_launch(config=config, entrypoint=cmd[0])(*cmd[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
