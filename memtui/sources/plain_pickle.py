"""A pickle of plain values, read without unpickling: ``read_plain_pickle``.

Some stores keep a small structure as a pickle of plain values (a Chroma HNSW
segment's ``index_metadata.pickle``: a dict of strings and integers, written by
serde-pickle with protocol 3). ``pickle.loads`` runs whatever a pickle names, so
memtui never hands these bytes to ``pickle``: this reader builds the value itself,
opcode by opcode, and knows only the opcodes that make plain values:

- framing and the stack: ``PROTO``, ``FRAME``, ``STOP``, ``MARK``, ``POP``,
  ``POP_MARK``, ``DUP``;
- values: ``NONE``, ``NEWTRUE``, ``NEWFALSE``, ``BININT``, ``BININT1``,
  ``BININT2``, ``LONG1``, ``LONG4``, ``BINFLOAT``, ``SHORT_BINUNICODE``,
  ``BINUNICODE``, ``BINUNICODE8``, ``SHORT_BINBYTES``, ``BINBYTES``, ``BINBYTES8``;
- containers: ``EMPTY_DICT``, ``DICT``, ``SETITEM``, ``SETITEMS``, ``EMPTY_LIST``,
  ``LIST``, ``APPEND``, ``APPENDS``, ``EMPTY_TUPLE``, ``TUPLE``, ``TUPLE1``,
  ``TUPLE2``, ``TUPLE3``;
- the memo: ``BINPUT``, ``LONG_BINPUT``, ``MEMOIZE``, ``BINGET``, ``LONG_BINGET``.

Any other opcode refuses the whole file, naming it: above all those that name or
call code (``GLOBAL``, ``STACK_GLOBAL``, ``REDUCE``, ``BUILD``, ``INST``, ``OBJ``,
``NEWOBJ``, ``NEWOBJ_EX``, the ``EXT`` registry, persistent ids), but also sets,
byte arrays, out-of-band buffers and protocol 0's text forms, which no plain
structure of these stores uses. No class is ever looked up, so none can run.

What it may cost is bounded before anything is built, by ``safe_pickle``'s own
checks (``check_opcodes`` on the opcodes, then ``check_shape`` on the value when
it shares parts or is big) under the ``PickleLimits`` the caller gives.
"""

from __future__ import annotations

import pickle
import pickletools
import struct
from typing import Any

from memtui.sources.safe_pickle import PickleLimits, check_opcodes, check_shape

#: opcodes that name or call code: the reason a pickle is refused, said as such
CODE_OPCODES = frozenset(
    {
        "GLOBAL",
        "STACK_GLOBAL",
        "REDUCE",
        "BUILD",
        "INST",
        "OBJ",
        "NEWOBJ",
        "NEWOBJ_EX",
        "EXT1",
        "EXT2",
        "EXT4",
        "PERSID",
        "BINPERSID",
    }
)
_NAMES = {ord(op.code): op.name for op in pickletools.opcodes}


class RefusedPickleError(pickle.UnpicklingError):
    """A pickle that holds an opcode the plain reader does not admit."""

    def __init__(self, opcode: str, at: int) -> None:
        self.opcode = opcode
        self.at = at
        what = "names or calls code" if opcode in CODE_OPCODES else "is not a plain value's"
        super().__init__(f"opcode {opcode} at byte {at} {what}: refused, nothing was run")


def read_plain_pickle(data: bytes, limits: PickleLimits) -> Any:
    """The value a pickle of plain values holds, built here from its opcodes (never by
    ``pickle``). ``RefusedPickleError`` for an opcode outside the list above,
    ``PickleLimitError`` for a bound of ``limits`` broken, ``pickle.UnpicklingError``
    for a pickle that is not well formed."""
    data = bytes(data)
    walk = check_opcodes(data, limits)
    try:
        value = _build(data)
    except (IndexError, KeyError, TypeError, ValueError, struct.error) as exc:
        raise pickle.UnpicklingError(f"not a well-formed pickle ({exc})") from None
    if walk:
        check_shape(value, limits)
    return value


def _chunk(data: bytes, start: int, end: int) -> bytes:
    if end > len(data):
        raise ValueError("the pickle ends inside a value")
    return data[start:end]


_SCALAR_CODES = frozenset({0x58, 0x4A, 0x8C, 0x4B, 0x4D})
_UINT4 = struct.Struct("<I").unpack_from
_INT4 = struct.Struct("<i").unpack_from
_UINT2 = struct.Struct("<H").unpack_from


def _scalars(data: bytes, pos: int, stack: list[Any]) -> int:
    """Push a run of strings and small integers (``BINUNICODE``, ``SHORT_BINUNICODE``,
    ``BININT``, ``BININT1``, ``BININT2``: a dict's keys and values) from ``pos``; where the
    run ends."""
    append = stack.append
    size = len(data)
    while pos < size:
        code = data[pos]
        if code == 0x58:  # BINUNICODE
            start = pos + 5
            end = start + _UINT4(data, pos + 1)[0]
        elif code == 0x4A:  # BININT
            append(_INT4(data, pos + 1)[0])
            pos += 5
            continue
        elif code == 0x8C:  # SHORT_BINUNICODE
            start = pos + 2
            end = start + data[pos + 1]
        elif code == 0x4B:  # BININT1
            append(data[pos + 1])
            pos += 2
            continue
        elif code == 0x4D:  # BININT2
            append(_UINT2(data, pos + 1)[0])
            pos += 3
            continue
        else:
            return pos
        if end > size:
            raise ValueError("the pickle ends inside a string")
        append(data[start:end].decode("utf-8", "surrogatepass"))
        pos = end
    return pos


