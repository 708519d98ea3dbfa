#!/bin/sh
# Runs the libFuzzer targets built by `make fuzz`, one after the other, each for a bounded time.
#   sh fuzz/run.sh BUILD SECONDS [TARGET...]      (make fuzz-run FUZZ_SECONDS=N [FUZZ_TARGETS=...])
# TARGET is a name like modelfile (fuzz/fuzz_modelfile.c); without any, every target built in
# BUILD/fuzz. Each target reads its committed seeds (fuzz/corpus/NAME, never written) and keeps
# what it finds in BUILD/fuzz/corpus/NAME, so later runs start from there; fuzz/NAME.dict is its
# dictionary when present. FUZZ_ARGS adds libFuzzer options (e.g. FUZZ_ARGS=-runs=1000000).
# Prints each target's last status line (executions, cov, ft, corpus); on a finding prints the
# end of its log and the crashing input's path (BUILD/fuzz/artifacts/NAME/) and exits 1.
set -eu
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: sh fuzz/run.sh BUILD SECONDS [TARGET...]" >&2; exit 2; }
build=$1
seconds=$2
shift 2
if [ $# -eq 0 ]; then
    for bin in "$build"/fuzz/fuzz_*; do
        [ -x "$bin" ] && set -- "$@" "${bin##*/fuzz_}"
    done
fi
[ $# -gt 0 ] || { echo "fuzz/run.sh: no fuzz targets in $build/fuzz: run make fuzz" >&2; exit 2; }

failed=0
for t in "$@"; do
    bin=$build/fuzz/fuzz_$t
    [ -x "$bin" ] || { echo "fuzz/run.sh: no target $bin" >&2; exit 2; }
    work=$build/fuzz/corpus/$t
    artifacts=$build/fuzz/artifacts/$t/
    log=$build/fuzz/$t.log
    mkdir -p "$work" "$artifacts"
    # a parser must not take more than 10 s, nor allocate more than 64 MiB, for a few KB of input
    set -- -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=64 \
        -print_final_stats=1 \
        -artifact_prefix="$artifacts"
    [ -f "fuzz/$t.dict" ] && set -- "$@" -dict="fuzz/$t.dict"
    # the flag parser prints its usage errors (it is the CLI's): silence the target's output
    [ "$t" = flags ] && set -- "$@" -close_fd_mask=3
    # shellcheck disable=SC2086 # FUZZ_ARGS is a list of options
    if "$bin" "$@" ${FUZZ_ARGS:-} "$work" "fuzz/corpus/$t" >"$log" 2>&1; then
        line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1)
        done_line=$(grep -E '^Done [0-9]+ runs' "$log" | tail -n 1)
        echo "fuzz_$t: ${line:-$(tail -n 1 "$log")} (${done_line:-no summary})"
    else
        echo "fuzz_$t: FINDING (log $log, input in $artifacts):"
        tail -n 60 "$log"
        failed=1
    fi
done
exit $failed
