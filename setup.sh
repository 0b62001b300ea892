#!/bin/sh
# Installs what parsim needs on Debian (when missing) and builds it.
#   ./setup.sh                 release build in build/
#   ./setup.sh sanitize        ASan + UBSan build in build-sanitize/
#   ./setup.sh mpi             MPI build (parsim sweep under mpirun) in build-mpi/;
#                              installs Open MPI only for this variant
set -eu
cd "$(dirname "$0")"
pkgs="build-essential cmake pkg-config libgsl-dev libconfig-dev libyajl-dev libcriterion-dev gnuplot-nox"
if [ "${1:-}" = "mpi" ]; then pkgs="$pkgs openmpi-bin libopenmpi-dev"; fi
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
if [ "${1:-}" = "sanitize" ]; then
  dir=build-sanitize; flags="-DPARSIM_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug"
elif [ "${1:-}" = "mpi" ]; then
  dir=build-mpi; flags="-DPARSIM_MPI=ON -DCMAKE_BUILD_TYPE=Release"
else
  dir=build; flags="-DCMAKE_BUILD_TYPE=Release"
fi
cmake -S . -B "$dir" $flags >/dev/null
cmake --build "$dir" -j "$(nproc)" >/dev/null
