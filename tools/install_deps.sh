#!/usr/bin/env bash
# Installs the Debian packages parallm builds, tests and runs with.
# Each package and what it is for is listed in README.md ("Dependencies").
set -euo pipefail
packages=(
  build-essential cmake pkg-config        # compiler and build
  libgtest-dev libbenchmark-dev           # tests and kernel benchmarks
  nlohmann-json3-dev libcli11-dev         # JSON, command line
  libpcre2-dev                            # tokenizer pre-tokenizer regexes (Unicode classes)
  libutf8proc-dev                         # tokenizer Unicode normalization (NFC, NFKC)
  libcpp-httplib-dev                      # an independent HTTP client for the server tests
  libopenmpi-dev openmpi-bin              # MPI communicator (multi-process / multi-host)
  libhwloc-dev                            # CPU / NUMA topology for `parallm topo`
  python3 python3-numpy                   # NumPy reference forward in tests
  python3-jinja2                          # reference renderings of chat templates in tests
  clang libclang-rt-14-dev                # libFuzzer targets
  clang-format                            # tools/check_format.sh (clang-format 14, the tree's format)
  chromium                                # headless rendering test of `bench --html`
  npm                                     # tokenizer.json files and the OpenAI SDK for tests
  prometheus                              # deploy/ tests: promtool and a live Prometheus server
  python3-yaml python3-jsonschema         # deploy/ tests: compose and Kubernetes manifests, strict schemas
)
missing=()
for p in "${packages[@]}"; do
  [[ "$p" == \#* ]] && continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js may come from outside Debian (it is on the stock image): skip npm then.
if command -v npm >/dev/null 2>&1; then
  missing=("${missing[@]/npm}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))
if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
