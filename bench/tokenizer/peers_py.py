#!/usr/bin/env python3
"""Python peers of tokenizer_bench on a tokenizer.json (Llama 3's): Hugging Face `tokenizers` and native
`tiktoken` given the same ranks and pattern, each when importable (neither is in Debian 12; the GPU
host has both). Single call on the whole corpus, then batched on 1, 2, 4, ... threads over documents cut
at a '\\n' between two printable ASCII characters (where both pre-tokenizers always start a new piece,
so the concatenated ids equal the single call's; tokenizer_bench's encode_parallel cuts at the same
kind of point). Best of REPEAT runs; one JSON object per line, as peers.mjs prints.

Usage: peers_py.py CORPUS REPEAT TOKENIZER_JSON THREADS (e.g. 1,2,16)
Hugging Face's thread count is fixed when its Rust pool starts, so each count runs in a fresh process
(RAYON_NUM_THREADS); tiktoken takes num_threads per call.
"""
import base64
import json
import os
import re
import subprocess
import sys
import time


def chunks(text, target=64 << 10):
    out, start = [], 0
    while len(text) - start > 2 * target:
        m = re.compile(r"(?<=[!-~])\n(?=[!-~])").search(text, start + target)
        if not m:
            break
        out.append(text[start:m.end()])
        start = m.end()
    out.append(text[start:])
    return out


def timed(fn, repeat):
    best, best_cpu, n = 1e30, 1e30, 0
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        n = fn()
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return best, best_cpu, n


def report(what, version, threads, nbytes, best, best_cpu, tokens, mode):
    print(json.dumps({"what": what, "version": version, "threads": threads, "mode": mode,
                      "mb_per_s": round(nbytes / best / 1e6, 2), "mb_per_cpu_s": round(nbytes / best_cpu / 1e6, 2),
                      "tokens": tokens, "bytes": nbytes}), flush=True)


def hf_child(corpus, repeat, tokjson, threads):
    import tokenizers
    tok = tokenizers.Tokenizer.from_file(tokjson)
    data = open(corpus, "rb").read()
    text = data.decode("utf-8")
    if threads == 1:
        best, cpu, n = timed(lambda: len(tok.encode(text, add_special_tokens=False).ids), repeat)
        report("hf-tokenizers", tokenizers.__version__, 1, len(data), best, cpu, n, "single")
    docs = chunks(text)
    best, cpu, n = timed(lambda: sum(len(e.ids) for e in tok.encode_batch(docs, add_special_tokens=False)), repeat)
    report("hf-tokenizers", tokenizers.__version__, threads, len(data), best, cpu, n, "batch")


def tiktoken_runs(corpus, repeat, tokjson, threads_list):
    import tiktoken
    j = json.load(open(tokjson, encoding="utf-8"))
    cp_to_byte, n = {}, 0
    for b in range(256):
        printable = 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE
        cp_to_byte[b if printable else 256 + n] = b
        n += 0 if printable else 1
    ranks = {bytes(cp_to_byte[ord(c)] for c in tok): i for tok, i in j["model"]["vocab"].items()}
    enc = tiktoken.Encoding("llama3", pat_str=j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"],
                            mergeable_ranks=ranks, special_tokens={t["content"]: t["id"] for t in j["added_tokens"]})
    data = open(corpus, "rb").read()
    text = data.decode("utf-8")
    best, cpu, n = timed(lambda: len(enc.encode_ordinary(text)), repeat)
    report("tiktoken", tiktoken.__version__, 1, len(data), best, cpu, n, "single")
    docs = chunks(text)
    for t in threads_list:
        best, cpu, n = timed(lambda: sum(map(len, enc.encode_ordinary_batch(docs, num_threads=t))), repeat)
        report("tiktoken", tiktoken.__version__, t, len(data), best, cpu, n, "batch")


def main():
    corpus, repeat, tokjson, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    if len(sys.argv) > 5 and sys.argv[5] == "--hf-child":
        hf_child(corpus, repeat, tokjson, int(threads))
        return
    threads_list = [int(t) for t in threads.split(",")]
    try:
        import tokenizers  # noqa: F401
        for t in threads_list:
            env = dict(os.environ, RAYON_NUM_THREADS=str(t), TOKENIZERS_PARALLELISM="true")
            subprocess.run([sys.executable, __file__, corpus, str(repeat), tokjson, str(t), "--hf-child"],
                           env=env, check=True)
    except ImportError:
        print("peers_py.py: Hugging Face tokenizers is not importable; skipped", file=sys.stderr)
    try:
        tiktoken_runs(corpus, repeat, tokjson, threads_list)
    except ImportError:
        print("peers_py.py: tiktoken is not importable; skipped", file=sys.stderr)


if __name__ == "__main__":
    main()
