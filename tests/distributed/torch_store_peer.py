"""PyTorch's side of tests/distributed/torch_store_interop_test.cpp: torch.distributed.TCPStore as the server
our client talks to, or as the client of our server. Every check raises with what it expected, and
the process exits non-zero; the C++ test prints this process's output on failure.

  server            serve on a free port; print "PORT <port> TORCH <version>"; check what our client
                    wrote once it sets "llmt/done"; exit
  serve-only        serve until our client sets "llmt/bye" (our 2.x-only queries)
  server-dies       serve; once our client sets "llmt/waiting", exit abruptly (no clean shutdown)
  client PORT       every query of this torch's generation against our server
  client-waits PORT wait for a key nobody sets; our test kills the server; report how that ended
"""
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def expect(what, got, want):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, expected {want!r}")


def store(port, is_master):
    # world_size None: no "init/" counting (the C++ side checks num_keys exactly)
    return dist.TCPStore("127.0.0.1", port, None, is_master, timedelta(seconds=60), wait_for_workers=False)


def serve(mode):
    s = store(0, True)
    print(f"PORT {s.port} TORCH {torch.__version__}", flush=True)
    if mode == "serve-only":
        s.wait(["llmt/bye"])
        return
    if mode == "server-dies":
        s.wait(["llmt/waiting"])
        time.sleep(0.3)
        os._exit(0)
    s.wait(["llmt/done"])
    # What our client wrote, seen through torch's own client (same "/" key prefix)
    expect("get llmt/set", s.get("llmt/set"), b"value\x00from llmtrain")
    expect("get llmt/n", s.get("llmt/n"), b"42")
    expect("get llmt/cas", s.get("llmt/cas"), b"second")
    # a missing key is not created by compare_set with a non-empty expected value, which it echoes
    expect("llmt/deleted is gone", s.compare_set("llmt/deleted", "gone?", "x"), b"gone?")
    if TORCH2:
        expect("get llmt/app", s.get("llmt/app"), b"abc")
        expect("get llmt/m2", s.get("llmt/m2"), b"two")
    s.set("py/ack", "seen")
    s.wait(["llmt/bye"])
    print("OK", flush=True)


def timed_out(fn):
    t0 = time.monotonic()
    try:
        fn()
    except Exception as e:  # torch raises RuntimeError (1.13) or DistStoreError (2.x)
        return time.monotonic() - t0, str(e)
    raise AssertionError("expected a timeout, the call returned")


def client(port):
    s = store(port, False)
    expect("get llmt/preset", s.get("llmt/preset"), b"from llmtrain")
    s.set("py/set", b"v\x001")
    expect("get py/set", s.get("py/set"), b"v\x001")
    expect("add", s.add("py/n", 5), 5)
    expect("add", s.add("py/n", -2), 3)
    if hasattr(s, "check"):  # torch 1.13's python binding has no check (our client tests CHECK there)
        expect("check present", s.check(["py/set", "llmt/preset"]), True)
        expect("check missing", s.check(["py/set", "py/never"]), False)
    s.wait(["py/set", "llmt/preset"])
    expect("compare_set create", s.compare_set("py/cas", "", "a"), b"a")
    expect("compare_set mismatch", s.compare_set("py/cas", "x", "b"), b"a")
    expect("compare_set match", s.compare_set("py/cas", "a", "b"), b"b")
    expect("compare_set missing", s.compare_set("py/missing", "x", "y"), b"x")
    n0 = s.num_keys()
    s.set("py/extra", "1")
    expect("num_keys after set", s.num_keys(), n0 + 1)
    expect("delete_key", s.delete_key("py/extra"), True)
    expect("delete_key again", s.delete_key("py/extra"), False)
    expect("num_keys after delete", s.num_keys(), n0)
    elapsed, msg = timed_out(lambda: s.wait(["py/never"], timedelta(milliseconds=300)))
    if not (0.25 <= elapsed < 10):
        raise AssertionError(f"wait timeout took {elapsed:.2f} s for a 0.3 s timeout ({msg})")
    print(f"wait timeout after {elapsed:.2f} s: {msg}", flush=True)
    if TORCH2:  # CANCEL_WAIT keeps the connection usable
        expect("get after a timed-out wait", s.get("py/set"), b"v\x001")
        s.append("py/app", "a")
        s.append("py/app", "bc")
        expect("append", s.get("py/app"), b"abc")
        s.multi_set(["py/m1", "py/m2"], ["1", b"2"])
        expect("multi_get", s.multi_get(["py/m1", "py/m2"]), [b"1", b"2"])
        if hasattr(s, "queue_push"):
            s.queue_push("py/q", "x")
            s.queue_push("py/q", "y")
            expect("queue_len", s.queue_len("py/q"), 2)
            expect("queue_pop", s.queue_pop("py/q"), b"x")
            expect("queue_len", s.queue_len("py/q"), 1)
    else:
        s = store(port, False)  # 1.13 has no cancel: the timed-out connection is spent
    s.set("py/done", "1")
    print("OK", flush=True)


def client_waits(port):
    s = store(port, False)
    s.set("py/waiting", "1")
    elapsed, msg = timed_out(lambda: s.wait(["py/never"], timedelta(seconds=60)))
    print(f"RAISED after {elapsed:.2f} s: {msg}", flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode in ("server", "server-dies", "serve-only"):
        serve(mode)
    elif mode == "client":
        client(int(sys.argv[2]))
    elif mode == "client-waits":
        client_waits(int(sys.argv[2]))
    else:
        raise SystemExit(f"unknown mode {mode}")
