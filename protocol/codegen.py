"""Generates message classes and per-version codecs from Kafka's JSON message schemas.

One Python class per struct (shared by all versions, as in Kafka's generated Java), with ``__slots__``
and keyword constructors that fill in schema defaults. For each (message, version) pair the generator
writes Python source for a reader and a writer per struct, specialised to that version: fields absent
from the version are skipped, consecutive fixed-width fields are packed with one precompiled
``struct.Struct``, flexible versions (KIP-482) use compact lengths and tag buffers, unknown tagged fields
are skipped, and tagged fields are written only when they differ from their default. The source is
compiled once, on first use of that version.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from functools import cache
from typing import Any, ClassVar, Self, TypeVar, cast

from protocol import primitives
from protocol.primitives import SHORT_ARRAY, DecodeError, short_array_structs
from protocol.schema import FieldSpec, MessageSpec, load_message

ZERO_UUID = uuid.UUID(int=0)

_FIXED = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "uint32": "I",
    "float64": "d",
    "bool": "?",
    "uuid": "16s",
}
_NULL_COMPACT = repr(b"\x00")
_NULL_LENGTH = repr(b"\xff\xff\xff\xff")
_ELEMENT_SIZE = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4, "float64": 8}


# A message's reader (buffer, position -> (message, position after it)), its writer (message, the bytes so
# far, the finished parts) and the generated source of both.
Reader = Callable[[Any, int], tuple[Any, int]]
Writer = Callable[[Any, bytearray, list[Any]], None]
Codec = tuple[Reader, Writer, str]


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<unset>"


UNSET = _Unset()


class Struct:
    """Base of every generated struct class (each also gets a generated field-wise ``__eq__``)."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    _specs: ClassVar[tuple[FieldSpec, ...]] = ()

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({inner})"


def absent_is_none(spec: FieldSpec) -> bool:
    # A tagged struct (Fetch's DivergingEpoch, CurrentLeader, ...) is written only when it differs from
    # its default, so "absent" is represented as None rather than as a default instance built per object.
    return spec.default == "null" or (spec.tag is not None and spec.is_struct and not spec.is_array)


def default_value(spec: FieldSpec, classes: dict[str, type]) -> Any:
    """A field's schema default: a fresh object for lists and structs, None for an absent tagged struct."""
    if absent_is_none(spec):
        return None
    d = spec.default
    if spec.is_array:
        return []
    t = spec.type
    if spec.is_struct:
        return classes[t]()
    if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return int(d, 0) if d else 0
    if t == "bool":
        return d == "true"
    if t == "float64":
        return float(d) if d else 0.0
    if t == "string":
        return d or ""
    if t == "bytes":
        return b""
    if t == "records":
        return None
    if t == "uuid":
        return ZERO_UUID
    raise ValueError(f"unknown field type {t!r} of {spec.name}")


def _is_mutable_default(spec: FieldSpec) -> bool:
    return not absent_is_none(spec) and (spec.is_array or spec.is_struct)


_S = TypeVar("_S", bound=Struct)


def make_struct_class(
    name: str, fields: list[FieldSpec], classes: dict[str, type], base: type[_S]
) -> type[_S]:
    """A slotted subclass of ``base`` for one struct; its constructor takes every field as a keyword.
    Instances compare field by field and are unhashable (they are mutable)."""
    attrs = tuple(f.attr for f in fields)
    params, body = [], []
    namespace: dict[str, Any] = {"UNSET": UNSET}
    for i, f in enumerate(fields):
        if _is_mutable_default(f):
            params.append(f"{f.attr}=UNSET")
            namespace[f"_make{i}"] = lambda f=f: default_value(f, classes)
            body.append(f"    self.{f.attr} = _make{i}() if {f.attr} is UNSET else {f.attr}")
        else:
            namespace[f"_d{i}"] = default_value(f, classes)
            params.append(f"{f.attr}=_d{i}")
            body.append(f"    self.{f.attr} = {f.attr}")
    signature = f"self, *, {', '.join(params)}" if params else "self"
    src = f"def __init__({signature}):\n" + ("\n".join(body) or "    pass")
    comparisons = " and ".join(f"self.{a} == other.{a}" for a in attrs) or "True"
    src += (
        "\ndef __eq__(self, other):\n"
        "    if type(other) is not type(self):\n"
        "        return NotImplemented\n"
        f"    return {comparisons}\n"
    )
    exec(src, namespace)
    body_attrs = {
        "__slots__": attrs,
        "_fields": attrs,
        "_specs": tuple(fields),
        "__init__": namespace["__init__"],
        "__eq__": namespace["__eq__"],
        "__hash__": None,
    }
    # type() with three arguments is typed as returning a plain type; this one is a subclass of base.
    return cast("type[_S]", type(name, (base,), body_attrs))


