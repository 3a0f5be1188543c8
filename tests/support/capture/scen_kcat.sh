#!/bin/sh
# Capture scenario for Debian's kcat (see scen_python.py for the protocol: `VERSION ...`, then
# `OK|FAIL|SKIP step detail` lines). kcat has no admin commands: the topic comes from the broker's
# auto-creation on the first produce. Usage: sh scen_kcat.sh BOOTSTRAP
BS=$1
T=vec-kcat
GROUP=vec-kcat-grp
PAYLOAD="samsa-vector samsa-vector samsa-vector samsa-vector samsa-vector samsa-vector"

echo "VERSION kcat $(kcat -V 2>&1 | sed -n 's/^Version \([^ ]*\) .*\(librdkafka [^ ]*\).*/\1 (\2)/p')"

step() {
    name=$1
    shift
    if out=$("$@" 2>&1); then status=OK; else status=FAIL; fi
    echo "$status $name $(printf '%s' "$out" | tr '\n' ' ' | cut -c1-200)"
}

kc() {
    timeout 40 kcat -b "$BS" -m 10 "$@"
}

keyed() {
    printf 'k0:v0\nk1:v1\nk2:v2\nk3:v3\nk4:v4\n' | kc -P -t $T -K: "$@"
}

compressed() {
    printf '%s\n' "$PAYLOAD" "$PAYLOAD" "$PAYLOAD" "$PAYLOAD" "$PAYLOAD" | kc -P -t $T -p 0 -X linger.ms=20 "$@"
}

transactional() {
    printf 't:txn\n' | kc -P -t $T -p 1 -K: -X transactional.id=vec-kcat-tx -X client.id=vec-txn
}

step produce keyed -H trace=t-1 -H empty= -X enable.idempotence=false -X client.id=vec-produce
step metadata kc -L -X client.id=vec-metadata
step metadata_topic_json kc -L -J -t $T -X client.id=vec-metadata
for codec in gzip snappy lz4 zstd; do
    step "produce_$codec" compressed -z $codec -X client.id=vec-$codec
done
step produce_idempotent keyed -H trace=t-1 -X enable.idempotence=true -X client.id=vec-idempotent
step txn transactional
step consume_group kc -G $GROUP $T -o beginning -e -c 10 -f '%p:%o %k=%s\n' -X client.id=vec-consumer \
    -X session.timeout.ms=10000 -X isolation.level=read_committed -X auto.commit.interval.ms=500
step consume_partition kc -C -t $T -p 0 -o beginning -e -X client.id=vec-simple
step consume_from_timestamp kc -C -t $T -p 1 -o s@0 -e -X client.id=vec-timestamp
step query_offsets_for_time kc -Q -t $T:0:0 -X client.id=vec-query
step query_offsets_latest kc -Q -t $T:1:-1 -X client.id=vec-query
