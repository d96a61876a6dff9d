#!/bin/sh
# Builds the standalone GPU driver with nvcc alone (no Rust, no Node needed).
#   ./build.sh                      -> build/dynamo-kernels-driver for sm_80 + sm_90 (+ PTX)
#   ARCHS="86 90" ./build.sh        -> other SM targets (PTX is emitted for the last one)
#   NVCC=/usr/local/cuda-12.4/bin/nvcc ./build.sh
set -eu
cd "$(dirname "$0")"
NVCC="${NVCC:-nvcc}"
ARCHS="${ARCHS:-80 90}"
GENCODE=""
LAST=""
for a in $ARCHS; do
  GENCODE="$GENCODE -gencode arch=compute_$a,code=sm_$a"
  LAST="$a"
done
GENCODE="$GENCODE -gencode arch=compute_$LAST,code=compute_$LAST"
mkdir -p build
# shellcheck disable=SC2086
"$NVCC" -std=c++17 -O3 -lineinfo $GENCODE -o build/dynamo-kernels-driver driver.cu
echo "built $(pwd)/build/dynamo-kernels-driver"
