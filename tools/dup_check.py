#!/usr/bin/python3
"""Duplicated code in src/ and tests/: token windows that occur twice, after normalisation.

Each C++/CUDA file is cut into tokens with comments, #include lines and whitespace dropped; identifiers
become ID (keywords stay), numbers NUM, string and character literals STR, so a block copied and then
renamed still matches. Every window of --window tokens is hashed (a rolling hash, verified token by
token); two equal windows start a match, extended forward as far as the tokens agree, and a match of at
least --window tokens spanning at least --min-lines lines in each copy is reported as
    fileA:first-last ~ fileB:first-last (N tokens)
Runs that repeat a unit shorter than a third of their length (lists of declarations, table rows) and
windows that occur more than 64 times (generic patterns) are not reported.

  dup_check.py [--root DIR] [--window N] [--min-lines N]           list every duplicated region
  dup_check.py --check [--known FILE]                               exit 1 when
     - a file pair named in KEPT_APART (copies merged behind shared helpers) has a duplicated region that
       matches the entry's anchor (the listed copy), or
     - a file pair not in the known list (tools/dup_known.txt: pairs duplicated when the list was written,
       to be merged over time) has one; a known pair that no longer has one is printed as "resolved"
       so the list can shrink.
  dup_check.py --self-test                                          the detector on planted sources
"""
import argparse
import os
import re
import sys
import tempfile

EXTENSIONS = (".cpp", ".h", ".cu", ".cuh", ".cc", ".hpp")
FOLDERS = ("src", "tests")

# Copies merged behind shared helpers, which must not come back: (file, file, anchor). Paths are relative to
# the repository root; the same file twice means copies inside it. With an anchor (a regex), only a
# duplicated region whose text matches it in either copy counts (the listed copy, not the file's other
# small repeats); None: every duplicated region between the two files counts.
KEPT_APART = [
    # the multi-head and grouped-query flash backward kernels
    ("src/kernels/cuda/flash_backward.cuh", "src/kernels/cuda/flash_backward_gqa.cuh", None),
    # the dk/dv warp loop of the simple attention backward, written twice
    ("src/kernels/cuda/attention.cu", "src/kernels/cuda/attention.cu", r"tb < T_; tb \+= 32"),
    # the backward graph's dV and dK products with their grouped-query reduction
    ("src/kernels/cuda/cudnn_attention.cpp", "src/kernels/cuda/cudnn_attention.cpp", r"CUDNN_REDUCE_TENSOR_ADD"),
    # the 16-byte load/store helpers
    ("src/kernels/cuda/rope.cu", "src/kernels/cuda/swiglu.cu", None),
    # the sampling flags (cli/sampling_options.h)
    ("src/cli/chat.cpp", "src/cli/generate.cpp", None),
    # the backwards' per-device partials buffer (kernels/cuda/partial_scratch.cuh)
    ("src/kernels/cuda/head_rmsnorm.cu", "src/kernels/cuda/rmsnorm_backward_kernels.cuh", None),
    # the unfused column-sum pass (kernels/ops_check.h add_column_sums_cuda)
    ("src/kernels/ops.cpp", "src/kernels/ops_attention.cpp", None),
    # float upload/download of device tensors (tests/kernels/device_floats.h)
    ("tests/kernels/case_runner.cpp", "tests/kernels/cuda_conv_test.cpp", None),
    # the blocks' activation layout (models/block_layout.h)
    ("src/models/attention_block.cpp", "src/models/mlp_block.cpp", None),
    ("src/models/attention_block.h", "src/models/mlp_block.h", None),
    # Parquet's scalar field readers (read_scalar)
    ("src/data/tables/parquet_meta.cpp", "src/data/tables/parquet_meta.cpp", r"read_i32|read_i64|read_binary"),
    # the model tests' error measures (tests/support/error_measures.h) and small configs (small_configs.h)
    ("tests/models/lm_head_cases.h", "tests/models/lora_model_test.cpp", None),
    ("tests/models/gpt2_decode_test.cpp", "tests/models/llama_test.cpp", None),
    # the tokenizers' reference corpus and ids (tests/data/tokenizer_corpus.h), UTF-8 text (utf8_append.h)
    ("tests/data/tokenizer_llama3_test.cpp", "tests/data/tokenizer_reference_test.cpp", None),
    ("tests/data/tokenizer_reference_test.cpp", "tests/data/tokenizer_test.cpp", None),
    # a shell command's status and output (tests/support/shell.h)
    ("tests/data/chat_cli_test.cpp", "tests/data/hf_chat_test.cpp", None),
    ("tests/data/chat_cli_test.cpp", "tests/data/tokenizer_cli_test.cpp", None),
    ("tests/data/hf_chat_test.cpp", "tests/data/tokenizer_cli_test.cpp", None),
    # the launch tests' run directory (tests/launch/tiny_run_dir.h)
    ("tests/launch/launch_train_test.cpp", "tests/launch/torchrun_train_test.cpp", None),
    # the reference ops' LayerNorm statistics and RoPE head loop (ref::layernorm_stats, ref::for_each_rope_head)
    ("tests/kernels/ref_ops.h", "tests/kernels/ref_ops.h", r"sqrt\(v \+ eps\)|h < NH \+ KV"),
    # the CUDA tests' device tensor (tests/kernels/device_tensor.h)
    ("tests/kernels/cuda_conv_test.cpp", "tests/kernels/cuda_family_ops_test.cpp", None),
]

