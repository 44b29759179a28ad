#!/usr/bin/python3
"""Checks that a kernel change left the old kernels' code alone: for every .entry of OLD.ptx, finds an .entry of
NEW.ptx with the same body. Bodies are compared from their first '{' after normalising what changes without
changing the code: parameter names (<entry>_param_N -> PN), labels, .loc/.file lines, comments, the unnamed
namespace's hash (it depends on the file's path) and the names of function-local __shared__ arrays (they embed
the mangled kernel name, which a new template flag or parameter changes). The entry's parameter list itself is
not compared, so an added, unused parameter is allowed; the counts are printed.

Make the PTX of both trees with the release flags, e.g. for each of flash_attention, attention, rope:
  nvcc -DLLMT_HAVE_CUDNN_ATTENTION=1 -DLLMT_HAVE_FLASH_ATTENTION=1 -I<tree>/src -Ibuild/release/generated \\
       -O2 -DNDEBUG -arch=sm_90a -ptx --expt-relaxed-constexpr -std=c++17 -x cu <tree>/src/kernels/cuda/X.cu -o X.ptx
Usage: ptx_compare.py OLD.ptx NEW.ptx   (exit 1 if an old entry has no identical body in NEW)
"""
import re
import subprocess
import sys


def entries(path):
    txt = open(path).read()
    txt = re.sub(r'^\s*\.(loc|file)\b.*$', '', txt, flags=re.M)
    txt = re.sub(r'^\s*//.*$', '', txt, flags=re.M)
    txt = re.sub(r'_GLOBAL__N__[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]{8}', 'ANON', txt)
    txt = re.sub(r'_ZZ\w+E(\d+)([A-Za-z_]\w*)\b', r'SHARED_\2', txt)
    out = {}
    for m in re.finditer(r'^\.(?:visible\s+|weak\s+)?entry\s+(\S+)\((.*?)^\{(.*?)^\}', txt, flags=re.M | re.S):
        name, params, body = m.group(1), m.group(2), m.group(3)
        body = re.sub(re.escape(name) + r'_param_(\d+)', r'P\1', body)
        body = re.sub(r'\$L__\w+', 'L', body)
        body = re.sub(r'\n\s*\n', '\n', body).strip()
        out[name] = (body, params.count('.param'))
    return out


def demangle(name):
    try:
        return subprocess.run(['c++filt', name.replace('ANON', '_GLOBAL__N_1')], capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        return name


old, new = entries(sys.argv[1]), entries(sys.argv[2])
by_body = {}
for name, (body, n_params) in new.items():
    by_body.setdefault(body, []).append((name, n_params))
same = 0
for name, (body, n_params) in old.items():
    hit = by_body.get(body)
    if hit:
        same += 1
        print(f'same  {demangle(name)}\n   as {demangle(hit[0][0])} (parameters {n_params} -> {hit[0][1]})')
    else:
        print(f'DIFF  {demangle(name)}')
print(f'{same} of {len(old)} entries of {sys.argv[1]} have an identical body in {sys.argv[2]} ({len(new)} entries)')
sys.exit(0 if same == len(old) else 1)
