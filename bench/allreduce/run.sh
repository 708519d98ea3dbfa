#!/usr/bin/env bash
# Compare `vkgpt bench allreduce` with Open MPI's MPI_Allreduce on this machine, in one run: the
# same sizes, iterations and rank counts, float sum, busbw = algbw * 2(n-1)/n, slowest rank's time.
# Installs openmpi-bin and libopenmpi-dev with apt-get when mpicc or mpirun is missing, builds
# mpi_allreduce.c, and prints per rank count a table of busbw with the ratio vkgpt / Open MPI.
#
# Environment (defaults in brackets):
#   VKGPT       the vkgpt binary [<repo>/build/vkgpt; built with cmake when missing]
#   NS          rank counts ["2 3 4"]
#   TRANSPORTS  vkgpt transports ["shm zmq"]: shm = shared memory between the ranks through the
#               segment's slots (the default), shm-cma = the same with single-copy on
#               (VKG_COMM_CMA=1: process_vm_readv above its threshold where the kernel allows
#               it), shm-seg = buffers from vkg_comm_buffer_alloc in the segment's pools
#               (--in-segment), zmq = the ZeroMQ ring over ipc
#   MIN MAX     sizes [4K 256M]     ITERS WARMUP  [20 5]
#   BIND        1: pin rank r to CPU r mod ncpu for both (mpirun --bind-to core) [0: neither]
#   MPI_TUNED   1: also run Open MPI with glibc malloc tuned like vkgpt's process (no mmap, no
#               trim), so neither side pays page faults for re-allocated buffers [1]
#   REPEAT      run every measurement this many times and keep, per size, the best busbw (for
#               both sides alike; steadies figures on a shared machine) [1]
#   OUT         directory for the raw tables [a new /tmp/allreduce-bench-XXXXXX]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
VKGPT=${VKGPT:-$root/build/vkgpt}
NS=${NS:-"2 3 4"}
TRANSPORTS=${TRANSPORTS:-"shm zmq"}
MIN=${MIN:-4K}
MAX=${MAX:-256M}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
BIND=${BIND:-0}
MPI_TUNED=${MPI_TUNED:-1}
REPEAT=${REPEAT:-1}
OUT=${OUT:-$(mktemp -d /tmp/allreduce-bench-XXXXXX)}
mkdir -p "$OUT"

if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "run.sh: installing openmpi-bin libopenmpi-dev" >&2
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get install -y openmpi-bin libopenmpi-dev >&2 ||
        { $sudo apt-get update >&2 && $sudo apt-get install -y openmpi-bin libopenmpi-dev >&2; }
fi
mpicc -O2 -o "$OUT/mpi_allreduce" "$here/mpi_allreduce.c"

