"""The plain-value pickle reader builds what ``pickle`` would, for plain values only, and
refuses every other opcode by name, without calling anything."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from memtui.sources.plain_pickle import CODE_OPCODES, RefusedPickleError, read_plain_pickle
from memtui.sources.safe_pickle import PickleLimitError, PickleLimits

LIMITS = PickleLimits()
SHARED = [1, 2]
PLAIN = [
    {"id_to_label": {"a": 1, "b": 70_000, "c": -3}, "label_to_id": {1: "a"}, "n": None},
    [True, False, None, 2.5, -(2**70), 2**100, "é\ud800", b"bytes", (), (1,), (1, 2), (1, 2, 3)],
    {"x": SHARED, "y": SHARED, "t": (1, 2, 3, 4), "long": "x" * 300, "big": b"y" * 300},
    {},
]


@pytest.mark.parametrize("protocol", [3, 4, 5])
@pytest.mark.parametrize("value", PLAIN, ids=["map", "scalars", "shared", "empty"])
def test_plain_values_read_as_pickle_would_build_them(value, protocol):
    assert read_plain_pickle(pickle.dumps(value, protocol=protocol), LIMITS) == value


class Touches:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def test_code_and_other_kinds_are_refused_by_opcode_and_nothing_runs(tmp_path):
    marker = tmp_path / "touched"
    with pytest.raises(RefusedPickleError) as refused:
        read_plain_pickle(pickle.dumps({"a": Touches(str(marker))}, protocol=4), LIMITS)
    assert refused.value.opcode in CODE_OPCODES and "names or calls code" in str(refused.value)
    assert not marker.exists()
    with pytest.raises(RefusedPickleError, match="opcode EMPTY_SET at byte .* plain value"):
        read_plain_pickle(pickle.dumps({1, 2}, protocol=4), LIMITS)
    with pytest.raises(RefusedPickleError, match="opcode GLOBAL at byte 0"):
        read_plain_pickle(b"cos\nsystem\n(S'echo'\ntR.", LIMITS)


def test_malformed_and_costly_pickles_are_refused_in_one_line():
    truncated_float = b"\x80\x04G\x00\x00"  # once looped forever in the opcode check
    for broken in (
        b"",
        b"\x80\x03}(X\x05\x00\x00\x00ab",
        b"\x80\x03u.",
        b"\x80\x03K\x01K\x02.",
        truncated_float,
    ):
        with pytest.raises(pickle.UnpicklingError):
            read_plain_pickle(broken, LIMITS)
    with pytest.raises(PickleLimitError, match="builds more than 100 objects"):
        read_plain_pickle(pickle.dumps(list(range(200)), protocol=3), PickleLimits(objects=100))
