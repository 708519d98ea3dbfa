#!/bin/sh
# Install the Debian packages vkgpt needs to build and train, and with --test also what its test
# suite and tools need, on Debian 12 (bookworm). Non-interactive and idempotent: only missing
# packages are installed. Mesa's Vulkan drivers (lavapipe, the CPU device) come from
# bookworm-backports (Mesa 25, 4-6x faster compute than the stock Mesa 22.3); the suite is enabled
# by adding it to the Suites of the system's existing Debian source entry. Where that is
# impossible, the stock Mesa is used and a warning says so.
# Usage: scripts/install-deps.sh [--test] [--list]
#   --test   also the test suite's and tools' packages (cmocka, the validation layer, OpenBLAS for
#            bench ops, clang-format, clang with libFuzzer's runtime, mingw-w64's C compiler for
#            the platform layer's Windows sources, Python's pip) and, with pip for the user who
#            runs this script (--user; Debian's Python also needs --break-system-packages), the
#            pinned Python libraries tests/hf checks file formats against (safetensors, numpy),
#            and in a virtual environment of Debian's Python (~/.cache/vkgpt/hf-venv) the pinned
#            transformers that tests/hf checks models against, on Debian's CPU PyTorch
#   --list   print the packages (and Mesa's Vulkan drivers) on one line and install nothing
#            (VKGPT_DEPS_LIST=1 in the environment does the same, through quickstart.sh)
set -eu

# Building (CMake, the shader compiler and validator) and training (fortunes: make train's data)
PKGS="build-essential cmake pkg-config libvulkan-dev libvulkan-volk-dev libvulkan1 glslang-tools
      spirv-tools libzmq3-dev libsodium-dev libutf8proc-dev libpcre2-dev fortune-mod fortunes"
TEST_PKGS="libcmocka-dev vulkan-validationlayers libopenblas-dev clang-format clang
      libclang-rt-14-dev gcc-mingw-w64-x86-64-posix python3 python3-pip python3-venv
      python3-torch"
# The reference libraries of tests/hf (ctest safetensors_hf), pinned: a test that compares bits
# with a library must not change its verdict when the library does.
SAFETENSORS_VERSION=0.8.0
PY_TEST_PKGS="safetensors==$SAFETENSORS_VERSION numpy==2.2.6"
# transformers for tests/hf/hfmodel_check.py (ctest hfmodel_hf): the newest release that runs on
# Debian's CPU PyTorch (python3-torch, 1.13), pinned, in a virtual environment of Debian's own
# Python (whose the system's torch is), so that no other Python changes.
TRANSFORMERS_VERSION=4.44.2
HF_VENV="$HOME/.cache/vkgpt/hf-venv"
py=""
list="${VKGPT_DEPS_LIST:-}"
for a in "$@"; do
    case "$a" in
    --test)
        PKGS="$PKGS $TEST_PKGS"
        py=yes
        ;;
    --list) list=1 ;;
    *)
        echo "install-deps: unknown option '$a' (valid: --test, --list)" >&2
        exit 2
        ;;
    esac
done
if [ -n "$list" ]; then
    echo "install-deps: packages:" $PKGS mesa-vulkan-drivers
    [ -z "$py" ] || echo "install-deps: Python packages (pip --user):" $PY_TEST_PKGS \
        "; in $HF_VENV: transformers==$TRANSFORMERS_VERSION"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "install-deps: not root and no sudo; install these packages yourself: $PKGS" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
APT="$SUDO apt-get -y -q -o Dpkg::Use-Pty=0"

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
backports=""
if [ "$codename" = "bookworm" ]; then
    src=/etc/apt/sources.list.d/debian.sources
    if [ -f "$src" ] && grep -q "^Suites:.*bookworm-backports" "$src"; then
        backports=yes
    elif [ -f "$src" ] && grep -q "^Suites: bookworm bookworm-updates" "$src"; then
        $SUDO sed -i 's/^Suites: bookworm bookworm-updates\(.*\)$/Suites: bookworm bookworm-updates bookworm-backports\1/' "$src"
        backports=new
    else
        echo "install-deps: warning: no deb822 Debian source entry to add bookworm-backports to;" \
             "using the stock Mesa (lavapipe 4-6x slower on compute)" >&2
    fi
fi

missing=""
for p in $PKGS; do installed "$p" || missing="$missing $p"; done
mesa_old=yes
if installed mesa-vulkan-drivers; then
    v=$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers)
    dpkg --compare-versions "$v" ge 25 && mesa_old=""
fi
[ -n "$backports" ] || mesa_old="${mesa_old:+stock}"

if [ -n "$missing" ] || [ -n "$mesa_old" ] || [ "$backports" = new ]; then
    $APT update
fi
if [ -n "$missing" ]; then
    echo "install-deps: installing$missing"
    $APT install --no-install-recommends $missing
fi
if [ "$mesa_old" = yes ] && [ -n "$backports" ]; then
    echo "install-deps: installing Mesa's Vulkan drivers from bookworm-backports"
    $APT install --no-install-recommends -t bookworm-backports mesa-vulkan-drivers
elif [ "$mesa_old" = yes ] || [ "$mesa_old" = stock ]; then
    installed mesa-vulkan-drivers || $APT install --no-install-recommends mesa-vulkan-drivers
fi
if [ -n "$py" ] && ! python3 -c "import numpy, safetensors, sys
sys.exit(safetensors.__version__ != '$SAFETENSORS_VERSION')" 2>/dev/null; then
    echo "install-deps: installing Python's $PY_TEST_PKGS for $(id -un) (pip --user)"
    python3 -m pip install -q --disable-pip-version-check --user --break-system-packages \
        $PY_TEST_PKGS || python3 -m pip install -q --disable-pip-version-check --user $PY_TEST_PKGS
fi
if [ -n "$py" ] && ! "$HF_VENV/bin/python" -c "import torch, transformers, sys
sys.exit(transformers.__version__ != '$TRANSFORMERS_VERSION')" 2>/dev/null; then
    echo "install-deps: making $HF_VENV: transformers==$TRANSFORMERS_VERSION on Debian's PyTorch"
    rm -rf "$HF_VENV"
    /usr/bin/python3 -m venv --system-site-packages "$HF_VENV"
    "$HF_VENV/bin/pip" install -q --disable-pip-version-check "transformers==$TRANSFORMERS_VERSION"
fi
exit 0
