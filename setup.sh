#!/bin/sh
# Installs what parsim needs on Debian (when missing) and builds it.
#   ./setup.sh                 release build in build/
#   ./setup.sh sanitize        ASan + UBSan build in build-sanitize/
#   ./setup.sh mpi             MPI build (parsim sweep under mpirun) in build-mpi/;
#                              installs Open MPI only for this variant
#   ./setup.sh fuzz            libFuzzer targets (tests/fuzz) with ASan + UBSan,
#                              built by clang in build-fuzz/; installs clang only
#                              for this variant
set -eu
cd "$(dirname "$0")"
pkgs="build-essential cmake pkg-config libgsl-dev libconfig-dev libyajl-dev libyaml-dev libcriterion-dev gnuplot-nox"
if [ "${1:-}" = "mpi" ]; then pkgs="$pkgs openmpi-bin libopenmpi-dev"; fi
if [ "${1:-}" = "fuzz" ]; then pkgs="$pkgs clang libclang-rt-dev"; fi
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
elif [ "${1:-}" = "fuzz" ]; then
  # the sanitizers and -O1 come from tests/fuzz/CMakeLists.txt
  dir=build-fuzz; flags="-DPARSIM_FUZZ=ON -DPARSIM_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang"
else
  dir=build; flags="-DCMAKE_BUILD_TYPE=Release"
fi
cmake -S . -B "$dir" $flags >/dev/null
cmake --build "$dir" -j "$(nproc)" >/dev/null