KEYWORDS = set("""
alignas alignof auto bool break case catch char char16_t char32_t char8_t class const consteval constexpr
constinit const_cast continue co_await co_return co_yield decltype default delete do double dynamic_cast else
enum explicit export extern false float for friend goto if inline int long mutable namespace new noexcept
nullptr operator private protected public register reinterpret_cast requires return short signed sizeof
static static_assert static_cast struct switch template this thread_local throw true try typedef typeid
typename union unsigned using virtual void volatile wchar_t while
__global__ __device__ __host__ __shared__ __forceinline__ __restrict__
""".split())

TOKEN = re.compile(
    r"""(?P<ws>\s+)
      | (?P<comment>//[^\n]*|/\*.*?\*/)
      | (?P<pre>\#[ \t]*(?:include|pragma)[^\n]*)
      | (?P<raw>R"(?P<delim>[^()\\\s]{0,16})\(.*?\)(?P=delim)")
      | (?P<str>(?:u8|u|U|L)?"(?:\\.|[^"\\\n])*")
      | (?P<chr>(?:u8|u|U|L)?'(?:\\.|[^'\\\n])+')
      | (?P<num>\.?[0-9](?:[eEpP][+-]|[0-9A-Za-z_.'])*)
      | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<op>::|->\*?|<<=?|>>=?|[-+*/%&|^!=<>]=|&&|\|\||\+\+|--|\.\.\.|.)
    """, re.S | re.X)


def tokenize(text):
    """[(token, line)] with comments, #include/#pragma lines and whitespace dropped."""
    out, line = [], 1
    for m in TOKEN.finditer(text):
        kind, s = m.lastgroup, m.group()
        if kind == "delim":
            kind = "raw"
        if kind in ("id",):
            out.append((s if s in KEYWORDS else "ID", line))
        elif kind in ("str", "raw", "chr"):
            out.append(("STR", line))
        elif kind == "num":
            out.append(("NUM", line))
        elif kind == "op":
            out.append((s, line))
        line += s.count("\n")
    return out


def source_files(root):
    for folder in FOLDERS:
        for d, dirs, files in os.walk(os.path.join(root, folder)):
            dirs[:] = sorted(x for x in dirs if x != "node_modules")  # installed packages are not ours
            for f in sorted(files):
                if f.endswith(EXTENSIONS):
                    p = os.path.join(d, f)
                    yield os.path.relpath(p, root)


