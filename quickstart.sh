#!/bin/sh
# The README's two commands on a fresh Debian 12 machine:
#   sh quickstart.sh train   install what building and training need, build, train the default
#                            model (the test suite is not built)
#   sh quickstart.sh test    install that and the test tools too, build, run the test suite
# Extra arguments go to make (e.g. WERROR=ON). Needs root or sudo for apt-get.
set -eu
cd "$(dirname "$0")"
case "${1:-}" in
train | test) ;;
*)
    echo "usage: sh quickstart.sh train|test [make variables]" >&2
    exit 2
    ;;
esac
# training needs no test tools (cmocka, the validation layer, clang, clang-format, OpenBLAS)
if [ "$1" = test ]; then sh scripts/install-deps.sh --test; else sh scripts/install-deps.sh; fi
exec make "$@"
