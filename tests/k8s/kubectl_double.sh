#!/usr/bin/env bash
# TEST DOUBLE for kubectl — not a cluster and not a fake API server. It records each argv (one line,
# shell-quoted) to $KDOUBLE_DIR/argv.log, saves stdin of `apply`, and prints canned answers from
# files in $KDOUBLE_DIR, so tests/k8s/kubectl_test.cpp can check what llmtrain asks kubectl to do
# and that kubectl's errors and exit codes come back unchanged. Nothing here says the commands would
# work against a real API server (docs/kubernetes.md: what was verified and what was not).
set -u
d=${KDOUBLE_DIR:?}
printf '%q ' "$@" >>"$d/argv.log"
echo >>"$d/argv.log"
if [ -f "$d/fail" ]; then            # first line: exit code; rest: stderr text
  code=$(head -1 "$d/fail"); tail -n +2 "$d/fail" >&2; exit "$code"
fi
# Drop the global flags llmtrain puts first.
while [ $# -gt 0 ]; do
  case "$1" in --namespace|--context) shift 2 ;; *) break ;; esac
done
case "$1" in
  apply) n=$(ls "$d" | grep -c '^applied') ; cat >"$d/applied.$n.yaml"; echo "applied ($n)" ;;
  get)
    case "$2" in
      pods) cat "$d/pods.json" ;;
      pod) cat "$d/pod.json" ;;
      *) cat "$d/workload.json" ;;
    esac ;;
  logs)
    if [ "$2" = "--timestamps" ]; then cat "$d/logs.$3"; else sed 's/^[^ ]* //' "$d/logs.$3"; fi ;;
  exec) echo '{"step":120,"loss":3.25}' ;;
  cp) mkdir -p "$5" && echo '{"final_step":300}' >"$5/summary.json" ;;
  wait) echo "pod/$3 condition met" ;;
  delete) echo "deleted" ;;
  *) echo "kubectl double: unexpected command $*" >&2; exit 99 ;;
esac
