# tests/web/lib.sh: sourced by tests/scripts/check_openapi.sh and check_web.sh.
# Starts the real daemons from $ROVER_BIN_DIR (default build/bin) on free
# loopback ports, each in a private temp folder removed at exit; a check
# prints "ok - ..." or "not ok - ..."; skip prints "SKIP: why" (tests/run.sh
# counts and shows it) and one "ok - # SKIP" line, and ends the suite.  What
# these suites skip for (chromium, the npm tools) CI installs: under CI=true
# skip is a failure.
BIN=${ROVER_BIN_DIR:-build/bin}
WEB_TMP=$(mktemp -d /tmp/rover-web-test.XXXXXX)
chmod 755 "$WEB_TMP" # the embedded PostgreSQL runs as postgres when we are root
WEB_PIDS=()
web_cleanup() {
  for p in "${WEB_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${WEB_PIDS[@]}"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
  done
  # WEB_KEEP=1 keeps the folder (logs, databases) for a look afterwards.
  if [ -n "${WEB_KEEP:-}" ]; then echo "kept $WEB_TMP" >&2; else rm -rf "$WEB_TMP"; fi
}
trap web_cleanup EXIT
failed=0
ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; failed=1; }
check() { # check "what" command...
  local what=$1; shift
  if "$@"; then ok "$what"; else notok "$what"; fi
}
skip() {
  if [ "${CI:-}" = true ]; then
    echo "not ok - CI=true installs it, but: $*"
    exit 1
  fi
  echo "SKIP: $*"
  echo "SKIP: $*" >&2
  echo "ok - # SKIP $*"
  exit 0
}

# wait_url LOG VAR: wait (30 s) for "listening on URL" in LOG; sets VAR.
wait_url() {
  local log=$1 var=$2 url=
  for _ in $(seq 300); do
    url=$(sed -n 's/^listening on \(http:[^ ]*\).*/\1/p' "$log" | head -1)
    [ -n "$url" ] && break
    sleep 0.1
  done
  [ -n "$url" ] || { echo "no 'listening on' line in $log:" >&2; cat "$log" >&2; return 1; }
  printf -v "$var" '%s' "$url"
}

# start_brain [flags...]: a brain with its own embedded PostgreSQL; sets BRAIN.
start_brain() {
  "$BIN/rover-brain" --listen 127.0.0.1:0 --db-data-dir "$WEB_TMP/brain" --log-level warn \
    "$@" >"$WEB_TMP/brain.log" 2>&1 &
  WEB_PIDS+=($!)
  wait_url "$WEB_TMP/brain.log" BRAIN
}

# start_master: a master for examples/job.json made manual (no brain); sets MASTER.
start_master() {
  jq '.spec.optimizeMode = "manual" | del(.spec.brainService)' examples/job.json \
    >"$WEB_TMP/job.json" || return 1
  "$BIN/rover-master" --job "$WEB_TMP/job.json" --listen 127.0.0.1:0 \
    --state-dir "$WEB_TMP/master" --scheduler none --log-level warn >"$WEB_TMP/master.log" 2>&1 &
  WEB_PIDS+=($!)
  wait_url "$WEB_TMP/master.log" MASTER
}

# web_tools: the pinned npm tools in tests/web/node_modules, or skip.
web_tools() {
  scripts/install-web-tools.sh >&2 ||
    skip "npm tools could not be installed (npm missing or registry unreachable): $1 NOT TESTED"
}
