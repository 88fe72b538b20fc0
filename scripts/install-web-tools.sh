#!/usr/bin/env bash
# Install the npm tools the web and OpenAPI tests run, at the versions pinned
# in tests/web/package.json and tests/web/package-lock.json (every transitive
# dependency too), into tests/web/node_modules with `npm ci`:
#   @redocly/cli     `redocly lint --extends=recommended` on the daemons' OpenAPI
#   playwright-core  drives Debian's chromium (/usr/bin/chromium) for the page test
# No browser is downloaded (playwright-core has none; PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD
# is set anyway).  A no-op when the installed tree matches the lock file.
# Exit 1 when npm is missing or the registry cannot be reached: the suites
# that need these tools then skip and say so.  Both versions run on Debian
# 12's nodejs (18) and newer.
set -euo pipefail
cd "$(dirname "$0")/../tests/web"
stamp=node_modules/.rover-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "error: npm not found (scripts/install-deps.sh --web installs nodejs and npm)" >&2
  exit 1
fi
echo "installing tests/web/node_modules (npm ci: @redocly/cli, playwright-core)" >&2
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
if ! timeout 600 npm ci --no-audit --no-fund --loglevel=error >&2; then
  echo "error: npm ci failed in tests/web (registry unreachable?)" >&2
  exit 1
fi
echo "$want" >"$stamp"
