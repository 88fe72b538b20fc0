#!/usr/bin/env bash
# Install the Debian packages Rover needs when any is missing (runs as root on
# Debian 12; otherwise prints the apt-get line to run).  With --lint: the
# lint and format tools instead (make lint, make format-check).  With --web:
# what only the tests of the status page and the OpenAPI documents need
# (make test asks for them and goes on without: those suites then skip
# loudly): Debian's chromium, and nodejs with npm for scripts/install-web-tools.sh
# (npm only when no npm is on PATH: a nodejs from elsewhere brings its own).
set -euo pipefail
if [ "${1:-}" = --lint ]; then
  pkgs=(cppcheck clang-tidy clang-format git)
elif [ "${1:-}" = --web ]; then
  pkgs=(chromium fonts-liberation nodejs)
  command -v npm >/dev/null || pkgs+=(npm)
else
pkgs=(build-essential pkg-config libmicrohttpd-dev libpq-dev libcjson-dev libgsl-dev
      libcurl4-openssl-dev check libinih-dev postgresql postgresql-client curl
      procps valgrind jq wrk
      # libFuzzer harnesses (make fuzz, tests/scripts/check_fuzz.sh): clang and its
      # sanitizer/fuzzer runtime (only recommended by clang)
      clang libclang-rt-dev
      # roverctl: YAML specs; its tests drive it through a real terminal
      libyaml-dev tmux
      # rover-run's tests and examples: Debian's PyTorch and scikit-learn; jemalloc,
      # whose background thread the warm interpreter must fork past
      python3-torch python3-sklearn libjemalloc2
      # the Slurm backend's tests: a private Slurm cluster (tests/slurm)
      slurm-wlm slurmrestd slurm-client munge iproute2 util-linux e2fsprogs
      # the fault suite (tests/fault): a clock stepped under one daemon
      faketime
      # streaming datasets from Redis Streams (rover.redis_feed, tests/integration
      # check_run_stream): a private redis-server on a unix socket per test
      redis-server python3-redis)
# tests/k8s: kubectl drives the Kubernetes stand-in (Debian's is 1.20); a
# kubectl already on PATH (another package's) is used as it is.
command -v kubectl >/dev/null || pkgs+=(kubernetes-client)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing missing packages: ${missing[*]}" >&2
if [ "$(id -u)" -ne 0 ]; then
  echo "error: not root; run: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian starts a packaged cluster on install; Rover runs its own private ones.
if command -v pg_lsclusters >/dev/null && pg_lsclusters -h 2>/dev/null | grep -q online; then
  pg_lsclusters -h | awk '{print $1, $2}' | while read -r v c; do
    pg_ctlcluster "$v" "$c" stop || true
  done
fi
