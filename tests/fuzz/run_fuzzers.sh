#!/bin/bash
# Builds every libFuzzer target tests/fuzz/fuzz_*.cpp with clang
# (-fsanitize=fuzzer,address,undefined) and runs each for a bounded time on a
# corpus seeded with generated valid files; fails on any crash, sanitizer
# report, leak or timeout. Exits 77 (ctest SKIP) when clang or libFuzzer is
# missing.
#
# usage: run_fuzzers.sh SOURCE_DIR WORK_DIR SEED_GENERATOR [SHARED_DIR]
#
# Each target names the sources it needs in a comment line
#   // FUZZ_SOURCES: src/a/b.cpp src/c/d.cpp
# and optionally extra link flags in "// FUZZ_LIBS: -lpcre2-8" and a longest
# input other than 16384 bytes in "// FUZZ_MAX_LEN: 300000" (for inputs that
# must reach a size limit, such as JSON nested past its depth limit). Seeds come
# from SEED_GENERATOR (one folder per target) and from an optional list
# tests/fuzz/<target>.seeds: one path per line, $SHARED_DIR and $SOURCE_DIR
# expanded, missing files skipped. Environment: PARALLM_FUZZ_SECONDS (per
# target, default 15), PARALLM_FUZZ_JOBS (targets fuzzed at once, default 2),
# PARALLM_FUZZ_TARGETS (space-separated names: only these).
set -u
SRC=$(cd "$1" && pwd)
WORK=$2
SEED_GEN=$3
SHARED_DIR=${4:-$SRC/../shared}
SOURCE_DIR=$SRC
SECONDS_PER_TARGET=${PARALLM_FUZZ_SECONDS:-15}
JOBS=${PARALLM_FUZZ_JOBS:-2}

CXX=""
for c in clang++-14 clang++; do
  if command -v "$c" >/dev/null 2>&1; then CXX=$c; break; fi
done
if [ -z "$CXX" ]; then
  echo "SKIP: clang++ not found (Debian: apt-get install clang-14 libclang-rt-14-dev)"
  exit 77
fi
mkdir -p "$WORK/obj" "$WORK/bin" "$WORK/seeds" "$WORK/corpus" "$WORK/artifacts" "$WORK/logs"
FLAGS=(-std=c++20 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -I "$SRC/src")

# Probe: can this clang link a libFuzzer binary?
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' > "$WORK/probe.cpp"
if ! "$CXX" -fsanitize=fuzzer "$WORK/probe.cpp" -o "$WORK/probe" >"$WORK/probe.log" 2>&1; then
  echo "SKIP: $CXX cannot link libFuzzer (Debian: apt-get install libclang-rt-14-dev)"
  exit 77
fi

# Objects are rebuilt when their source, or any header under src/, is newer.
stale() {  # stale OUTPUT INPUT...
  local out=$1; shift
  [ -f "$out" ] || return 0
  local f
  for f in "$@"; do [ "$f" -nt "$out" ] && return 0; done
  [ -n "$(find "$SRC/src" -name '*.h' -newer "$out" -print -quit)" ] && return 0
  return 1
}
compile() {  # compile SOURCE (relative to SRC) -> prints the object path
  local rel=$1
  local obj="$WORK/obj/$(echo "$rel" | tr '/' '_').o"
  if stale "$obj" "$SRC/$rel"; then
    "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer-no-link -c "$SRC/$rel" -o "$obj" || return 1
  fi
  echo "$obj"
}

targets=()
for f in "$SRC"/tests/fuzz/fuzz_*.cpp; do
  t=$(basename "$f" .cpp)
  if [ -n "${PARALLM_FUZZ_TARGETS:-}" ] && [[ " $PARALLM_FUZZ_TARGETS " != *" $t "* ]]; then continue; fi
  if ! grep -q '^// FUZZ_SOURCES:' "$f"; then
    echo "FAIL: $f lacks a '// FUZZ_SOURCES: src/...cpp ...' line naming the sources it links"
    exit 1
  fi
  targets+=("$t")
