#!/usr/bin/env bash
# Suite: the OpenAPI documents rover-brain and rover-master serve at
# /v1/openapi.json, fetched from the running binaries, pass Redocly's
# recommended rules (`redocly lint --extends=recommended`, @redocly/cli
# pinned in tests/web/package.json): a bearer security scheme, servers,
# an operationId on every operation, a 4xx response on each.  The only
# warning allowed is info-license (Rover names no licence).  Skips loudly
# when the npm tools cannot be installed.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/web/lib.sh
web_tools "the OpenAPI documents against Redocly's recommended rules"
REDOCLY=tests/web/node_modules/.bin/redocly

lint() { # lint NAME URL
  local name=$1 doc=$WEB_TMP/$1.json out=$WEB_TMP/$1.lint
  if ! curl -fsS --max-time 10 "$2/v1/openapi.json" -o "$doc" 2>"$WEB_TMP/curl.err"; then
    cat "$WEB_TMP/curl.err"
    notok "$name serves /v1/openapi.json"
    return
  fi
  ok "$name serves /v1/openapi.json"
  # Redocly reads redocly.yaml from the folder it runs in: run it where there is none.
  if (cd "$WEB_TMP" && timeout 120 "$OLDPWD/$REDOCLY" lint --extends=recommended \
    --format=stylish "$doc") >"$out" 2>&1; then
    ok "$name's document passes redocly lint --extends=recommended"
  else
    notok "$name's document passes redocly lint --extends=recommended"
    sed 's/^/    /' "$out"
  fi
  local other
  other=$(grep -E ' (warning|error) ' "$out" | grep -v ' info-license ')
  if [ -z "$other" ]; then ok "$name's document has no warning but info-license"; else
    notok "$name's document has no warning but info-license"; echo "$other" | sed 's/^/    /'; fi
  local ids dup
  ids=$(jq -r '[.paths[][] | .operationId] | length' "$doc")
  dup=$(jq -r '[.paths[][] | .operationId] | group_by(.) | map(select(length > 1)) | length' "$doc")
  check "$name: every one of its $ids operations has an operationId, none twice" \
    test "$(jq '[.paths[][] | select(.operationId == null)] | length' "$doc")" = 0 -a "$dup" = 0
  check "$name: servers names the URL it was fetched from" \
    test "$(jq -r '.servers[0].url' "$doc")" = "$2"
}

start_brain || { notok "rover-brain starts"; exit 1; }
start_master || { notok "rover-master starts"; exit 1; }
lint rover-brain "$BRAIN"
lint rover-master "$MASTER"
exit $failed
