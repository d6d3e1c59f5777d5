#!/usr/bin/env bash
# Debian packages the end-to-end tests need: Open MPI (mpirun, and mpicc to build mpi4py).
set -euo pipefail
if command -v mpirun >/dev/null && command -v mpicc >/dev/null; then
  exit 0
fi
source "$(dirname "$0")/apt.sh"
apt_get update -qq >&2
apt_get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev >&2
