#!/usr/bin/env bash
# Debian packages the end-to-end tests need: Open MPI (mpirun, and mpicc to build mpi4py).
set -euo pipefail
if command -v mpirun >/dev/null && command -v mpicc >/dev/null; then
  exit 0
fi
sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev >&2