def find_duplicates(root, files, window, min_lines):
    """[(fileA, a0, a1, fileB, b0, b1, ntokens)]: maximal equal token runs of at least `window` tokens."""
    ids, seq = {}, []  # all files' tokens as ints, one stream; position -> (file index, line)
    where, starts = [], []
    for fi, f in enumerate(files):
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            toks = tokenize(fh.read())
        starts.append(len(seq))
        for t, ln in toks:
            seq.append(ids.setdefault(t, len(ids) + 1))
            where.append((fi, ln))
    starts.append(len(seq))
    n = len(seq)
    if n < window:
        return []
    mod, base = (1 << 61) - 1, 1_000_003
    top = pow(base, window - 1, mod)
    buckets = {}
    h = 0
    file_end = {}
    for fi in range(len(files)):
        for p in range(starts[fi], starts[fi + 1]):
            file_end[p] = starts[fi + 1]
    # Rolling hash over each file separately (a window never spans two files).
    for fi in range(len(files)):
        lo, hi = starts[fi], starts[fi + 1]
        if hi - lo < window:
            continue
        h = 0
        for p in range(lo, lo + window):
            h = (h * base + seq[p]) % mod
        for p in range(lo, hi - window + 1):
            buckets.setdefault(h, []).append(p)
            if p + window < hi:
                h = ((h - seq[p] * top) * base + seq[p + window]) % mod
    found = []
    for positions in buckets.values():
        if len(positions) < 2 or len(positions) > 64:  # > 64 copies: a generic pattern, not a copied block
            continue
        for i in range(len(positions)):
            for j in range(i + 1, len(positions)):
                p, q = positions[i], positions[j]
                # Only the start of a maximal run: the previous tokens differ (or a file starts).
                if p > 0 and q > 0 and where[p - 1][0] == where[p][0] and where[q - 1][0] == where[q][0] \
                        and seq[p - 1] == seq[q - 1]:
                    continue
                if seq[p:p + window] != seq[q:q + window]:
                    continue  # a hash collision
                k = window
                limit = min(file_end[p] - p, file_end[q] - q)
                if where[p][0] == where[q][0]:
                    limit = min(limit, q - p)  # copies inside one file must not overlap
                while k < limit and seq[p + k] == seq[q + k]:
                    k += 1
                if k < window or periodic(seq[p:p + k]):
                    continue
                fa, a0 = where[p]
                a1 = where[p + k - 1][1]
                fb, b0 = where[q]
                b1 = where[q + k - 1][1]
                if a1 - a0 + 1 < min_lines or b1 - b0 + 1 < min_lines:
                    continue
                found.append((files[fa], a0, a1, files[fb], b0, b1, k))
    found.sort()
    return found


