#!/bin/sh
# The console's front-end libraries, from the npm registry at the versions package-lock.json pins:
# `npm ci` in a cache dir, then their dist files copied into the package (console/static/vendor/), from
# where the console serves them itself (no CDN: many users' machines are offline).
# Usage: build.sh CACHE_DIR VENDOR_DIR
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
cache="$1"
vendor="$2"
if ! command -v npm >/dev/null 2>&1; then
  echo "installing Debian's npm (the console's front-end libraries come from the npm registry)"
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends npm >/dev/null
fi
mkdir -p "$cache" "$vendor"
cp "$here/package.json" "$here/package-lock.json" "$cache/"
(cd "$cache" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
m="$cache/node_modules"
cp "$m/htmx.org/dist/htmx.min.js" "$m/htmx-ext-sse/dist/sse.min.js" \
   "$m/uplot/dist/uPlot.iife.min.js" "$m/uplot/dist/uPlot.min.css" "$vendor/"
for lib in htmx.org htmx-ext-sse uplot; do cp "$m/$lib/LICENSE" "$vendor/LICENSE.$lib"; done
