#!/usr/bin/env bash
# Packs what tools/gpu_check.sh needs on the GPU machine into gpu_bundle/ at
# the repository root: the CUDA build's binaries, the check script itself,
# the models and the greedy reference from ../shared (which does not travel
# with the device tool), a MANIFEST (commit, build flags, files) and
# SHA256SUMS. Run it here, then on the GPU machine, from the repository root:
#
#   bash tools/gpu_bundle.sh                      # here
#   device run, carry ["gpu_bundle"]:  bash gpu_bundle/gpu_check.sh
#   bash gpu_bundle/gpu_check.sh --dry-run        # here, no GPU
#
# Environment:
#   BUILD_DIR   the CUDA build tree (default build-cuda, as tools/test.sh);
#               reused as configured when it exists
#   CUDA_ARCHS  CMAKE_CUDA_ARCHITECTURES of a new tree (default 90-real: the
#               H200); set it to reconfigure an existing tree for others
#   BUNDLE_DIR  where to pack (default gpu_bundle)
#   PARALLM_SHARED  the shared folder (default ../shared)
#   JOBS        build jobs (default nproc)
#   GPU_BUNDLE_NO_BUILD=1  pack what BUILD_DIR holds, build nothing
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build-cuda}
BUNDLE=${BUNDLE_DIR:-gpu_bundle}
SHARED=${PARALLM_SHARED:-$ROOT/../shared}
JOBS=${JOBS:-$(nproc)}
# The device tool carries the working tree and the carried paths together,
# 64 MiB in all: the bundle gets what the tree leaves.
LIMIT_BYTES=$((64 * 1024 * 1024))

say() { echo "gpu_bundle: $*"; }
die() {
  echo "gpu_bundle: error: $*" >&2
  exit 1
}

[[ -x /usr/local/cuda/bin/nvcc ]] || die "no CUDA toolkit (/usr/local/cuda/bin/nvcc): the bundle needs a CUDA build"
[[ -d $SHARED/models/stories260K ]] || die "no $SHARED/models/stories260K (set PARALLM_SHARED)"

# ---- build -----------------------------------------------------------------
cache=$BUILD_DIR/CMakeCache.txt
cached_archs() { sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$cache" 2>/dev/null; }
if [[ "${GPU_BUNDLE_NO_BUILD:-0}" != 1 ]]; then
  # NOTE: an existing tree is built as it is configured (tools/test.sh's
  # build-cuda has 80-real;90-real;90-virtual, which runs on the H200): a
  # reconfigure with other architectures would rebuild every .cu object.
  if [[ ! -f $cache || ( -n "${CUDA_ARCHS:-}" && "$(cached_archs)" != "$CUDA_ARCHS" ) ]]; then
    launchers=()
    if command -v ccache >/dev/null; then
      launchers=(-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
        -DCMAKE_C_COMPILER_LAUNCHER=ccache)
    fi
    say "configuring $BUILD_DIR (CUDA architectures ${CUDA_ARCHS:-90-real})"
    # The flags of tools/test.sh's CUDA build check (server and tokenizer tests
    # are left out: configuring them runs npm install).
    cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DPARALLM_CUDA=ON -DPARALLM_BENCH=OFF \
      -DPARALLM_SKIP_TESTS="server;tokenizer" -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
      -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90-real}" "${launchers[@]}" >/dev/null
  fi
  say "building parallm cuda_gpu_test in $BUILD_DIR"
  nice -n 10 cmake --build "$BUILD_DIR" -j"$JOBS" --target parallm cuda_gpu_test
  # device_model_test is being written beside this script: its absence is a
  # warning, and gpu_check.sh marks its stage MISSING.
  if grep -q '/device_model_test\.dir' "$BUILD_DIR/CMakeFiles/TargetDirectories.txt" 2>/dev/null; then
    nice -n 10 cmake --build "$BUILD_DIR" -j"$JOBS" --target device_model_test ||
      say "WARNING: device_model_test failed to build; its stage will be MISSING"
  else
    say "WARNING: $BUILD_DIR has no target device_model_test; its stage will be MISSING"
  fi
fi
archs=$(cached_archs)
[[ $archs == *90* ]] || say "WARNING: $BUILD_DIR is built for '$archs': no sm_90 code for the H200"

find_binary() { find "$BUILD_DIR" -name "$1" -type f -perm -u+x -not -path '*/CMakeFiles/*' 2>/dev/null | head -n 1; }
parallm_bin=$BUILD_DIR/parallm
gpu_test_bin=$(find_binary cuda_gpu_test)
model_test_bin=$(find_binary device_model_test)
[[ -x $parallm_bin ]] || die "$parallm_bin is missing"
[[ -n $gpu_test_bin ]] || die "cuda_gpu_test is missing in $BUILD_DIR"

