#!/usr/bin/env bash
# Installs dependencies, checks the format, builds parallm and runs every
# test (ctest), then the ThreadSanitizer run (PARALLM_TSAN=0 skips it).
# Also checks that the CUDA/NCCL path compiles and links when the CUDA
# toolkit is present (no GPU needed; its runtime tests skip without one).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
bash tools/check_format.sh
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs"
if [[ -x /usr/local/cuda/bin/nvcc && "${PARALLM_SKIP_CUDA_BUILD:-0}" != 1 ]]; then
  echo "== CUDA/NCCL build check (-DPARALLM_CUDA=ON)"
  # The binary, the CUDA kernels, their test binary and the device model's
  # (docs/cuda.md): the other tests run in build/. NOTE: server and tokenizer tests, and the
  # llama.cpp comparison, are left out of this tree because configuring them runs npm install.
  cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DPARALLM_CUDA=ON -DPARALLM_BENCH=OFF \
    -DPARALLM_SKIP_TESTS="server;tokenizer" -DPARALLM_LLAMA_CPP_REFERENCE=OFF \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc
  nice -n 19 cmake --build build-cuda -j"$jobs" --target parallm parallm_kernels_cuda cuda_gpu_test \
    device_model_test
  # Without a GPU these skip ("skipped: no CUDA device") but for the cases that
  # check the no-device errors (the engine's among them, CudaErrors.*);
  # PARALLM_EXPECT_GPU=1 makes a missing GPU a failure.
  ctest --test-dir build-cuda --output-on-failure -R '^Cuda(Gpu|Runtime|Errors)\.'
fi
# ---- GPU check tooling (tools/gpu_bundle.sh, tools/gpu_check.sh) ----------
# Packs gpu_bundle/ from build-cuda (built just above) and dry-runs the GPU
# machine's check here: the bundle, every stage's command line, and each
# stage's CPU counterpart (greedy tokens vs the reference, a serve smoke
# test, tp/pp vs tp=1, bench-model). About 10 s past the build.
if [[ -x /usr/local/cuda/bin/nvcc && "${PARALLM_SKIP_CUDA_BUILD:-0}" != 1 ]]; then
  echo "== GPU check dry run (tools/gpu_check.sh --dry-run)"
  BUILD_DIR=build-cuda JOBS="$jobs" bash tools/gpu_bundle.sh
  bash gpu_bundle/gpu_check.sh --dry-run --out build-cuda/gpu_check_dry
fi
# ---- end GPU check tooling ---------------------------------------------------
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 900
# The ThreadSanitizer build and run of the threaded tests (tools/tsan.sh):
# about 17 minutes cold on 2 busy cores (its build is most of it), inside
# CI's 90 with the rest; PARALLM_TSAN=0 leaves it out of a local run.
if [[ "${PARALLM_TSAN:-1}" != 0 ]]; then
  bash tools/tsan.sh
fi
