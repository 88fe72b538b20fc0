#!/usr/bin/env bash
# Vendor the status page's plotting library into brain/web/vendor/ (committed,
# so neither a user nor CI runs this): uPlot (MIT, https://github.com/leeoniya/uPlot),
# at the version pinned below, from the npm registry with `npm pack`, its
# sha512 checked against the registry's integrity field.  Copies the browser
# build (dist/uPlot.iife.min.js), its stylesheet and its LICENSE, and writes
# brain/web/vendor/VERSIONS.  Run it again after changing the version (and
# update the script tag in brain/web/index.html, whose file names carry it:
# the brain serves vendor files as immutable).
set -euo pipefail
UPLOT_VERSION=1.6.32
cd "$(dirname "$0")/.."
dest=brain/web/vendor
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v npm >/dev/null || { echo "error: npm not found (apt-get install npm)" >&2; exit 1; }
(cd "$tmp" && npm pack --silent "uplot@$UPLOT_VERSION" >pack.name)
tgz="$tmp/$(cat "$tmp/pack.name")"
want=$(npm view "uplot@$UPLOT_VERSION" dist.integrity)
got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
if [ "$want" != "$got" ]; then
  echo "error: uplot-$UPLOT_VERSION.tgz integrity $got, registry says $want" >&2
  exit 1
fi
tar -xzf "$tgz" -C "$tmp"
mkdir -p "$dest"
rm -f "$dest"/uPlot-*.iife.min.js "$dest"/uPlot-*.min.css
cp "$tmp/package/dist/uPlot.iife.min.js" "$dest/uPlot-$UPLOT_VERSION.iife.min.js"
cp "$tmp/package/dist/uPlot.min.css" "$dest/uPlot-$UPLOT_VERSION.min.css"
cp "$tmp/package/LICENSE" "$dest/uPlot.LICENSE"
cat >"$dest/VERSIONS" <<EOT
# Written by scripts/vendor-web.sh; do not edit.
uplot $UPLOT_VERSION MIT $want
EOT
echo "vendored uPlot $UPLOT_VERSION into $dest" >&2
