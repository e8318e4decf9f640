"""Malformed corpus JSON: one clear line naming what and where, nothing loaded, no traceback.

The examples below were found by the audit and by the property tests at the end.
"""

import json
import sqlite3

import pytest
from click.testing import CliRunner
from conftest import fixed_clock, one_error_line
from hypothesis import given, settings
from hypothesis import strategies as st

from memtui.cli import main
from memtui.commands.common import json_text
from memtui.core.corpus import MAX_NESTING, CorpusError, load_corpus
from memtui.core.secrets import mask_metadata
from memtui.core.store import MemoryStore


def _note(**extra):
    return {"tier": "working", "record_type": "note", "content": "x", **extra}


def _ingest(tmp_path, text):
    """``memtui ingest`` of corpus ``text``: the result and the database path."""
    corpus = tmp_path / "corpus.json"
    corpus.write_text(text, encoding="utf-8")
    db = tmp_path / "out.db"
    result = CliRunner().invoke(main, ["ingest", str(corpus), "--db", str(db)])
    return result, corpus, db


def _refused(tmp_path, text):
    result, corpus, db = _ingest(tmp_path, text)
    line = one_error_line(result)
    assert not db.exists()  # nothing loaded (the corpus is read before the database opens)
    return line.replace(str(corpus), "CORPUS")


def test_deep_nesting_is_one_line_with_its_place(tmp_path):
    assert _refused(tmp_path, "[" * 100_000) == (
        f"Error: CORPUS: JSON nested more than {MAX_NESTING} levels deep at line 1, "
        f"column {MAX_NESTING + 1}"
    )
    prefix = '  {"tier": "working", "metadata": '
    text = "[\n" + prefix + "[" * 5000 + "]" * 5000 + "}]"
    # the list and the record are levels 1 and 2: the metadata's 63rd bracket opens level 65
    assert _refused(tmp_path, text) == (
        f"Error: CORPUS: JSON nested more than {MAX_NESTING} levels deep at line 2, "
        f"column {len(prefix) + 1 + (MAX_NESTING - 2)}"
    )


def test_nesting_that_parses_but_is_too_deep_names_the_record_and_field(tmp_path):
    nested: list = []
    for _ in range(MAX_NESTING):
        nested = [nested]
    text = json.dumps([_note(), _note(metadata={"k": nested})])
    assert _refused(tmp_path, text) == (
        "Error: CORPUS: record 1: 'metadata.k[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0…' "
        f"nests more than {MAX_NESTING} levels deep"
    )
    # One level less loads: the limit is where the message says it is.
    fits: list = []
    for _ in range(MAX_NESTING - 4):
        fits = [fits]
    result, _, db = _ingest(tmp_path, json.dumps([_note(metadata={"k": fits})]))
    assert result.exit_code == 0, result.output


def test_an_integer_too_long_to_convert_names_the_record_and_field(tmp_path):
    text = '[{"tier": "working", "record_type": "note", "content": "x", "metadata": {"n": ' + (
        "9" * 5000 + "}}]"
    )
    assert _refused(tmp_path, text) == (
        "Error: CORPUS: record 0: 'metadata.n' is a whole number of 5000 digits (at most 4300)"
    )
    text = "[" + "-" + "1" * 4301 + "]"
    assert _refused(tmp_path, text) == (
        "Error: CORPUS: record 0 is a whole number of 4301 digits (at most 4300)"
    )


@pytest.mark.parametrize(
    ("literal", "shown"),
    [
        ("NaN", "NaN, which JSON does not allow"),
        ("Infinity", "Infinity, which JSON does not allow"),
        ("-Infinity", "-Infinity, which JSON does not allow"),
        ("1e400", "1e400, beyond the range of a number"),
    ],
)
def test_numbers_json_does_not_have_are_refused_at_ingest(tmp_path, literal, shown):
    text = (
        '[{"tier": "working", "record_type": "note", "content": "x"},'
        ' {"tier": "working", "record_type": "note", "content": "y",'
        ' "metadata": {"scores": [0.5, ' + literal + "]}}]"
    )
    assert _refused(tmp_path, text) == f"Error: CORPUS: record 1: 'metadata.scores[1]' is {shown}"


