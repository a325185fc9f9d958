#!/usr/bin/env bash
# Checks that every C++ and CUDA source in the tree is formatted as the
# checked-in .clang-format says (clang-format 14, Debian 12's). With --fix it
# rewrites the files instead. Exit 1 lists the files that differ.
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=$(command -v clang-format-14 || command -v clang-format || true)
if [[ -z "$fmt" ]]; then
  echo "check_format: clang-format not found (tools/install_deps.sh installs it)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files '*.cpp' '*.cc' '*.h' '*.hpp' '*.cu' '*.cuh')
if [[ "${1:-}" == "--fix" ]]; then
  "$fmt" -i --style=file "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$fmt" --style=file --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  printf 'check_format: %d file(s) differ from .clang-format; run tools/check_format.sh --fix\n' "${#bad[@]}" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