done
echo "fuzz targets: ${targets[*]}; ${SECONDS_PER_TARGET}s each, $JOBS at a time, compiler $CXX"

# Build: every distinct source once, then one link per target.
failed=0
declare -A objects
for t in "${targets[@]}"; do
  srcs=$(sed -n 's|^// FUZZ_SOURCES:||p' "$SRC/tests/fuzz/$t.cpp")
  for s in $srcs "tests/fuzz/$t.cpp"; do objects[$s]=1; done
done
build_log="$WORK/logs/build.log"
: > "$build_log"
running=0
for s in "${!objects[@]}"; do
  compile "$s" >/dev/null 2>>"$build_log" &
  running=$((running + 1))
  if [ $running -ge "$JOBS" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
done
while [ $running -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
if [ $failed -ne 0 ]; then
  echo "FAIL: compiling the fuzz targets:"
  tail -40 "$build_log"
  exit 1
fi
for t in "${targets[@]}"; do
  srcs=$(sed -n 's|^// FUZZ_SOURCES:||p' "$SRC/tests/fuzz/$t.cpp")
  libs=$(sed -n 's|^// FUZZ_LIBS:||p' "$SRC/tests/fuzz/$t.cpp")
  objs=()
  for s in "tests/fuzz/$t.cpp" $srcs; do objs+=("$WORK/obj/$(echo "$s" | tr '/' '_').o"); done
  if stale "$WORK/bin/$t" "${objs[@]}"; then
    # shellcheck disable=SC2086
    "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer "${objs[@]}" $libs -o "$WORK/bin/$t" >>"$build_log" 2>&1 || {
      echo "FAIL: linking $t:"; tail -20 "$build_log"; failed=1; }
  fi
done
[ $failed -eq 0 ] || exit 1

# Seeds.
"$SEED_GEN" "$WORK/seeds" || { echo "FAIL: seed generator"; exit 1; }
for t in "${targets[@]}"; do
  mkdir -p "$WORK/corpus/$t"
  [ -d "$WORK/seeds/$t" ] && cp -f "$WORK/seeds/$t"/* "$WORK/corpus/$t/" 2>/dev/null
  list="$SRC/tests/fuzz/$t.seeds"
  if [ -f "$list" ]; then
    while IFS= read -r line; do
      [ -z "$line" ] || [ "${line:0:1}" = "#" ] && continue
      path=${line//\$SHARED_DIR/$SHARED_DIR}
      path=${path//\$SOURCE_DIR/$SOURCE_DIR}
      [ -f "$path" ] && cp -f "$path" "$WORK/corpus/$t/seed_$(basename "$path")"
    done < "$list"
  fi
done

# Fuzz, JOBS targets at a time.
run_one() {
  local t=$1
  local max_len
  max_len=$(sed -n 's|^// FUZZ_MAX_LEN: *||p' "$SRC/tests/fuzz/$t.cpp")
  "$WORK/bin/$t" "$WORK/corpus/$t" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -max_len="${max_len:-16384}" \
    -artifact_prefix="$WORK/artifacts/$t-" -print_final_stats=1 >"$WORK/logs/$t.log" 2>&1
}
pids=()
names=()
for t in "${targets[@]}"; do
  run_one "$t" &
  pids+=($!)
  names+=("$t")
  if [ ${#pids[@]} -ge "$JOBS" ]; then
    wait "${pids[0]}" || { echo "FAIL: ${names[0]} (log: $WORK/logs/${names[0]}.log)"; tail -30 "$WORK/logs/${names[0]}.log"; failed=1; }
    pids=("${pids[@]:1}")
    names=("${names[@]:1}")
  fi
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { echo "FAIL: ${names[$i]} (log: $WORK/logs/${names[$i]}.log)"; tail -30 "$WORK/logs/${names[$i]}.log"; failed=1; }
done
for t in "${targets[@]}"; do
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$WORK/logs/$t.log")
  echo "$t: ${runs:-?} inputs, corpus $(ls "$WORK/corpus/$t" | wc -l) files"
done
[ $failed -eq 0 ] && echo "fuzzing: no crashes"
exit $failed
