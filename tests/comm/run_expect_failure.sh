#!/bin/bash
# Usage: run_expect_failure.sh MAX_SECONDS REGEX -- COMMAND...
# Passes when COMMAND exits non-zero within MAX_SECONDS and its output matches REGEX
# (the lost rank's name); prints the output either way. A hang is caught by the time
# limit (timeout(1) kills the command 30 s after MAX_SECONDS).
set -u
max_s=$1; regex=$2; shift 3
start_ms=$(($(date +%s%N) / 1000000))
output=$(timeout -k 5 $((max_s + 30)) "$@" 2>&1)
rc=$?
elapsed_ms=$(($(date +%s%N) / 1000000 - start_ms))
echo "$output"
echo "--- exit code $rc after ${elapsed_ms} ms (limit ${max_s} s)"
if [ "$rc" -eq 0 ]; then echo "FAIL: expected a non-zero exit"; exit 1; fi
if [ "$elapsed_ms" -gt $((max_s * 1000)) ]; then echo "FAIL: took longer than ${max_s} s"; exit 1; fi
if ! echo "$output" | grep -Eq "$regex"; then echo "FAIL: output does not match /$regex/"; exit 1; fi
echo "PASS"