@pytest.mark.parametrize(
    ("field", "value"),
    [("expires_at", "0001-01-01T00:00:00+14:00"), ("created_at", "9999-12-31T23:59:59-05:00")],
)
def test_a_date_out_of_range_in_utc_names_the_record_and_field(tmp_path, field, value):
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps([_note(), _note(**{field: value})]), encoding="utf-8")
    with pytest.raises(CorpusError) as caught:
        load_corpus(corpus)
    message = str(caught.value)
    assert message.startswith(f"{corpus}: record 1: '{field}': ")
    assert value in message and "range" in message


def test_a_nan_already_in_a_database_prints_as_strict_json(tmp_path):
    """Stores memtui did not fill can hold NaN: --json stays strict JSON."""
    db = tmp_path / "m.db"
    with MemoryStore(db, clock=fixed_clock) as store:
        store.ingest(load_corpus_text(tmp_path, json.dumps([_note(metadata={"score": 1.0})])))
    conn = sqlite3.connect(db)
    conn.execute("""UPDATE records SET metadata = '{"score": NaN, "top": -Infinity}'""")
    conn.commit()
    conn.close()
    result = CliRunner().invoke(main, ["records", str(db), "--json"])
    assert result.exit_code == 0, result.output

    def refuse(name):
        raise AssertionError(f"{name} in --json output")

    [record] = json.loads(result.output, parse_constant=refuse)
    assert record["metadata"] == {"score": "NaN", "top": "-Infinity"}


def load_corpus_text(tmp_path, text):
    path = tmp_path / "c.json"
    path.write_text(text, encoding="utf-8")
    return load_corpus(path)


# ---------------------------------------------------------------- property tests

KEYS = ["tier", "record_type", "content", "metadata", "created_at", "expires_at", "n", "s"]
EXTREME_DATES = [
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-05:00",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "2026-02-30T00:00:00Z",
    "2026-11-30T12:00:00",
]


def _scalars(with_dates):
    choices = [
        st.integers().map(str),
        st.integers(4000, 6000).map(lambda n: "9" * n),  # beyond int's digit limit
        st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e999", "1.5", "true", "null"]),
        st.text(max_size=8).map(json.dumps),
        st.sampled_from(["working", "note", "episodic", "finding"]).map(json.dumps),
    ]
    if with_dates:
        choices.append(st.sampled_from(EXTREME_DATES).map(json.dumps))
    return st.one_of(choices)


def _json_text(with_dates):
    scalars = _scalars(with_dates)
    trees = st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]")
            | st.dictionaries(st.sampled_from(KEYS), children, max_size=4).map(
                lambda d: "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in d.items()) + "}"
            )
        ),
        max_leaves=10,
    )
    deep = st.tuples(st.integers(MAX_NESTING - 4, 5000), scalars).map(
        lambda t: "[" * t[0] + t[1] + "]" * t[0]
    )
    value = trees | deep
    dates = st.sampled_from(EXTREME_DATES) if with_dates else st.just("2026-11-30T12:00:00Z")
    record = st.tuples(value, dates, st.sampled_from(["created_at", "expires_at"])).map(
        lambda t: (
            '{"tier":"working","record_type":"note","content":"x","metadata":{"v":'
            + t[0]
            + '},"'
            + t[2]
            + '":'
            + json.dumps(t[1])
            + "}"
        )
    )
    corpus = st.lists(record | value, max_size=4).map(lambda xs: "[" + ",".join(xs) + "]")
    text = corpus | value
    cut = st.integers(0, 40)
    return st.tuples(text, cut).map(lambda t: t[0][: len(t[0]) - t[1]] if t[1] else t[0])


def _load_never_tracebacks(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("fuzz") / "c.json"
    path.write_text(text, encoding="utf-8")
    try:
        rows = load_corpus(path)
    except CorpusError as exc:
        assert str(exc).startswith(str(path)) and "\n" not in str(exc)
        return
    with MemoryStore(clock=fixed_clock) as store:
        store.ingest(rows)
        assert store.record_count() == len(rows)
        for record in store.fetch(include_expired=True, include_refuted=True):
            json.loads(json_text(mask_metadata(record.metadata)))


@settings(max_examples=150, deadline=None)
@given(_json_text(with_dates=False))
def test_corpus_text_never_tracebacks_and_never_half_loads(tmp_path_factory, text):
    _load_never_tracebacks(tmp_path_factory, text)


@settings(max_examples=150, deadline=None)
@given(_json_text(with_dates=True))
def test_corpus_text_with_extreme_dates_never_tracebacks(tmp_path_factory, text):
    _load_never_tracebacks(tmp_path_factory, text)
