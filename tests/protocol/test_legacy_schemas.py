"""The inter-broker schemas Kafka 4 dropped, checked against Kafka 3.9's own generated classes.

kio (Kafka 4) lacks these APIs, so the oracle is the Java client jar: a small Java program reads each
of our encodings with Kafka's message class for that API and writes it back; the bytes must match.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from protocol.messages import message_class
from protocol.schema import SCHEMA_DIRS, load_message
from tests.protocol.generated_values import random_message

ROOT = Path(__file__).resolve().parents[2]
JARS = ROOT / ".cache" / "clients" / "java"
ORACLE = Path(__file__).parent / "java" / "SchemaOracle.java"
LEGACY = sorted(p.stem for p in SCHEMA_DIRS[1].glob("*.json"))


def _cases() -> list[tuple[str, int, int, bytes]]:
    cases = []
    for name in LEGACY:
        spec = load_message(name)
        for version in range(spec.valid_versions.low, spec.valid_versions.high + 1):
            for seed in range(6):
                cases.append(
                    (name, version, seed, random_message(message_class(name), version, seed).encode(version))
                )
    return cases


def test_legacy_schemas_cover_the_zookeeper_era_apis() -> None:
    keys = {load_message(n).api_key for n in LEGACY}
    assert keys == {4, 5, 6, 7, 56, 67}


@pytest.mark.integration
def test_kafka_39_writes_back_the_same_bytes() -> None:
    jar = JARS / "kafka-clients.jar"
    if not jar.exists() or shutil.which("java") is None:
        pytest.skip(f"needs java and {jar} (installed by `make clientdeps`)")
    cases = _cases()
    lines = []
    for name, version, _, encoded in cases:
        spec = load_message(name)
        lines.append(f"{spec.type} {spec.api_key} {version} {encoded.hex()}")
    result = subprocess.run(
        ["java", "-cp", str(jar), str(ORACLE)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    answers = result.stdout.splitlines()
    assert len(answers) == len(cases), result.stderr
    failures = []
    for (name, version, seed, encoded), answer in zip(cases, answers, strict=True):
        if answer != f"OK {encoded.hex()}":
            failures.append(f"{name} v{version} seed {seed}: ours {encoded.hex()} -> {answer}")
    assert not failures, "\n".join(failures[:10])
