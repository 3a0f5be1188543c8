"""protocol/messages.pyi: up to date with the schemas, and true of the classes built at run time."""

from __future__ import annotations

import ast
import inspect
import uuid
from functools import cache
from typing import Any

import pytest

from protocol import stubgen
from protocol.api import ApiKey, api
from protocol.codegen import Message, Struct
from protocol.messages import message_class
from protocol.schema import load_message, schema_paths
from tests.protocol.generated_values import random_message


@cache
def _stub() -> dict[str, ast.ClassDef]:
    """The stub's message classes by name."""
    tree = ast.parse(stubgen.STUB_PATH.read_text(encoding="utf-8"))
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def _fields(node: ast.ClassDef) -> dict[str, ast.expr]:
    return {
        s.target.id: s.annotation
        for s in node.body
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
    }


def _init_keywords(node: ast.ClassDef) -> list[str]:
    (init,) = [s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"]
    assert not init.args.args[1:] and init.args.vararg is None and init.args.kwarg is None
    assert all(d is not None for d in init.args.kw_defaults)  # every field is optional
    return [a.arg for a in init.args.kwonlyargs]


def _bases(node: ast.ClassDef) -> list[str]:
    return [b.id for b in node.bases if isinstance(b, ast.Name)]


def _nested(node: ast.ClassDef) -> dict[str, ast.ClassDef]:
    return {s.name: s for s in node.body if isinstance(s, ast.ClassDef)}


def test_checked_in_stub_is_what_the_generator_writes_now() -> None:
    """A schema change (or a generator change) must come with `make stubs`."""
    assert stubgen.STUB_PATH.read_text(encoding="utf-8") == stubgen.generate(), (
        "protocol/messages.pyi is out of date: run `make stubs` (python -m protocol.stubgen)"
    )


def test_check_mode_reports_a_stale_stub(tmp_path: Any) -> None:
    stale = tmp_path / "messages.pyi"
    stale.write_text("# old\n", encoding="utf-8")
    assert stubgen.main(["--check", "--output", str(stale)]) == 1
    assert stubgen.main(["--output", str(stale)]) == 0
    assert stubgen.main(["--check", "--output", str(stale)]) == 0


def test_stub_declares_every_message_with_the_run_time_shape() -> None:
    """Each class, nested struct class, field and constructor keyword the stub declares exists at run time
    under the same name (``MetadataResponse.MetadataResponseTopic``), and nothing more does."""
    stub = _stub()
    assert set(stub) == set(schema_paths())
    for name, node in stub.items():
        cls = message_class(name)
        assert issubclass(cls, Message) and _bases(node) == ["Message"]
        runtime_structs = {
            attr: value
            for attr, value in vars(cls).items()
            if isinstance(value, type) and issubclass(value, Struct)
        }
        nested = _nested(node)
        assert set(nested) == set(runtime_structs), name
        for struct_name, struct_node in nested.items():
            struct_cls = runtime_structs[struct_name]
            assert struct_cls.__qualname__ == f"{name}.{struct_name}"
            assert not issubclass(struct_cls, Message)
            assert _bases(struct_node) == ["Struct"]
        for c, n in [(cls, node), *((runtime_structs[s], nested[s]) for s in nested)]:
            assert list(_fields(n)) == list(c._fields), c.__qualname__
            params = inspect.signature(c.__init__).parameters
            assert _init_keywords(n) == [p for p in params if p != "self"], c.__qualname__
            assert all(params[p].kind is inspect.Parameter.KEYWORD_ONLY for p in _init_keywords(n))


def _matches(value: Any, annotation: ast.expr) -> bool:
    """Whether a run-time value belongs to the type the stub writes (the few forms stubgen uses)."""
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _matches(value, annotation.left) or _matches(value, annotation.right)
    if isinstance(annotation, ast.Constant) and annotation.value is None:
        return value is None
    if isinstance(annotation, ast.Subscript):
        assert isinstance(annotation.value, ast.Name) and annotation.value.id == "list"
        return isinstance(value, list) and all(_matches(v, annotation.slice) for v in value)
    if isinstance(annotation, ast.Name):
        if annotation.id == "Records":
            return True  # Any: decoded as a memoryview, encoded from whatever the broker hands it
        kind = {"int": int, "bool": bool, "float": float, "str": str, "bytes": bytes}[annotation.id]
        return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
    assert isinstance(annotation, ast.Attribute) and isinstance(annotation.value, ast.Name)
    if annotation.value.id == "uuid":
        return isinstance(value, uuid.UUID)
    message, struct_name = annotation.value.id, annotation.attr
    struct_cls = getattr(message_class(message), struct_name)
    return type(value) is struct_cls and _conforms(value, _nested(_stub()[message])[struct_name])


def _conforms(obj: Any, node: ast.ClassDef) -> bool:
    for attr, annotation in _fields(node).items():
        assert _matches(getattr(obj, attr), annotation), (
            f"{type(obj).__qualname__}.{attr} = {getattr(obj, attr)!r} is not {ast.unparse(annotation)}"
        )
    return True


@pytest.mark.parametrize("name", sorted(schema_paths()))
def test_fields_hold_what_the_stub_says(name: str) -> None:
    """Defaults, and values decoded at every version (nulls included), have the stub's types."""
    cls, node = message_class(name), _stub()[name]
    _conforms(cls(), node)
    for struct_name, struct_node in _nested(node).items():
        _conforms(getattr(cls, struct_name)(), struct_node)
    spec = load_message(name)
    for version in range(spec.valid_versions.low, spec.valid_versions.high + 1):
        for seed in range(3):
            encoded = random_message(cls, version, seed).encode(version)
            _conforms(cls.decode(encoded, version), node)


def test_every_api_key_has_a_schema() -> None:
    """``api(ApiKey.X)`` is typed ``Api`` (not ``Api | None``) on the strength of this."""
    for key in ApiKey:
        found = api(key)
        assert found is not None and found.key == key, key
