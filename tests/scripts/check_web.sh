#!/usr/bin/env bash
# Suite: rover-brain's status page end to end in headless Chromium (Debian's
# chromium, driven by playwright-core pinned in tests/web/package.json):
# a job is registered through REST and given 12 speed and node samples a
# moment before the page loads; tests/web/page_test.mjs checks the page
# loads with no console error, shows the job, plots its 12 points with the
# plans marked (reason on hover), its dataset's progress bar, the monitor's
# node, and keeps a screenshot at
# $B/web/status-page.png.  Also: the page's files come with their content
# types and cache headers, and a name outside them is refused.  Skips
# loudly when chromium or the npm tools cannot be installed.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/web/lib.sh
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ] && [ "$(id -u)" -eq 0 ]; then
  scripts/install-deps.sh --web >&2 || true
fi
[ -x "$CHROMIUM" ] || skip "no chromium at $CHROMIUM (scripts/install-deps.sh --web): the status page NOT TESTED in a browser"
web_tools "the status page in a browser"
export CHROMIUM

start_brain || { notok "rover-brain starts"; exit 1; }

# Headers of the page's files.
hdr() { curl -fsS --max-time 10 -o /dev/null -D - "$BRAIN$1" | tr -d '\r' | grep -i "^$2:" | cut -d' ' -f2-; }
check "/ is text/html, revalidated" test "$(hdr / content-type)|$(hdr / cache-control)" = \
  "text/html; charset=utf-8|no-cache"
check "/web/app.js is text/javascript, revalidated" test \
  "$(hdr /web/app.js content-type)|$(hdr /web/app.js cache-control)" = "text/javascript; charset=utf-8|no-cache"
lib=$(sed -n 's|.*src="\(/web/vendor/uPlot-[^"]*\.js\)".*|\1|p' brain/web/index.html)
check "the vendored uPlot ($lib) is text/javascript, immutable" test \
  "$(hdr "$lib" content-type)|$(hdr "$lib" cache-control)" = \
  "text/javascript; charset=utf-8|public, max-age=31536000, immutable"
check "the vendored library's licence is served" test -n "$(curl -fsS "$BRAIN/web/vendor/uPlot.LICENSE" | grep -i 'MIT License')"
code() { curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$BRAIN$1"; }
check "a file outside the page is 404 or 400" test "$(code /web/.gitignore)$(code /web/%2e%2e%2fapi.c)$(code /web/vendor/nope.js)" = 404400404

# A job and its samples through REST, a moment before the page loads.
uid=$(curl -fsS --max-time 10 -X POST "$BRAIN/v1/jobs" --data-binary @examples/job.json | jq -r .uid)
check "a job registers through REST" test -n "$uid" -a "$uid" != null
now=$(date +%s%3N)
batch=$(jq -nc --argjson now "$now" '{samples: (
  ([range(0; 12)] | map({kind: "speed", ts: ($now - (12 - .) * 5000), speed: (100 + . * 3),
    step: (. * 10), workers: 2})) +
  ([range(0; 12)] | map({kind: "node", ts: ($now - (12 - .) * 5000), node: "worker-0",
    role: "worker", rank: 0, cpu: 2.5, memory_mb: 3000, cpu_limit: 8, memory_limit_mb: 16384})))}')
check "12 speed and 12 node samples are stored" test \
  "$(curl -fsS --max-time 10 -X POST "$BRAIN/v1/jobs/$uid/metrics" --data-binary "$batch" | jq .accepted)" = 24

progress=$(jq -nc --argjson now "$now" '{samples: [{kind: "progress", ts: $now, dataset: "train",
  epoch: 0, samples_total: 120000, samples_done: 30000, shards_total: 200, shards_done: 50,
  shards_doing: 4}]}')
check "the master's progress report of dataset train is stored" test \
  "$(curl -fsS --max-time 10 -X POST "$BRAIN/v1/jobs/$uid/metrics" --data-binary "$progress" | jq .accepted)" = 1

report=$(jq -nc --argjson now "$now" '{nodes: [{name: "node-a", ts: $now, cpu: 16, memory_mb: 65536,
  gpu: 2, gpu_util_pct: 73, cpu_used: 2.5, memory_used_mb: 3000, ready: true}]}')
check "a monitor report of node-a is stored" curl -fsS --max-time 10 -o /dev/null -X POST \
  "$BRAIN/v1/cluster/nodes" --data-binary "$report"

B=${B:-build}
mkdir -p "$B/web"
timeout 120 node tests/web/page_test.mjs "$BRAIN" "$uid" 12 "$B/web/status-page.png" || failed=1
exit $failed