def periodic(run):
    """True for a run that repeats a unit shorter than a third of it (a list of declarations or table rows
    of the same shape): such runs match themselves shifted by a row, which is not a copied block."""
    for d in range(1, len(run) // 3 + 1):
        if run[d:] == run[:-d]:
            return True
    return False


def pair_key(a, b):
    return tuple(sorted((a, b)))


def read_known(path):
    known = set()
    if os.path.exists(path):
        with open(path) as fh:
            for raw in fh:
                line = raw.split("#", 1)[0].strip()
                if line:
                    a, b = line.split()
                    known.add(pair_key(a, b))
    return known


def region_text(root, d):
    """The text of both copies of a duplicated region."""
    out = []
    for f, first, last in ((d[0], d[1], d[2]), (d[3], d[4], d[5])):
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            out += fh.read().split("\n")[first - 1:last]
    return "\n".join(out)


def check(dups, known, root=None, kept_apart=None):
    """(messages, ok)."""
    apart = {pair_key(a, b): anchor for a, b, anchor in (KEPT_APART if kept_apart is None else kept_apart)}
    by_pair = {}
    for d in dups:
        by_pair.setdefault(pair_key(d[0], d[3]), []).append(d)
    msgs, ok = [], True
    broken = set()
    for pair in sorted(by_pair):
        if pair in apart:
            anchor = apart[pair]
            for d in by_pair[pair]:
                if anchor is None or re.search(anchor, region_text(root, d)):
                    ok = False
                    broken.add(pair)
                    msgs.append("kept apart, duplicated: " + fmt(d))
                elif pair in known:
                    msgs.append("known repeat in a kept-apart pair, not the listed copy: " + fmt(d))
                else:
                    ok = False
                    msgs.append("new duplicate: " + fmt(d))
        elif pair not in known:
            ok = False
            msgs += ["new duplicate: " + fmt(d) for d in by_pair[pair]]
    for pair in sorted(apart):
        if pair not in broken:
            msgs.append(f"kept apart, ok: {pair[0]} ~ {pair[1]}")
    for pair in sorted(known - set(by_pair)):
        msgs.append(f"resolved (remove from the known list): {pair[0]} {pair[1]}")
    return msgs, ok


def fmt(d):
    return f"{d[0]}:{d[1]}-{d[2]} ~ {d[3]}:{d[4]}-{d[5]} ({d[6]} tokens)"


PLANTED = """
int accumulate_rows(const float* x, float* out, int rows, int cols) {
    for (int r = 0; r < rows; ++r) {
        float s = 0.0f;
        for (int c = 0; c < cols; ++c) s += x[r * cols + c] * 0.5f;
        if (s > 1.0f) s = 1.0f;
        out[r] = s;
    }
    return rows * cols;
}
"""
DISTINCT = """
#include <string>
std::string greet(const std::string& who) {
    std::string s = "hello, " + who;
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
}
"""


def self_test():
    """The detector finds a renamed copy, and nothing between distinct files: exit 1 otherwise."""
    renamed = PLANTED.replace("accumulate_rows", "sum_rows").replace("out", "dst").replace("0.5f", "0.25f")
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "src"))
        for name, text in (("a.cpp", "// a\n" + PLANTED), ("b.cu", "/* b */\n\n" + renamed),
                           ("c.cpp", DISTINCT)):
            with open(os.path.join(root, "src", name), "w") as fh:
                fh.write(text)
        files = list(source_files(root))
        dups = find_duplicates(root, files, window=40, min_lines=5)
        pairs = {pair_key(d[0], d[3]) for d in dups}
        failures = []
        if pair_key("src/a.cpp", "src/b.cu") not in pairs:
            failures.append("the renamed copy in src/b.cu was not found")
        if any("src/c.cpp" in p for p in pairs):
            failures.append("src/c.cpp, which copies nothing, was reported")
        d = [x for x in dups if pair_key(x[0], x[3]) == pair_key("src/a.cpp", "src/b.cu")]
        if d and (d[0][1], d[0][4]) != (3, 4):
            failures.append(f"the copy's first lines are {d[0][1]} and {d[0][4]}, expected 3 and 4")
        msgs, ok = check(dups, known=set(), root=root, kept_apart=[])
        if ok:
            failures.append("--check passed with an unknown duplicated pair")
        msgs, ok = check(dups, known={pair_key("src/a.cpp", "src/b.cu")}, root=root, kept_apart=[])
        if not ok:
            failures.append("--check failed although the only pair is known: " + "; ".join(msgs))
        msgs, ok = check(dups, known=set(), root=root, kept_apart=[("src/a.cpp", "src/b.cu", r"s \+= x")])
        if ok:
            failures.append("--check passed a kept-apart pair whose copy matches its anchor")
        msgs, ok = check(dups, known=set(), root=root, kept_apart=[("src/a.cpp", "src/b.cu", r"no such text")])
        if ok:
            failures.append("--check passed an unknown repeat in a kept-apart pair")
        msgs, ok = check(dups, known={pair_key("src/a.cpp", "src/b.cu")}, root=root,
                         kept_apart=[("src/a.cpp", "src/b.cu", r"no such text")])
        if not ok:
            failures.append("--check failed a known repeat that the kept-apart anchor does not match")
    for f in failures:
        print("dup_check self-test: " + f)
    print("dup_check self-test: " + ("FAILED" if failures else "ok"))
    return 1 if failures else 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.dirname(here), help="the repository (default: this script's)")
    ap.add_argument("--window", type=int, default=100, help="tokens a duplicated region has at least")
    ap.add_argument("--min-lines", type=int, default=8, help="lines each copy spans at least")
    ap.add_argument("--check", action="store_true", help="fail on kept-apart or unknown duplicated pairs")
    ap.add_argument("--known", default=os.path.join(here, "dup_known.txt"), help="the known pairs' list")
    ap.add_argument("--self-test", action="store_true", help="run the detector on planted sources")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    files = list(source_files(a.root))
    if not files:
        print(f"dup_check: no source files under {a.root}/src or {a.root}/tests", file=sys.stderr)
        return 2
    dups = find_duplicates(a.root, files, a.window, a.min_lines)
    if not a.check:
        for d in dups:
            print(fmt(d))
        print(f"{len(dups)} duplicated regions in {len(files)} files (window {a.window} tokens)")
        return 0
    msgs, ok = check(dups, read_known(a.known), root=a.root)
    for m in msgs:
        print(m)
    print(f"dup_check: {'ok' if ok else 'FAILED'} ({len(dups)} duplicated regions in {len(files)} files)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
