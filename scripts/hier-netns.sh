#!/usr/bin/env bash
# Two "hosts" of two ranks each on one machine: Linux network namespaces joined by a veth pair
# (optionally rate-limited with tc), as in scripts/dp-netns.sh. Runs the multi-host allreduce
# benchmark (bench/allreduce/comm_bench.c, started with torchrun-style variables) twice: with the
# transport's choice (two levels: shared memory in each host, a ZeroMQ ring per local slice
# between the hosts) and with --zmq (flat ZeroMQ over all four ranks: the all-to-all engine, which
# the transport picks below ring_min_ranks) and, except with --check, with --zmq --ring-min 2 (the
# flat ring). With --check it also runs two-level broadcast and allgather, and allreduce,
# broadcast and allgather with 3 ranks in A and 1 in B (hosts of unequal sizes). Each run checks
# every result (#wrong) and fails on any wrong element.
#
#   scripts/hier-netns.sh [--rate 1gbit] [--port 29611] [--check] [-- comm_bench options]
#
# --check (ctest): small sizes, and exit 77 (skipped) with a message where namespaces cannot be
# created (no root / CAP_SYS_ADMIN); without it a skip exits 0, like dp-netns.sh.
# Ranks 0, 1 run in namespace A at 10.77.1.1 (rank 0 is the master), ranks 2, 3 in B at 10.77.1.2
# (3 + 1: ranks 0-2 in A).
set -euo pipefail
BENCH=${BENCH:-build/transport/vkg_comm_bench}
RATE=""
PORT=29611
CHECK=0
while [ $# -gt 0 ]; do
    case "$1" in
    --rate) RATE=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --check) CHECK=1; shift ;;
    --) shift; break ;;
    *) echo "hier-netns: unknown option $1 (options before --: --rate R, --port P, --check)" >&2
       exit 2 ;;
    esac
done
[ -x "$BENCH" ] || { echo "hier-netns: $BENCH is not built (set BENCH=path)" >&2; exit 2; }
SKIP=0
[ "$CHECK" = 1 ] && SKIP=77
A=vkhA$$ B=vkhB$$ VA=vha$$ VB=vhb$$
if ! ip netns add "$A" 2>/dev/null; then
    echo "hier-netns: skipped: cannot create network namespaces here (needs root or CAP_SYS_ADMIN)"
    exit "$SKIP"
fi
cleanup() {
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
}
trap cleanup EXIT
if ! ip netns add "$B" || ! ip link add "$VA" type veth peer name "$VB" 2>/dev/null; then
    echo "hier-netns: skipped: cannot create a veth pair here"
    exit "$SKIP"
fi
ip link set "$VA" netns "$A"
ip link set "$VB" netns "$B"
ip -n "$A" addr add 10.77.1.1/24 dev "$VA"
ip -n "$B" addr add 10.77.1.2/24 dev "$VB"
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set "$VA" up
ip -n "$B" link set "$VB" up
if [ -n "$RATE" ]; then
    ip netns exec "$A" tc qdisc add dev "$VA" root tbf rate "$RATE" burst 1mb latency 100ms
    ip netns exec "$B" tc qdisc add dev "$VB" root tbf rate "$RATE" burst 1mb latency 100ms
    echo "hier-netns: veth link limited to $RATE each way"
fi
ARGS=("$@")
[ "$CHECK" = 1 ] && [ ${#ARGS[@]} -eq 0 ] && ARGS=(--min 4 --max 4M --iters 3 --warmup 1)

run_job() { # port label split [comm_bench options]: ranks below split in A, the rest in B
    local port=$1 label=$2 split=$3 job pids=() rc=0
    shift 3
    job=$(printf '%016x' $(( ($$ << 20) ^ port ^ $(date +%s) )))
    for r in 0 1 2 3; do
        local ns=$A lr=$r
        [ "$r" -ge "$split" ] && ns=$B lr=$((r - split))
        ip netns exec "$ns" env RANK="$r" WORLD_SIZE=4 LOCAL_RANK=$lr \
            MASTER_ADDR=10.77.1.1 MASTER_PORT="$port" VKG_JOB_ID="$job" VKG_COMM_TIMEOUT=60 \
            "$BENCH" "${ARGS[@]}" "$@" > >(sed -u "s/^/[$label] /") 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    return "$rc"
}
rc=0
run_job "$PORT" "two levels" 2 || rc=1
run_job $((PORT + 7)) "flat zmq" 2 --zmq || rc=1
[ "$CHECK" = 1 ] || run_job $((PORT + 14)) "flat ring" 2 --zmq --ring-min 2 || rc=1
if [ "$CHECK" = 1 ]; then # the other collectives and hosts of unequal sizes, two levels
    run_job $((PORT + 21)) "two levels broadcast" 2 --coll broadcast || rc=1
    run_job $((PORT + 28)) "two levels allgather" 2 --coll allgather || rc=1
    for coll in allreduce broadcast allgather; do
        run_job $((PORT + 35)) "3+1 $coll" 3 --coll "$coll" || rc=1
        PORT=$((PORT + 7))
    done
fi
sleep 0.2 # let the prefixing finish
if [ "$rc" != 0 ]; then echo "hier-netns: FAILED"; exit 1; fi
echo "hier-netns: ok"
