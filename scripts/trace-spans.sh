#!/bin/sh
# Mean time per step of one kind of span in the Chrome traces `vkgpt train --trace FILE` writes
# (FILE.rank<N>, one event a line), over steps FIRST to LAST, for each rank's file given:
#   scripts/trace-spans.sh KIND FIRST LAST FILE.rank0 [FILE.rank1 ...]
#   e.g. scripts/trace-spans.sh allreduce 2 6 /tmp/ppnet/flat.json.rank*
# KIND is a span kind (forward, backward, weight, send, recv, allreduce, optimizer). Prints per
# file the mean milliseconds per step and each step's sum.
set -eu
[ $# -ge 4 ] || { echo "usage: scripts/trace-spans.sh KIND FIRST LAST FILE..." >&2; exit 2; }
kind=$1 first=$2 last=$3
shift 3
for f in "$@"; do
    awk -v kind="$kind" -v first="$first" -v last="$last" -v file="$f" '
        index($0, "\"cat\": \"" kind "\"") {
            dur = $0; sub(/.*"dur": /, "", dur); sub(/,.*/, "", dur)
            st = $0; sub(/.*"step": /, "", st); sub(/[,}].*/, "", st)
            if (st + 0 >= first && st + 0 <= last) sum[st + 0] += dur / 1000.0
        }
        END {
            total = 0; line = ""
            for (s = first; s <= last; s++) { total += sum[s]; line = line sprintf(" %.0f", sum[s]) }
            printf "%s: %s %.1f ms per step (steps %d-%d:%s)\n", file, kind,
                   total / (last - first + 1), first, last, line
        }' "$f"
done
