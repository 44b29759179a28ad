#!/usr/bin/python3
"""The docs stand alone (docs/design.md is the design they cite) and comments say what the code does:
  1. docs/, README.md and src/ name no path outside the repository (../shared, /work/, DESIGN.md), and every
     relative Markdown link in docs/ and README.md resolves to a file in the repository;
  2. no issue numbers in src/ and tests/ (ISSUE: the word followed by a number, with or without "#") and no
     history phrases (HISTORY): comments say what the code does now;
  3. table rows in docs/ and README.md are under 120 characters (a wider table becomes a list, or narrower
     tables, or takes its long notes below it);
  4. lines of code are under 120 characters too: sources, scripts, build files and YAML in src/, tests/, tools/,
     bench/, scripts/, deploy/, cmake/, configs/ and web/src/ (C++: `.clang-format` wraps them), except the
     upstream Kubernetes schemas vendored under tests/k8s/schemas/ and the fixtures of tests/config/fixtures/.
Usage: standalone_test.py REPO   (exit 1 with one line per problem)
"""
import os
import re
import sys

OUTSIDE = re.compile(r"\.\./shared\b|/work/|\bDESIGN\.md\b")
ISSUE = re.compile(r"issue #?[0-9]+", re.I)
# Phrases that tell what the code did once rather than what it does. "no longer" and "any more" stay allowed:
# they describe state at run time ("a volume no longer mounted").
HISTORY = re.compile(r"before [A-Za-z-]+ (heads )?existed|\bas before\b|as (it was|they were) before|\bpreviously\b"
                     r"|\bformerly\b|\bused to (be|start|fall|block|add|show|wait|take|print|pass|fail|return)\b"
                     r"|\b(this|last|an earlier|the previous) session\b", re.I)
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")
MAX_ROW = 119
SOURCE_EXT = (".cpp", ".h", ".cu", ".cuh", ".txt", ".md", ".cmake", ".py", ".sh", ".mjs", ".js")
CODE_DIRS = ("src", "tests", "tools", "bench", "scripts", "deploy", "cmake", "configs", "web/src")
CODE_EXT = (".cpp", ".h", ".cu", ".cuh", ".cmake", ".py", ".sh", ".mjs", ".js", ".yaml", ".yml", "CMakeLists.txt")
# Not code: upstream CRD schemas kept byte for byte, and files a test compares with what the program writes.
NOT_CODE = ("tests/k8s/schemas/", "tests/config/fixtures/")


def files(root, top, exts):
    for d, dirs, names in os.walk(os.path.join(root, top)):
        # installed packages (setup.sh) and Python's caches are not ours
        dirs[:] = sorted(x for x in dirs if x not in ("node_modules", "__pycache__"))
        for n in sorted(names):
            if n.endswith(exts):
                yield os.path.relpath(os.path.join(d, n), root)


def comment_problems(where, line):
    out = []
    if ISSUE.search(line):
        out.append(f"{where}: an issue number in a comment: {ISSUE.search(line).group()}")
    if HISTORY.search(line):
        out.append(f"{where}: history, not what the code does: {HISTORY.search(line).group()}")
    return out


def long_code_lines(root):
    code = ["Makefile", "CMakeLists.txt"]
    for top in CODE_DIRS:
        code += [rel for rel in files(root, top, CODE_EXT) if not rel.startswith(NOT_CODE)]
    code += [rel for rel in files(root, "deploy", ("Containerfile", ".cuda")) if "Containerfile" in rel]
    out = []
    for rel in code:
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh.read().split("\n"), 1):
                if len(line) > MAX_ROW:
                    out.append(f"{rel}:{n}: a line of {len(line)} characters (at most {MAX_ROW})")
    return out


def main(root):
    problems = []
    docs = list(files(root, "docs", (".md",))) + ["README.md"]
    src = list(files(root, "src", SOURCE_EXT))
    tests = list(files(root, "tests", SOURCE_EXT))
    for rel in tests:  # comments of the tests: issue numbers and history only
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                problems += comment_problems(f"{rel}:{n}", line)
    for rel in docs + src:
        with open(os.path.join(root, rel), encoding="utf-8") as fh:
            lines = fh.read().split("\n")
        for n, line in enumerate(lines, 1):
            where = f"{rel}:{n}"
            if OUTSIDE.search(line):
                problems.append(f"{where}: names a path outside the repository: {OUTSIDE.search(line).group()}")
            if rel.startswith("src/"):
                problems += comment_problems(where, line)
                continue
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"[a-z]+:", target):
                    continue  # a URL
                path = os.path.normpath(os.path.join(root, os.path.dirname(rel), target))
                if not path.startswith(os.path.abspath(root) + os.sep) or not os.path.exists(path):
                    problems.append(f"{where}: the link {target} is not a file of the repository")
            if line.lstrip().startswith("|") and len(line) > MAX_ROW:
                problems.append(f"{where}: a table row of {len(line)} characters (at most {MAX_ROW}): make the "
                                "table a list or narrower tables, or move its long notes below it")
    problems += long_code_lines(root)
    for p in problems:
        print(p)
    print(f"standalone_test: {len(docs)} pages, {len(src) + len(tests)} source files, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(os.path.abspath(sys.argv[1])))
