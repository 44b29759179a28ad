#!/usr/bin/env bash
# Builds llmtrain's default training corpus, OUTDIR (default data/corpus), from Debian packages:
# the King James Bible (bible-kjv, bible-kjv-text) and the plain fortune files (fortunes, fortunes-min).
# The text is the same as the reference corpus's (one verse per line as `bible -f` prints it, then the
# fortune files as they are); the layout makes documents explicit so validation holds out whole ones:
#   OUTDIR/bible/NN_<Book>.txt     one file per book, its chapters separated by lines of '%'
#   OUTDIR/fortunes/<name>.txt     one file per fortune file, its records separated by lines of '%'
# `llmtrain data prepare --doc-separator %` then reads every chapter and every fortune as one document
# (1,189 chapters + ~15,200 fortunes). docs/data.md describes it. Writes OUTDIR/.complete last.
set -euo pipefail

out="${1:-data/corpus}"
fortune_dir=/usr/share/games/fortunes

if ! command -v bible >/dev/null 2>&1 || [ ! -r /usr/lib/bible.data ]; then
  echo "make_corpus.sh: the 'bible' program (Debian packages bible-kjv, bible-kjv-text) is missing;" \
    "run 'make setup'" >&2
  exit 1
fi
if ! dpkg-query -W -f='${Status}' fortunes fortunes-min 2>/dev/null | grep -q "install ok installed"; then
  echo "make_corpus.sh: Debian packages fortunes and fortunes-min are needed; run 'make setup'" >&2
  exit 1
fi

# Build beside the target and swap it in, so an interrupted run never leaves a half corpus behind.
tmp="${out%/}.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp/bible" "$tmp/fortunes"
trap 'rm -rf "$tmp"' EXIT

# The Bible: `bible -f` (pretty-printing off) prints "Ge1:1 In the beginning ...", one verse a line.
# A change of book prefix starts a new file; a change of chapter within a book writes a '%' line.
bible -f Gen1:1-Rev22:21 </dev/null | LC_ALL=C awk -v dir="$tmp/bible" '
  {
    if (!match($0, /^[1-3]?[A-Za-z]+[0-9]+:/)) {
      print "make_corpus.sh: unexpected verse line: " $0 > "/dev/stderr"; exit 1
    }
    ref = substr($0, 1, RLENGTH - 1)
    match(ref, /^[1-3]?[A-Za-z]+/)
    book = substr(ref, 1, RLENGTH); chapter = substr(ref, RLENGTH + 1)
    if (book != cur_book) {
      if (file != "") close(file)
      n++; cur_book = book; cur_chapter = chapter
      file = sprintf("%s/%02d_%s.txt", dir, n, book)
    } else if (chapter != cur_chapter) {
      print "%" > file; cur_chapter = chapter
    }
    print > file
  }
  END { if (n != 66) { print "make_corpus.sh: expected 66 books, found " n > "/dev/stderr"; exit 1 } }'

# The fortune files: the data files of both packages (not the .dat indexes, not the links to
# other packages' files), copied byte for byte.
count=0
for f in $(dpkg -L fortunes fortunes-min | grep -E "^$fortune_dir/[^./]+\$" | LC_ALL=C sort -u); do
  [ -f "$f" ] || continue
  cp "$f" "$tmp/fortunes/$(basename "$f").txt"
  count=$((count + 1))
done
if [ "$count" -lt 40 ]; then
  echo "make_corpus.sh: expected about 43 fortune files in $fortune_dir, found $count" >&2
  exit 1
fi

cat > "$tmp/README.md" <<'README'
Default llmtrain corpus, built by scripts/make_corpus.sh from Debian's bible-kjv(-text) and
fortunes(-min). bible/: one file per book, chapters separated by '%' lines; fortunes/: the fortune
files, records separated by '%' lines. Prepare with `llmtrain data prepare --doc-separator %`.
README
date -u +%Y-%m-%dT%H:%M:%SZ > "$tmp/.complete"
rm -rf "$out"
mkdir -p "$(dirname "$out")"
mv "$tmp" "$out"
trap - EXIT
echo "make_corpus.sh: wrote $out ($(du -sb "$out" | cut -f1) bytes: 66 books, $count fortune files)" >&2
