"""A restricted unpickler for the points of a Qdrant local folder.

``qdrant-client`` keeps each point of a local collection as ``pickle.dumps`` of
a ``PointStruct`` (and the point's id, pickled, as the row key). Unpickling
runs whatever a pickle names: a crafted point in an untrusted folder runs code
the moment a client opens the folder. memtui never calls ``pickle.loads`` on
these bytes; it uses ``PointUnpickler``, whose ``find_class`` admits only the
classes a real point references and maps them to light local stand-ins:

- ``qdrant_client.http.models.models.PointStruct`` (the point),
- ``qdrant_client.http.models.models.SparseVector`` (a named sparse vector,
  e.g. mem0 2.x's ``bm25`` slot).

That is all ``pickletools.dis`` shows in points written by qdrant-client 1.x
with pydantic 2 (protocol 4; payloads are converted to JSON-safe values before
they are stored, dense vectors are plain lists of floats). Everything else in
such a pickle is built by opcodes (dicts, lists, strings, numbers, sets) that
call no class. Pickles of protocol 3 and older (Python < 3.8) build the
model's fields-set with ``builtins.set``: ``set`` and ``frozenset`` are
admitted too (they only copy an iterable of plain values). A pickle that names
any other global (``os.system``, ``builtins.exec``, ``copyreg._reconstructor``,
numpy, ...) is refused with an ``UnsafePickleError`` naming it, before anything
is called. The stand-ins do
nothing but keep the fields, so no qdrant-client (or pydantic) code runs either,
and qdrant-client need not be installed.

A pickle can also cost more than it weighs: a list inside itself, a 200,000-deep
nesting, or a "billion laughs" of a few hundred bytes (each level a list of ten
references to the level below) that expands to 10^9 values when printed,
indexed or turned into JSON. Before anything is built, ``check_opcodes`` reads
the opcodes (no object is made): at most ``MAX_OBJECTS`` objects, memo slots
below that, and only plain values (numbers, strings, bytes, None) as dict keys
and set members, since hashing a nested tuple costs its whole expanded size and
a deep one overflows the C stack (``set`` and ``frozenset`` hold their members
to the same rule). A pickle that fetches a container back from its memo (shared
parts, cycles), nests deeper than ``MAX_DEPTH`` or is longer than ``MAX_TEXT`` is
then walked by ``check_shape``, without recursion: no container inside itself,
at most ``MAX_DEPTH`` levels, ``MAX_VALUES`` values and ``MAX_TEXT`` characters of
text, a shared part counted each time it appears. Any other is a tree whose
size the opcodes already bound. A bound broken is a ``PickleLimitError`` saying
which, before the point costs more.
"""

from __future__ import annotations

import io
import pickle
import pickletools
import struct
from array import array
from dataclasses import dataclass
from typing import Any

#: the modules a pickled point names its classes by (``__module__`` of the models)
POINT_MODULES = frozenset({"qdrant_client.http.models.models", "qdrant_client.http.models"})


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle names a class or function the point reader does not admit."""

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name
        super().__init__(f"{module}.{name}")


#: the bounds of a stored point (a real one: ~10 levels, a value per vector dimension)
MAX_DEPTH = 100
MAX_OBJECTS = 1_000_000
MAX_VALUES = 1_000_000
MAX_TEXT = 16 * 1024 * 1024


@dataclass(frozen=True)
class PickleLimits:
    """The bounds ``check_opcodes`` and ``check_shape`` hold a pickle to: a point's by
    default; a reader of a bigger plain pickle (a Chroma segment's id map, one entry per
    element) passes bounds scaled to what it expects."""

    objects: int = MAX_OBJECTS
    values: int = MAX_VALUES
    text: int = MAX_TEXT
    depth: int = MAX_DEPTH


POINT_LIMITS = PickleLimits()


class PickleLimitError(pickle.UnpicklingError):
    """A pickle that would cost more than a point can: ``reason`` says which bound."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class _Model:
    """A stand-in for a pydantic model of qdrant-client: keeps its fields, runs nothing."""

    __slots__ = ("fields",)
    model = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.fields: dict[str, Any] = dict(kwargs)

    def __setstate__(self, state: Any) -> None:
        # pydantic 2 pickles {'__dict__': fields, '__pydantic_extra__': ...,
        # '__pydantic_fields_set__': ..., '__pydantic_private__': ...};
        # pydantic 1 pickled {'__dict__': fields, '__fields_set__': ...}.
        if isinstance(state, tuple) and len(state) == 2:
            state = state[0] if isinstance(state[0], dict) else state[1]
        fields = state.get("__dict__", state) if isinstance(state, dict) else {}
        self.fields = dict(fields) if isinstance(fields, dict) else {}

    def __repr__(self) -> str:
        return f"<stored {self.model} {sorted(self.fields)}>"


