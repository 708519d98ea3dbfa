#!/bin/sh
# The README's two commands on a fresh Debian 12 machine:
#   sh quickstart.sh train   install what is missing, build, train the default model
#   sh quickstart.sh test    install what is missing, build, run the test suite
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
sh scripts/install-deps.sh --test
exec make "$@"