class _Emitter:
    """Accumulates indented source lines and hands out unique local names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._n = 0

    def line(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def local(self, stem: str) -> str:
        self._n += 1
        return f"{stem}{self._n}"


class CodecBuilder:
    """Writes and compiles the reader and writer functions of one message at one version."""

    def __init__(self, spec: MessageSpec, version: int, classes: dict[str, type]) -> None:
        self.spec = spec
        self.version = version
        self.classes = classes
        self.flexible = version in spec.flexible_versions
        self.ns: dict[str, Any] = {
            name: getattr(primitives, name) for name in dir(primitives) if not name.startswith("__")
        }
        self.ns.update(
            DecodeError=DecodeError,
            UUID=uuid.UUID,
            unpack_from=struct.unpack_from,
            pack=struct.pack,
        )
        self._structs: dict[tuple[str, ...], str] = {}
        self._done: set[str] = set()
        self._functions: list[str] = []
        self.em = _Emitter()

    # -- helpers --------------------------------------------------------------------------------

    def _field_flexible(self, f: FieldSpec) -> bool:
        versions = f.flexible_versions if f.flexible_versions is not None else self.spec.flexible_versions
        return self.version in versions

    def _nullable(self, f: FieldSpec) -> bool:
        return self.version in f.nullable_versions

    def _struct_const(self, fmt: str) -> str:
        key = (fmt,)
        if key not in self._structs:
            name = f"_S{len(self._structs)}"
            self._structs[key] = name
            self.ns[name] = struct.Struct(">" + fmt)
        return self._structs[key]

    def _const(self, value: Any) -> str:
        name = f"_C{len(self.ns)}"
        self.ns[name] = value
        return name

    def _fields_in_version(
        self, fields: list[FieldSpec]
    ) -> tuple[list[FieldSpec], list[FieldSpec], list[FieldSpec]]:
        """(regular fields, tagged fields by tag, fields absent from this version)."""
        regular, tagged, absent = [], [], []
        for f in fields:
            if self.flexible and self.version in f.tagged_versions:
                tagged.append(f)
            elif self.version in f.versions and self.version not in f.tagged_versions:
                regular.append(f)
            else:
                absent.append(f)
        tagged.sort(key=lambda f: f.tag if f.tag is not None else -1)  # a tagged field always has a tag
        return regular, tagged, absent

    @staticmethod
    def _fixed_groups(fields: list[FieldSpec]) -> list[list[FieldSpec]]:
        """Consecutive fixed-width fields grouped, so each group is one struct pack/unpack."""
        groups: list[list[FieldSpec]] = []
        for f in fields:
            fixed = not f.is_array and f.type in _FIXED
            if (
                fixed
                and groups
                and groups[-1]
                and groups[-1][0].type in _FIXED
                and not groups[-1][0].is_array
            ):
                groups[-1].append(f)
            else:
                groups.append([f])
        return groups

    # -- readers --------------------------------------------------------------------------------

    def reader(self, struct_name: str, fields: list[FieldSpec]) -> str:
        fn = f"_r_{struct_name}"
        if fn in self._done:
            return fn
        self._done.add(fn)
        cls = self._const(self.classes[struct_name])
        em = _Emitter()
        outer, self.em = self.em, em
        em.line(0, f"def {fn}(buf, pos):")
        em.line(1, f"o = {cls}.__new__({cls})")
        regular, tagged, absent = self._fields_in_version(fields)
        for group in self._fixed_groups(regular):
            if group[0].type in _FIXED and not group[0].is_array:
                self._read_fixed_group(group, 1)
            else:
                self._read_value(group[0], f"o.{group[0].attr}", 1, "pos")
        for f in absent + tagged:
            self._assign_default(f, f"o.{f.attr}", 1)
        if self.flexible:
            self._read_tag_buffer(tagged, 1)
        em.line(1, "return o, pos")
        self.em = outer
        self._functions.append("\n".join(em.lines))
        return fn

    def _assign_default(self, f: FieldSpec, target: str, indent: int) -> None:
        if _is_mutable_default(f):
            maker = self._const(lambda f=f: default_value(f, self.classes))
            self.em.line(indent, f"{target} = {maker}()")
        else:
            self.em.line(indent, f"{target} = {self._const(default_value(f, self.classes))}")

    def _read_fixed_group(self, group: list[FieldSpec], indent: int) -> None:
        fmt = "".join(_FIXED[f.type] for f in group)
        s = self._struct_const(fmt)
        names = []
        for f in group:
            names.append(self.em.local("u") if f.type == "uuid" else f"o.{f.attr}")
        self.em.line(
            indent, f"{', '.join(names)}{',' if len(names) == 1 else ''} = {s}.unpack_from(buf, pos)"
        )
        self.em.line(indent, f"pos += {struct.calcsize('>' + fmt)}")
        for f, n in zip(group, names, strict=True):
            if f.type == "uuid":
                self.em.line(indent, f"o.{f.attr} = UUID(bytes={n})")

    def _null_check(self, f: FieldSpec, target: str, indent: int) -> None:
        if not self._nullable(f):
            self.em.line(indent, f"if {target} is None:")
            self.em.line(indent + 1, f"raise DecodeError('null in non-nullable field {f.name}')")

    def _read_value(self, f: FieldSpec, target: str, indent: int, pos: str) -> None:
        em = self.em
        flex = self._field_flexible(f)
        compact = "compact_" if flex else ""
        if f.is_array:
            n = em.local("n")
            em.line(indent, f"{n}, {pos} = read_{compact}array_length(buf, {pos})")
            em.line(indent, f"if {n} < 0:")
            if self._nullable(f):
                em.line(indent + 1, f"{target} = None")
            else:
                em.line(indent + 1, f"raise DecodeError('null array in non-nullable field {f.name}')")
            em.line(indent, "else:")
            self._read_array_elements(f, target, n, indent + 1, pos)
            return
        t = f.type
        if t in _FIXED:
            s = self._struct_const(_FIXED[t])
            v = em.local("v")
            em.line(indent, f"{v}, = {s}.unpack_from(buf, {pos})")
            em.line(indent, f"{pos} += {struct.calcsize('>' + _FIXED[t])}")
            em.line(indent, f"{target} = UUID(bytes={v})" if t == "uuid" else f"{target} = {v}")
        elif t in ("string", "bytes", "records"):
            kind = {"string": "string", "bytes": "bytes", "records": "records"}[t]
            em.line(indent, f"{target}, {pos} = read_{compact}{kind}(buf, {pos})")
            self._null_check(f, target, indent)
        else:  # a single nested struct; nullable ones carry an int8 presence marker
            fn = self.reader(t, self.spec.structs[t])
            if self._nullable(f):
                em.line(indent, f"if buf[{pos}] >= 128:")
                em.line(indent + 1, f"{target} = None")
                em.line(indent + 1, f"{pos} += 1")
                em.line(indent, "else:")
                em.line(indent + 1, f"{target}, {pos} = {fn}(buf, {pos} + 1)")
            else:
                em.line(indent, f"{target}, {pos} = {fn}(buf, {pos})")

    def _read_array_elements(self, f: FieldSpec, target: str, n: str, indent: int, pos: str) -> None:
        em = self.em
        et = f.element_type
        if et in _ELEMENT_SIZE:
            code = _FIXED[et]
            em.line(indent, f"{target} = list(unpack_from('>%d{code}' % {n}, buf, {pos}))")
            em.line(indent, f"{pos} += {_ELEMENT_SIZE[et]} * {n}")
            return
        lst, e = em.local("lst"), em.local("e")
        em.line(indent, f"{lst} = []")
        em.line(indent, f"for _ in range({n}):")
        if f.is_struct:
            fn = self.reader(et, self.spec.structs[et])
            em.line(indent + 1, f"{e}, {pos} = {fn}(buf, {pos})")
        elif et == "string":
            compact = "compact_" if self._field_flexible(f) else ""
            em.line(indent + 1, f"{e}, {pos} = read_{compact}string(buf, {pos})")
        elif et == "uuid":
            em.line(indent + 1, f"{e} = UUID(bytes=bytes(buf[{pos}:{pos} + 16]))")
            em.line(indent + 1, f"{pos} += 16")
        else:
            raise ValueError(f"unsupported array element type {et!r} in {f.name}")
        em.line(indent + 1, f"{lst}.append({e})")
        em.line(indent, f"{target} = {lst}")

    def _read_tag_buffer(self, tagged: list[FieldSpec], indent: int) -> None:
        em = self.em
        nt = em.local("nt")
        em.line(indent, f"{nt}, pos = read_uvarint(buf, pos)")
        em.line(indent, f"for _ in range({nt}):")
        em.line(indent + 1, "tag, pos = read_uvarint(buf, pos)")
        if not tagged:
            em.line(indent + 1, "pos = skip_tagged_field(buf, pos)")
            return
        em.line(indent + 1, "size, pos = read_uvarint(buf, pos)")
        em.line(indent + 1, "end = pos + size")
        for i, f in enumerate(tagged):
            em.line(indent + 1, f"{'if' if i == 0 else 'elif'} tag == {f.tag}:")
            p = em.local("p")
            em.line(indent + 2, f"{p} = pos")
            self._read_value(f, f"o.{f.attr}", indent + 2, p)
        em.line(indent + 1, "if end > len(buf):")
        em.line(indent + 2, "raise DecodeError('tagged field runs past the end of the message')")
        em.line(indent + 1, "pos = end")

    # -- writers --------------------------------------------------------------------------------

    def writer(self, struct_name: str, fields: list[FieldSpec]) -> str:
        fn = f"_w_{struct_name}"
        if fn in self._done:
            return fn
        self._done.add(fn)
        em = _Emitter()
        outer, self.em = self.em, em
        em.line(0, f"def {fn}(o, out, parts):")
        regular, tagged, _ = self._fields_in_version(fields)
        for group in self._fixed_groups(regular):
            if group[0].type in _FIXED and not group[0].is_array:
                fmt = "".join(_FIXED[f.type] for f in group)
                args = ", ".join(f"o.{f.attr}.bytes" if f.type == "uuid" else f"o.{f.attr}" for f in group)
                em.line(1, f"out += {self._struct_const(fmt)}.pack({args})")
            else:
                self._write_value(group[0], f"o.{group[0].attr}", 1, "out")
        if self.flexible:
            self._write_tag_buffer(tagged, 1)
        if len(em.lines) == 1:
            em.line(1, "pass")
        self.em = outer
        self._functions.append("\n".join(em.lines))
        return fn

    def _write_value(self, f: FieldSpec, value: str, indent: int, out: str) -> None:
        em = self.em
        flex = self._field_flexible(f)
        compact = "compact_" if flex else ""
        nullable = self._nullable(f)
        if f.is_array:
            v = em.local("v")
            em.line(indent, f"{v} = {value}")
            em.line(indent, f"if {v} is None:")
            if nullable:
                em.line(indent + 1, f"{out} += {_NULL_COMPACT if flex else _NULL_LENGTH}")
            else:
                em.line(indent + 1, f"raise null_error({f.name!r})")
            em.line(indent, "else:")
            if f.element_type in _ELEMENT_SIZE:  # length and elements in one pack
                code = _FIXED[f.element_type]
                n = em.local("n")
                table = self._const(short_array_structs(code, flex))
                em.line(indent + 1, f"{n} = len({v})")
                em.line(indent + 1, f"if {n} < {SHORT_ARRAY}:")
                em.line(indent + 2, f"{out} += {table}[{n}].pack({n} + 1 if {flex} else {n}, *{v})")
                em.line(indent + 1, "else:")
                em.line(indent + 2, f"write_fixed_array({out}, {code!r}, {v}, {flex})")
                return
            if flex:
                em.line(indent + 1, f"{out} += uvarint(len({v}) + 1)")
            else:
                em.line(indent + 1, f"{out} += I32.pack(len({v}))")
            self._write_array_elements(f, v, indent + 1, out)
            return
        t = f.type
        if t in _FIXED:
            arg = f"{value}.bytes" if t == "uuid" else value
            em.line(indent, f"{out} += {self._struct_const(_FIXED[t])}.pack({arg})")
        elif t == "records":
            em.line(indent, f"write_{compact}records({out}, parts, {value})")
        elif t in ("string", "bytes"):
            prefix = "nullable_" if nullable else ""
            if not nullable:
                em.line(indent, f"if {value} is None:")
                em.line(indent + 1, f"raise null_error({f.name!r})")
            em.line(indent, f"write_{prefix}{compact}{t}({out}, {value})")
        else:
            fn = self.writer(t, self.spec.structs[t])
            if nullable:
                v = em.local("v")
                em.line(indent, f"{v} = {value}")
                em.line(indent, f"if {v} is None:")
                em.line(indent + 1, f"{out} += b'\\xff'")
                em.line(indent, "else:")
                em.line(indent + 1, f"{out} += b'\\x01'")
                em.line(indent + 1, f"{fn}({v}, {out}, parts)")
            else:
                em.line(indent, f"{fn}({value}, {out}, parts)")

    def _write_array_elements(self, f: FieldSpec, v: str, indent: int, out: str) -> None:
        em = self.em
        et = f.element_type
        e = em.local("e")
        em.line(indent, f"for {e} in {v}:")
        if f.is_struct:
            fn = self.writer(et, self.spec.structs[et])
            em.line(indent + 1, f"{fn}({e}, {out}, parts)")
        elif et == "string":
            compact = "compact_" if self._field_flexible(f) else ""
            em.line(indent + 1, f"write_{compact}string({out}, {e})")
        elif et == "uuid":
            em.line(indent + 1, f"{out} += {e}.bytes")
        else:
            raise ValueError(f"unsupported array element type {et!r} in {f.name}")

    def _differs_from_default(self, f: FieldSpec, value: str) -> str:
        if f.default == "null":
            return f"{value} is not None"
        if f.is_array:
            return f"{value} != []"
        if f.is_struct:
            return f"{value} is not None and not {self._is_default_function(f.type)}({value})"
        return f"{value} != {self._const(default_value(f, self.classes))}"

    def _is_default_function(self, struct_name: str) -> str:
        """A generated predicate: every field of the struct equals its default (Kafka writes a tagged
        struct only when it differs from a fresh instance)."""
        fn = f"_isdef_{struct_name}"
        if fn in self._done:
            return fn
        self._done.add(fn)
        checks = []
        for f in self.spec.structs[struct_name]:
            checks.append(f"not ({self._differs_from_default(f, f'o.{f.attr}')})")
        self._functions.append(f"def {fn}(o):\n    return {' and '.join(checks) or 'True'}")
        return fn

    def _write_tag_buffer(self, tagged: list[FieldSpec], indent: int) -> None:
        em = self.em
        if not tagged:
            em.line(indent, "out += b'\\x00'")
            return
        conditions = [self._differs_from_default(f, f"o.{f.attr}") for f in tagged]
        em.line(indent, f"if not ({' or '.join(f'({c})' for c in conditions)}):")
        em.line(indent + 1, "out += b'\\x00'")
        em.line(indent, "else:")
        indent += 1
        tags = em.local("tags")
        em.line(indent, f"{tags} = []")
        for f in tagged:
            em.line(indent, f"if {self._differs_from_default(f, f'o.{f.attr}')}:")
            b = em.local("b")
            em.line(indent + 1, f"{b} = bytearray()")
            self._write_value(f, f"o.{f.attr}", indent + 1, b)
            em.line(indent + 1, f"{tags}.append(({f.tag}, {b}))")
        em.line(indent, f"out += uvarint(len({tags}))")
        em.line(indent, f"for tag, b in {tags}:")
        em.line(indent + 1, "out += uvarint(tag)")
        em.line(indent + 1, "out += uvarint(len(b))")
        em.line(indent + 1, "out += b")

    # -- assembly -------------------------------------------------------------------------------

    def build(self) -> Codec:
        read = self.reader(self.spec.name, self.spec.fields)
        write = self.writer(self.spec.name, self.spec.fields)
        source = "\n\n".join(self._functions) + "\n"
        filename = f"<codec {self.spec.name} v{self.version}>"
        exec(compile(source, filename, "exec"), self.ns)
        return self.ns[read], self.ns[write], source


# -- message classes ------------------------------------------------------------------------------------


class Message(Struct):
    """Base of top-level messages: adds version-aware decode and encode. ``protocol/messages.pyi`` (written
    by ``protocol.stubgen``) declares every message's own class, fields and constructor."""

    __slots__ = ()
    _spec: ClassVar[MessageSpec]
    _codecs: ClassVar[dict[int, Codec]]
    _classes: ClassVar[dict[str, type]]

    @classmethod
    def codec(cls, version: int) -> Codec:
        """(reader, writer, generated source) for one version, compiled once."""
        try:
            return cls._codecs[version]
        except KeyError:
            pass
        codec = CodecBuilder(cls._spec, version, cls._classes).build()
        cls._codecs[version] = codec
        return codec

    @classmethod
    def decode_from(cls, buf: Any, version: int, pos: int = 0) -> tuple[Self, int]:
        """Decode at ``pos``; returns the message and the position after it."""
        try:
            return cls.codec(version)[0](buf, pos)
        except DecodeError:
            raise
        except (struct.error, IndexError, UnicodeDecodeError) as e:  # truncated input or bad UTF-8
            raise DecodeError(f"{cls.__name__} v{version}: {e}") from e

    @classmethod
    def decode(cls, buf: Any, version: int) -> Self:
        return cls.decode_from(buf, version)[0]

    def encode_into(self, version: int, out: bytearray, parts: list[Any]) -> None:
        self.codec(version)[1](self, out, parts)

    def encode_parts(self, version: int) -> list[Any]:
        """The encoding as a list of buffers; large record sets stay separate (zero copy)."""
        out = bytearray()
        parts: list[Any] = []
        self.codec(version)[1](self, out, parts)
        if out or not parts:
            parts.append(out)
        return parts

    def encode(self, version: int) -> bytes:
        parts = self.encode_parts(version)
        return bytes(parts[0]) if len(parts) == 1 else b"".join(parts)


def build_message_class(spec: MessageSpec) -> type[Message]:
    """The class of one message schema, its struct classes as attributes (``MetadataResponse.
    MetadataResponseTopic``); codecs are compiled per version on first use."""
    classes: dict[str, type] = {}
    for name, fields in spec.structs.items():
        classes[name] = make_struct_class(name, fields, classes, Struct)
    top = make_struct_class(spec.name, spec.fields, classes, Message)
    top._spec = spec
    top._codecs = {}
    top._classes = classes
    for name, cls in list(classes.items()):
        cls.__qualname__ = f"{spec.name}.{name}"
        setattr(top, name, cls)
    classes[spec.name] = top
    return top


@cache
def message_class(name: str) -> type[Message]:
    """The class of a message schema by its name, e.g. "FetchResponse"."""
    return build_message_class(load_message(name))