def _build(data: bytes) -> Any:
    """Run the admitted opcodes on a stack of plain values; the value at ``STOP``."""
    stack: list[Any] = []
    marks: list[int] = []
    memo: dict[int, Any] = {}
    pos = 0
    while True:
        code = data[pos]
        if code in _SCALAR_CODES:
            pos = _scalars(data, pos, stack)
        elif code == 0x28:  # MARK
            marks.append(len(stack))
            pos += 1
        elif code in (0x75, 0x65, 0x74, 0x64, 0x6C):  # SETITEMS APPENDS TUPLE DICT LIST
            start = marks.pop()
            items = stack[start:]
            del stack[start:]
            if code == 0x75:
                target = stack[-1]
                if type(target) is not dict:
                    raise TypeError("SETITEMS on something that is not a dict")
                target.update(zip(items[0::2], items[1::2], strict=True))
            elif code == 0x65:
                if type(stack[-1]) is not list:
                    raise TypeError("APPENDS on something that is not a list")
                stack[-1].extend(items)
            elif code == 0x74:
                stack.append(tuple(items))
            elif code == 0x64:
                stack.append(dict(zip(items[0::2], items[1::2], strict=True)))
            else:
                stack.append(items)
            pos += 1
        else:
            pos = _step(data, pos, code, stack, marks, memo)
            if pos < 0:
                if len(stack) != 1 or marks:
                    raise ValueError("STOP with a stack of other than one value")
                return stack[0]


def _step(
    data: bytes, pos: int, code: int, stack: list[Any], marks: list[int], memo: dict[int, Any]
) -> int:
    """The rarer admitted opcodes; where the next one starts (-1 after ``STOP``)."""
    little = int.from_bytes
    name = _NAMES.get(code, f"{code:#04x}")
    if name == "STOP":
        return -1
    if name in ("PROTO", "BINPUT", "BINGET"):
        arg = data[pos + 1]
        if name == "BINPUT":
            memo[arg] = stack[-1]
        elif name == "BINGET":
            stack.append(memo[arg])
        return pos + 2
    if name in ("LONG_BINPUT", "LONG_BINGET"):
        arg = little(data[pos + 1 : pos + 5], "little")
        if name == "LONG_BINPUT":
            memo[arg] = stack[-1]
        else:
            stack.append(memo[arg])
        return pos + 5
    simple = _SIMPLE.get(name)
    if simple is not None:
        simple(stack, marks, memo)
        return pos + 1
    if name == "FRAME":
        return pos + 9
    if name == "BINFLOAT":
        stack.append(struct.unpack(">d", _chunk(data, pos + 1, pos + 9))[0])
        return pos + 9
    sized = _SIZED.get(name)
    if sized is None:
        raise RefusedPickleError(name, pos)
    width, kind = sized
    start = pos + 1 + width
    end = start + little(data[pos + 1 : start], "little")
    if kind == "long":
        stack.append(little(_chunk(data, start, end), "little", signed=True))
    elif kind == "text":
        stack.append(_chunk(data, start, end).decode("utf-8", "surrogatepass"))
    else:
        stack.append(_chunk(data, start, end))
    return end


def _setitem(stack: list[Any], marks: list[int], memo: dict[int, Any]) -> None:
    value = stack.pop()
    key = stack.pop()
    if type(stack[-1]) is not dict:
        raise TypeError("SETITEM on something that is not a dict")
    stack[-1][key] = value


def _append(stack: list[Any], marks: list[int], memo: dict[int, Any]) -> None:
    value = stack.pop()
    if type(stack[-1]) is not list:
        raise TypeError("APPEND on something that is not a list")
    stack[-1].append(value)


def _tuple_of(n: int) -> Any:
    def make(stack: list[Any], marks: list[int], memo: dict[int, Any]) -> None:
        if len(stack) < n:
            raise ValueError("a tuple of more values than the stack holds")
        items = tuple(stack[len(stack) - n :])
        del stack[len(stack) - n :]
        stack.append(items)

    return make


def _pop_mark(stack: list[Any], marks: list[int], memo: dict[int, Any]) -> None:
    del stack[marks.pop() :]


_SIMPLE: dict[str, Any] = {
    "NONE": lambda stack, marks, memo: stack.append(None),
    "NEWTRUE": lambda stack, marks, memo: stack.append(True),
    "NEWFALSE": lambda stack, marks, memo: stack.append(False),
    "EMPTY_DICT": lambda stack, marks, memo: stack.append({}),
    "EMPTY_LIST": lambda stack, marks, memo: stack.append([]),
    "EMPTY_TUPLE": lambda stack, marks, memo: stack.append(()),
    "POP": lambda stack, marks, memo: stack.pop(),
    "DUP": lambda stack, marks, memo: stack.append(stack[-1]),
    "MEMOIZE": lambda stack, marks, memo: memo.__setitem__(len(memo), stack[-1]),
    "POP_MARK": _pop_mark,
    "SETITEM": _setitem,
    "APPEND": _append,
    "TUPLE1": _tuple_of(1),
    "TUPLE2": _tuple_of(2),
    "TUPLE3": _tuple_of(3),
}
#: opcodes whose argument is a length then that many bytes: (the length's width, kind)
_SIZED: dict[str, tuple[int, str]] = {
    "BINUNICODE8": (8, "text"),
    "SHORT_BINBYTES": (1, "bytes"),
    "BINBYTES": (4, "bytes"),
    "BINBYTES8": (8, "bytes"),
    "LONG1": (1, "long"),
    "LONG4": (4, "long"),
}
