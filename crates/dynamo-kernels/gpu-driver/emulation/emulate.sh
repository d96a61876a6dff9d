#!/bin/sh
# Runs the driver's correctness checks on the CPU: driver.cu + ../cuda/kernels.cu compiled by the
# host C++ compiler against the stand-in runtime in this folder, with AddressSanitizer and
# UBSan (out-of-bounds and misaligned vector accesses abort). Needs no GPU and no nvcc.
# Benchmarks are skipped: CPU timings say nothing about the kernels.
set -eu
cd "$(dirname "$0")"
CXX="${CXX:-c++}"
mkdir -p ../build
"$CXX" -std=c++17 -O1 -g -x c++ -I. -Wall -Wextra -Wno-unknown-pragmas \
  -fsanitize=address,undefined -fno-sanitize-recover=all \
  -o ../build/dynamo-kernels-driver-emulated ../driver.cu
exec ../build/dynamo-kernels-driver-emulated --no-bench