if [ ! -x "$VKGPT" ]; then
    cmake -S "$root" -B "$root/build" >&2
    cmake --build "$root/build" --target vkgpt_cli -j "$(nproc)" >&2
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# best OUTFILE CMD...: run CMD REPEAT times (raw tables OUTFILE.1, .2, ...) and write to OUTFILE,
# per size, the row with the highest busbw; #wrong is summed over the runs.
best() {
    local out=$1
    shift
    for ((r = 1; r <= REPEAT; r++)); do "$@" >"$out.$r"; done
    awk '/^#/ || NF < 8 { next }
        { w[$1] += $8; if (!($1 in bw) || $7 > bw[$1]) { bw[$1] = $7; row[$1] = $0 }
          if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
        END { for (i = 1; i <= n; i++) { s = order[i]; split(row[s], f, " "); f[8] = w[s]
                  line = f[1]; for (k = 2; k <= 8; k++) line = line " " f[k]; print line } }' \
        "$out".[0-9]* >"$out"
}
args=(--min "$MIN" --max "$MAX" --iters "$ITERS" --warmup "$WARMUP")
ncpu=$(nproc)

echo "# allreduce, float sum: busbw in GB/s; ratio = vkgpt / Open MPI (same run)"
echo "# $(uname -srm), $ncpu CPUs, $(mpirun --version 2>/dev/null | head -1), $(date -u '+%F %T UTC')"
echo "# vkgpt: $VKGPT; sizes $MIN..$MAX, iters $ITERS (fewer above 16 MiB), warmup $WARMUP, bind $BIND"
echo "# each figure: best of $REPEAT run(s); MPI+malloc = Open MPI with glibc mmap and trim off"
"$VKGPT" bench allreduce -n 1 --min 4 --max 4 --iters 1 --warmup 0 | grep "one core" || true
for n in $NS; do
    mpibind=(--bind-to none)
    vkbind=()
    if [ "$BIND" = 1 ]; then
        mpibind=(--bind-to core)
        vkbind=(--bind)
        [ "$n" -le "$ncpu" ] || mpibind=(--bind-to core:overload-allowed)
    fi
    best "$OUT/mpi-$n.txt" mpirun --oversubscribe "${mpibind[@]}" -np "$n" \
        "$OUT/mpi_allreduce" "${args[@]}"
    files=("$OUT/mpi-$n.txt")
    names=("MPI")
    if [ "$MPI_TUNED" = 1 ]; then
        best "$OUT/mpi-tuned-$n.txt" mpirun --oversubscribe "${mpibind[@]}" -np "$n" \
            -x GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967295 \
            "$OUT/mpi_allreduce" "${args[@]}"
        files+=("$OUT/mpi-tuned-$n.txt")
        names+=("MPI+malloc")
    fi
    for t in $TRANSPORTS; do
        case $t in
        shm-cma) run=(env VKG_COMM_CMA=1 "$VKGPT" bench allreduce --transport shm) ;;
        shm-seg) run=("$VKGPT" bench allreduce --transport shm --in-segment) ;;
        *) run=("$VKGPT" bench allreduce --transport "$t") ;;
        esac
        best "$OUT/vkgpt-$t-$n.txt" "${run[@]}" -n "$n" "${vkbind[@]}" "${args[@]}"
        files+=("$OUT/vkgpt-$t-$n.txt")
        names+=("$t")
    done
    echo
    echo "## $n ranks: busbw (GB/s), ratio = vkgpt busbw / Open MPI busbw, time (us)"
    # join the tables on the size column: time is field 5, busbw 7, #wrong 8
    awk -v names="${names[*]}" -v nmpi="$([ "$MPI_TUNED" = 1 ] && echo 2 || echo 1)" '
        BEGIN { nf = split(names, nm, " ") }
        FNR == 1 { f++ }
        /^#/ || NF < 8 { next }
        { bw[f, $1] = $7; us[f, $1] = $5; wrong[$1] += $8; if (f == 1) sizes[++ns] = $1 }
        END {
            h = "| size (B) |"; r = "|---:|"
            for (k = 1; k <= nf; k++) {
                h = h " " nm[k] " |"; r = r "---:|"
                if (k > nmpi)
                    for (m = 1; m <= nmpi; m++) { h = h " /" nm[m] " |"; r = r "---:|" }
            }
            for (k = 1; k <= nf; k++) { h = h " " nm[k] " us |"; r = r "---:|" }
            print h " #wrong |"; print r "---:|"
            for (i = 1; i <= ns; i++) {
                s = sizes[i]
                line = sprintf("| %d |", s)
                for (k = 1; k <= nf; k++) {
                    line = line sprintf(" %.2f |", bw[k, s])
                    if (k > nmpi)
                        for (m = 1; m <= nmpi; m++)
                            line = line sprintf(" %.2f |", bw[m, s] > 0 ? bw[k, s] / bw[m, s] : 0)
                }
                for (k = 1; k <= nf; k++)
                    line = line sprintf(" %.1f |", us[k, s])
                print line sprintf(" %d |", wrong[s])
            }
        }' "${files[@]}"
done
echo
echo "# raw tables: $OUT"