# ---- pack ------------------------------------------------------------------
say "packing $BUNDLE/"
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/models/stories260K" "$BUNDLE/models/vocab" "$BUNDLE/reference"
cp "$parallm_bin" "$gpu_test_bin" "$BUNDLE/bin/"
if [[ -n $model_test_bin ]]; then cp "$model_test_bin" "$BUNDLE/bin/"; fi
cp tools/gpu_check.sh "$BUNDLE/gpu_check.sh"
# The layout of ../shared, so that PARALLM_SHARED=gpu_bundle works for the
# tests that read it.
for f in stories260K.bin stories260K.gguf tok512.bin; do
  cp "$SHARED/models/stories260K/$f" "$BUNDLE/models/stories260K/"
done
cp "$SHARED/models/vocab/ggml-vocab-llama-spm.gguf" "$BUNDLE/models/vocab/"
cp "$SHARED/reference/stories260K_greedy.json" "$BUNDLE/reference/"
# Debug sections, if any, only weigh: the copies lose them, the build keeps its.
for b in "$BUNDLE"/bin/*; do strip --strip-debug "$b" 2>/dev/null || true; done
# The shared libraries this image resolves that the GPU machine's may lack
# (OpenMPI, hwloc, libevent, ...): gpu_check.sh links only those the
# machine's own loader does not find into a folder on LD_LIBRARY_PATH. Not
# packed: glibc and the GCC runtime (the GPU image's are newer), and the CUDA
# libraries, which must be the GPU machine's toolkit's (cuBLASLt alone is
# ~500 MiB) and match its driver.
mkdir -p "$BUNDLE/lib"
ldd "$BUNDLE"/bin/* 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    case $name in
      linux-vdso* | ld-linux* | libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libgcc_s.so* | \
        libstdc++.so* | libcuda.so* | libcudart.so* | libcublas* | libnccl.so* | libnvrtc* | libnvJitLink*) ;;
      *) cp -L "$path" "$BUNDLE/lib/$name" ;;
    esac
  done

# The llama-110m benchmark model is ~120 MiB even at q8_0, past what the
# device tool carries: gpu_check.sh makes it there with the bundled parallm
# (make-model), which takes a few seconds.
bench_model=on-device
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | wc -l)
{
  echo "commit: $commit$([[ $dirty -gt 0 ]] && echo " (+ $dirty modified tracked files)")"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "build_dir: $BUILD_DIR"
  for k in CMAKE_BUILD_TYPE CMAKE_CUDA_ARCHITECTURES CMAKE_CXX_COMPILER CMAKE_CUDA_COMPILER CMAKE_CXX_FLAGS \
    CMAKE_CUDA_FLAGS PARALLM_CUDA PARALLM_SKIP_TESTS; do
    echo "$k: $(sed -n "s/^$k:[A-Z]*=//p" "$cache" | head -n 1)"
  done
  echo "nvcc: $(/usr/local/cuda/bin/nvcc --version | tail -n 1)"
  echo "cxx: $(c++ --version | head -n 1)"
  echo "glibc: $(ldd --version | head -n 1)"
  echo "bench_model: $bench_model (llama-110m, made by gpu_check.sh with parallm make-model)"
  echo "device_model_test: $([[ -n $model_test_bin ]] && echo present || echo MISSING)"
  echo "# the CUDA libraries the binaries load from the GPU machine's toolkit:"
  ldd "$BUNDLE"/bin/* 2>/dev/null | awk '$2 == "=>" && /cuda|cublas|nccl/ {print "lib: " $1}' | sort -u
} >"$BUNDLE/MANIFEST"
sums=$(cd "$BUNDLE" && find . -type f -printf '%P\n' | LC_ALL=C sort | xargs sha256sum)
echo "$sums" >"$BUNDLE/SHA256SUMS"

# ---- size ------------------------------------------------------------------
bundle_bytes=$(du -sb "$BUNDLE" | cut -f1)
# What travels besides: tracked files and untracked ones git does not ignore.
tree_bytes=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null |
  awk '{s += $1} END {print s + 0}')
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
say "bundle $(mib "$bundle_bytes") (bin: $(du -sh "$BUNDLE/bin" | cut -f1)); with the working tree" \
  "($(mib "$tree_bytes")) $(mib $((bundle_bytes + tree_bytes))) of the device tool's 64 MiB"
if ((bundle_bytes + tree_bytes > LIMIT_BYTES)); then
  die "the bundle and the working tree are over 64 MiB: the device tool would refuse them"
fi
say "done: $BUNDLE/ (run: bash $BUNDLE/gpu_check.sh [--dry-run])"
