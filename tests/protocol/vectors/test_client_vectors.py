"""Checks the captured client request vectors: every file splits into whole frames, kio parses every
frame except the known librdkafka quirk, and README.md is what tests/support/capture/readme.py generates
from them."""

import importlib.util
import struct
from pathlib import Path
from types import ModuleType

import pytest

VECTORS = Path(__file__).resolve().parent
FILES = sorted(VECTORS.glob("*.requests"))
# librdkafka 2.16's all-topics Metadata v12 (see README.md): kio stops 3 bytes short.
KNOWN_KIO_FAILURES = {("confluent-kafka", 3, 12)}


def _load_readme_module() -> ModuleType:
    path = VECTORS.parents[1] / "support" / "capture" / "readme.py"
    spec = importlib.util.spec_from_file_location("vectors_readme", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


readme = _load_readme_module()


def test_every_client_has_a_vector_file() -> None:
    assert {f.stem for f in FILES} == set(readme.CLIENT_ORDER)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_frames_are_whole_and_parse_with_kio(path: Path) -> None:
    payloads = list(readme.split_frames(path.read_bytes()))
    assert payloads
    unexpected = []
    for payload in payloads:
        api_key, version = struct.unpack_from(">hh", payload)
        problem = readme.kio_problem(payload)
        if problem and (path.stem, api_key, version) not in KNOWN_KIO_FAILURES:
            unexpected.append(f"{api_key} v{version}: {problem}")
    assert not unexpected


def test_readme_is_generated_from_the_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readme, "VECTORS", tmp_path)
    for path in FILES:
        (tmp_path / path.name).write_bytes(path.read_bytes())
    readme.main()
    assert (tmp_path / "README.md").read_text() == (VECTORS / "README.md").read_text()


# The requests Samsa has no schema for (the clients sent them because Tansu advertises them).
NO_SCHEMA = {69: "ConsumerGroupDescribe", 71: "GetTelemetrySubscriptions"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_frames_parse_with_samsas_codecs_and_re_encode_identically(path: Path) -> None:
    from protocol.api import api
    from protocol.frame import decode_request_header

    checked, mismatches = 0, []
    for payload in readme.split_frames(path.read_bytes()):
        api_key, version = struct.unpack_from(">hh", payload)
        definition = api(api_key)
        if definition is None:
            assert api_key in NO_SCHEMA, f"api key {api_key} is neither known nor expected"
            continue
        header, pos = decode_request_header(payload, definition, version)
        body, end = definition.request.decode_from(payload, version, pos)
        rebuilt = header.encode(definition.request_header_version(version)) + body.encode(version)
        # librdkafka's all-topics Metadata v12 carries 3 bytes past the body; Kafka ignores them, as we do.
        expected = (
            bytes(payload[:end]) if (path.stem, api_key, version) in KNOWN_KIO_FAILURES else bytes(payload)
        )
        if rebuilt != expected:
            mismatches.append(f"{definition.name} v{version}")
        checked += 1
    assert checked > 50
    assert not mismatches