class StoredPointStruct(_Model):
    __slots__ = ()
    model = "PointStruct"


class StoredSparseVector(_Model):
    __slots__ = ()
    model = "SparseVector"


ADMITTED: dict[str, type[_Model]] = {
    "PointStruct": StoredPointStruct,
    "SparseVector": StoredSparseVector,
}


def admitted_names() -> str:
    return ", ".join(f"qdrant_client.http.models.{name}" for name in ADMITTED)


def _plain_set(items: Any = ()) -> set[Any]:
    """``builtins.set`` for an old pickle's fields-set: of plain values only (see bounds)."""
    return set(_plain_members(items))


def _plain_frozenset(items: Any = ()) -> frozenset[Any]:
    return frozenset(_plain_members(items))


def _plain_members(items: Any) -> list[Any]:
    members = list(items)
    _require_plain(
        [0 if isinstance(m, str | bytes | int | float) or m is None else 1 for m in members],
        "a set member",
    )
    return members


SAFE_BUILTINS: dict[tuple[str, str], Any] = {
    ("builtins", "set"): _plain_set,
    ("builtins", "frozenset"): _plain_frozenset,
    ("__builtin__", "set"): _plain_set,
    ("__builtin__", "frozenset"): _plain_frozenset,
}


class PointUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` that resolves only the point model's classes, to stand-ins."""

    def find_class(self, module: str, name: str) -> Any:
        if module in POINT_MODULES and name in ADMITTED:
            return ADMITTED[name]
        if (module, name) in SAFE_BUILTINS:
            return SAFE_BUILTINS[(module, name)]
        raise UnsafePickleError(module, name)

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("<persistent id>", repr(pid)[:40])


#: what ``pickletools`` calls the values an opcode pushes that hash in linear time
_PLAIN_TYPES = frozenset(
    {"int", "int_or_bool", "bool", "float", "str", "bytes", "bytes_or_str", "None"}
)
#: how each kind of argument is laid out: its size, or the width of its length prefix
_LINE, _TWO_LINES = -1, -2
_PREFIX = {"string1": 1, "bytes1": 1, "unicodestring1": 1, "long1": 1, "string4": 4}
_PREFIX |= {"bytes4": 4, "unicodestring4": 4, "long4": 4}
_PREFIX |= {"bytes8": 8, "bytearray8": 8, "unicodestring8": 8}
_KEYS_CHECKED = {"SETITEMS": "a dict key", "DICT": "a dict key"}
_KEYS_CHECKED |= {"ADDITEMS": "a set member", "FROZENSET": "a set member"}


@dataclass(frozen=True)
class _Op:
    """What the opcode scan needs of one opcode (from ``pickletools.opcodes``)."""

    name: str
    size: int  # fixed argument size; _LINE, _TWO_LINES; or minus the prefix width - 10
    pops: int  # slots taken below the mark (or from the top when there is no mark)
    mark: bool  # takes everything down to the last mark
    pushes: tuple[bool | None, ...]  # each slot pushed: plain or not; None for a mark
    in_place: bool  # adds to the container below what it takes (APPEND, SETITEM, BUILD...)


def _describe(op: pickletools.OpcodeInfo) -> _Op:
    before = [item.name for item in op.stack_before]
    mark = "mark" in before
    arg = op.arg
    if arg is None:
        size = 0
    elif arg.name in _PREFIX:
        size = -10 - _PREFIX[arg.name]
    elif arg.name == "stringnl_noescape_pair":
        size = _TWO_LINES
    elif arg.n < 0:
        size = _LINE
    else:
        size = arg.n
    return _Op(
        name=op.name,
        size=size,
        pops=before.index("mark") if mark else len(before),
        mark=mark,
        pushes=tuple(
            None if item.name == "mark" else item.name in _PLAIN_TYPES for item in op.stack_after
        ),
        in_place=op.name in _IN_PLACE,
    )


_IN_PLACE = frozenset({"APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS", "BUILD"})
_OPS: dict[int, _Op] = {ord(op.code): _describe(op) for op in pickletools.opcodes}
_GETS = frozenset({"GET", "BINGET", "LONG_BINGET"})
_PUTS = frozenset({"PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"})


def _argument(data: bytes, pos: int, size: int) -> tuple[bytes, int]:
    """The argument at ``pos`` and where the next opcode starts."""
    if size >= 0:
        end = pos + size
    elif size == _LINE:
        end = data.index(b"\n", pos) + 1
    elif size == _TWO_LINES:
        end = data.index(b"\n", data.index(b"\n", pos) + 1) + 1
    else:
        width = -10 - size
        length = int.from_bytes(data[pos : pos + width], "little", signed=width == 4)
        if length < 0:
            raise ValueError("a negative length")
        end = pos + width + length
    if end > len(data):
        raise ValueError("the pickle ends inside an argument")
    return data[pos:end], end


def _memo_slot(op: _Op, arg: bytes, limit: int) -> int:
    slot = int(arg) if op.size == _LINE else int.from_bytes(arg, "little")
    if slot >= limit:
        raise PickleLimitError(f"uses memo slot {slot} (more than {limit:,})")
    return slot


_SHORT_BINUNICODE, _MEMOIZE, _BINFLOAT, _MARK, _BINGET = 0x8C, 0x94, 0x47, 0x28, 0x68
#: what a protocol-3 dict of strings and integers is full of: BININT, BININT1, BININT2
#: by the size of their argument, and BINUNICODE (0: a 4-byte length, then the text)
_SCALARS = {0x4A: 4, 0x4B: 1, 0x4D: 2, 0x58: 0}


def _scalar_run(data: bytes, pos: int) -> tuple[int, int]:
    """Where a run of ``_SCALARS`` opcodes from ``pos`` ends, and how many it holds (a
    dict's keys and values, in one call)."""
    size = len(data)
    count = 0
    while pos < size:
        code = data[pos]
        if code == 0x58:
            if pos + 5 > size:
                raise ValueError(f"a string that does not fit at byte {pos}")
            length = _INT4(data, pos + 1)[0]
            if length < 0 or pos + 5 + length > size:
                raise ValueError(f"a string that does not fit at byte {pos}")
            pos += 5 + length
        elif code in _SCALARS:
            pos += 1 + _SCALARS[code]
        else:
            break
        count += 1
    return pos, count


_INT4 = struct.Struct("<i").unpack_from


def _float_run(data: bytes, pos: int) -> tuple[int, int]:
    """Where a run of BINFLOAT opcodes from ``pos`` ends (a vector, found in C), and how
    many it holds."""
    opcodes = data[pos::9]
    count = len(opcodes) - len(opcodes.lstrip(b"G"))
    while count and pos + 9 * count > len(data):
        count -= 1
    if not count:  # a float the pickle ends inside: stepping over none would loop forever
        raise ValueError(f"the pickle ends inside a float at byte {pos}")
    return pos + 9 * count, count


def check_opcodes(data: bytes, limits: PickleLimits = POINT_LIMITS) -> bool:
    """Refuse a pickle that builds too many objects or hashes anything but plain values;
    whether what it builds needs ``check_shape``.

    Nothing is built: each stack slot is only how deep it may nest (0: a plain
    value), from ``pickletools``' description of each opcode. A pickle that never
    fetches a container from its memo (or duplicates one) builds a tree, each
    part once: no cycle, no part counted twice, and its depth is known here. Only
    one that does, nests deeper than ``limits.depth`` or is bigger than ``limits.text``
    needs the walk. A point's commonest opcodes (a short string, its memo entry, a
    run of floats) and a protocol-3 dict's (strings, integers) take a short path.
    """
    stack: list[int] = []
    marks: list[int] = []
    memo: dict[int, int] = {}
    objects = deepest = pos = 0
    shared = False
    try:
        while True:
            code = data[pos]
            if code == _SHORT_BINUNICODE:
                pos += 2 + data[pos + 1]
                stack.append(0)
                objects += 1
                if data[pos] == _MEMOIZE:
                    memo[len(memo)] = 0
                    pos += 1
                continue
            if code in _SCALARS or code == _BINFLOAT:  # a run of plain values
                pos, count = (_float_run if code == _BINFLOAT else _scalar_run)(data, pos)
                stack.extend([0] * count)
                objects += count
                if objects > limits.objects:
                    raise PickleLimitError(f"builds more than {limits.objects:,} objects")
                continue
            if code == _MEMOIZE:  # one more slot each time: no huge memo
                memo[len(memo)] = stack[-1]
                pos += 1
                continue
            if code == _MARK:
                marks.append(len(stack))
                pos += 1
                continue
            if code == _BINGET:
                value = memo.get(data[pos + 1], 1)
                shared = shared or value > 0
                stack.append(value)
                pos += 2
                continue
            op = _OPS.get(code)
            if op is None:
                raise ValueError(f"unknown opcode {code:#04x} at byte {pos}")
            if op.size == 0:
                arg, pos = b"", pos + 1
            else:
                arg, pos = _argument(data, pos + 1, op.size)
            name = op.name
            if name in _GETS or name == "DUP":
                value = (
                    stack[-1] if name == "DUP" else memo.get(_memo_slot(op, arg, limits.objects), 1)
                )
                shared = shared or value > 0
                stack.append(value)
            elif name in _PUTS:
                slot = len(memo) if name == "MEMOIZE" else _memo_slot(op, arg, limits.objects)
                memo[slot] = stack[-1]
            elif name == "STOP":
                return shared or deepest > limits.depth or len(data) > limits.text
            else:
                depth = _step(op, stack, marks)
                objects += len(op.pushes)
                deepest = max(deepest, depth)
            if objects > limits.objects:
                raise PickleLimitError(f"builds more than {limits.objects:,} objects")
    except (IndexError, ValueError) as exc:  # a slot or mark it does not have, a bad argument
        raise pickle.UnpicklingError(f"not a well-formed pickle ({exc})") from None


def _step(op: _Op, stack: list[int], marks: list[int]) -> int:
    """Apply one opcode to the stack of depths; how deep what it made may nest."""
    name = op.name
    taken = 0
    if name == "SETITEM":
        _require_plain([stack[-2]], "a dict key")
    if op.mark:
        start = marks.pop()
        items = stack[start:]
        if name in _KEYS_CHECKED:
            _require_plain(items if name == "ADDITEMS" else items[0::2], _KEYS_CHECKED[name])
        taken = max(items, default=0)
        del stack[start:]
    if op.pops:
        if len(stack) < op.pops:
            raise ValueError(f"{name} on a stack too short")
        below = stack[-op.pops :]
        del stack[-op.pops :]
        if op.in_place:  # the container stays what it was, or one deeper than what it got
            taken = max(taken, *below[1:]) if len(below) > 1 else taken
            made = max(below[0], taken + 1)
            stack.append(made)
            return made
        taken = max(taken, *below)
    made = 0
    for plain in op.pushes:
        if plain is None:
            marks.append(len(stack))
        else:
            stack.append(0 if plain else taken + 1)
            made = max(made, stack[-1])
    return made


def _require_plain(depths: list[int], what: str) -> None:
    """Refuse anything but plain values (depth 0) where they are hashed."""
    if any(depths):
        raise PickleLimitError(
            f"uses a container as {what} (hashing one costs its whole expanded size)"
        )


_LEAVES = (str, bytes, bytearray)
_CONTAINERS = (list, tuple, set, frozenset)


def _is_vector(value: list[Any]) -> bool:
    """A list of numbers only (a vector): counted at once, in C."""
    try:
        array("d", value)
    except (TypeError, OverflowError):
        return False
    return True


def check_shape(root: Any, limits: PickleLimits = POINT_LIMITS) -> None:
    """Refuse a loaded pickle inside itself, too deep, or too big once expanded.

    The walk keeps its own stack, so no depth makes it recurse; a part reached
    twice (shared by reference) is counted each time, as printing or indexing it
    would expand it. Dict keys are plain (``check_opcodes``): counted, not walked.
    """
    values = 1
    text = 0
    on_path: set[int] = set()  # the containers from the root down to the one walked
    pending: list[tuple[Any, int]] = [(root, 1)]  # (value, depth); depth 0: leave a container
    while pending:
        value, depth = pending.pop()
        if depth == 0:
            on_path.discard(id(value))
            continue
        if isinstance(value, _LEAVES):
            text += len(value)
            if text > limits.text:
                raise PickleLimitError(
                    f"expands to more than {limits.text:,} characters of text "
                    "(a shared part counted each time)"
                )
            continue
        if isinstance(value, dict):
            children: Any = value.values()
            values += 2 * len(value)
            text += sum(len(key) for key in value if isinstance(key, _LEAVES))
        elif type(value) is list and value and _is_vector(value):
            values += len(value)
            children = ()
        elif isinstance(value, _CONTAINERS):
            children = value
            values += len(value)
        elif isinstance(value, _Model):
            children = (value.fields,)
            values += 1
        else:
            continue
        if id(value) in on_path:
            raise PickleLimitError("holds a container inside itself")
        if depth > limits.depth:
            raise PickleLimitError(f"nests deeper than {limits.depth} levels")
        if values > limits.values:
            raise PickleLimitError(
                f"expands to more than {limits.values:,} values (a shared part counted each time)"
            )
        on_path.add(id(value))
        pending.append((value, 0))
        pending.extend([(child, depth + 1) for child in children])


def load_point(data: bytes) -> Any:
    """A stored point as stand-ins; ``UnsafePickleError`` when it names anything else,
    ``PickleLimitError`` when it would cost more than a point can (see the bounds above)."""
    data = bytes(data)
    walk = check_opcodes(data)
    point = PointUnpickler(io.BytesIO(data)).load()
    if walk:
        check_shape(point)
    return point


class _NoClassUnpickler(pickle.Unpickler):
    """For the row keys (a pickled int or str): no class at all is admitted."""

    def find_class(self, module: str, name: str) -> Any:
        raise UnsafePickleError(module, name)

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("<persistent id>", repr(pid)[:40])


def load_plain(data: bytes) -> Any:
    """A pickle that may hold only plain values (ints, strings, containers), within the
    bounds of a point."""
    data = bytes(data)
    walk = check_opcodes(data)
    value = _NoClassUnpickler(io.BytesIO(data)).load()
    if walk:
        check_shape(value)
    return value
