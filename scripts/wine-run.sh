#!/bin/sh
# Run one Windows program under Wine: CMAKE_CROSSCOMPILING_EMULATOR of cmake/mingw-w64.cmake, so
# ctest runs every test of a Windows build through it. Quiet Wine (WINEDEBUG=-all unless set), its
# own prefix (WINEPREFIX, else DEPS/../wineprefix, created on first use), the dependency prefix's
# bin/ on WINEPATH. Vulkan under Wine 8.0 needs an X display: scripts/windows-test.sh starts Xvfb
# and sets DISPLAY; without one, Vulkan's instance fails (VK_ERROR_INITIALIZATION_FAILED), so this
# says so before running.
# Usage: scripts/wine-run.sh [--deps DIR] PROGRAM.exe [ARGS...]
set -eu

deps=""
if [ "${1:-}" = "--deps" ]; then
    deps="$2"
    shift 2
fi
[ $# -ge 1 ] || { echo "wine-run: usage: wine-run.sh [--deps DIR] PROGRAM.exe [ARGS...]" >&2; exit 2; }
command -v wine >/dev/null 2>&1 || {
    echo "wine-run: no 'wine' command (Debian: apt-get install wine wine64; scripts/windows-deps.sh)" >&2
    exit 127
}
if [ -z "${WINEPREFIX:-}" ]; then
    [ -n "$deps" ] || { echo "wine-run: set WINEPREFIX or pass --deps DIR" >&2; exit 2; }
    WINEPREFIX="$(dirname "$deps")/wineprefix"
fi
export WINEPREFIX
export WINEDEBUG="${WINEDEBUG:--all}"
# No Mono or Gecko installer dialogs when the prefix is created.
export WINEDLLOVERRIDES="${WINEDLLOVERRIDES:-mscoree,mshtml=}"
if [ -n "$deps" ] && [ -d "$deps/bin" ]; then
    bin_dir=$(echo "$deps/bin" | sed 's|/|\\|g')
    WINEPATH="${WINEPATH:+$WINEPATH;}Z:$bin_dir"
    export WINEPATH
fi
if [ -z "${DISPLAY:-}" ]; then
    echo "wine-run: warning: no DISPLAY; Vulkan under Wine needs an X server (make windows-test starts Xvfb)" >&2
fi
exec wine "$@"
