import re

import pytest

from memtui.render import escape_controls, escape_json_controls, one_line, safe_text


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J", "\\x1b[2J"),
        ("\x1b]52;c;SGVsbG8=\x07", "\\x1b]52;c;SGVsbG8=\\x07"),
        ("a\x00b\x7fc\x9bd", "a\\x00b\\x7fc\\x9bd"),
        ("line\u2028next", "line\\u2028next"),
        ("abc\u202eevil", "abc\\u202eevil"),
        ("hid\u200bden", "hid\\u200bden"),
        ("tag\U000e0041s", "tag\\U000e0041s"),
        ("[bold red]x[/]", "[bold red]x[/]"),
        ("注入 🙂 e\u0301", "注入 🙂 e\u0301"),
    ],
)
def test_controls_become_visible_and_markup_stays_text(raw, shown):
    assert escape_controls(raw) == shown
    assert safe_text(raw).plain == shown


def test_escapes_are_styled_and_rows_are_truncated_before_work():
    text = safe_text("a\x1bb")
    assert [span.style for span in text.spans] == ["reverse"]
    row = one_line("x" * 1_000_000, limit=50)
    assert row.plain == "x" * 50 + "…"


def test_detail_keeps_newlines_but_rows_do_not():
    assert safe_text("a\nb", keep_lines=True).plain == "a\nb"
    assert one_line("a\nb").plain == "a\\x0ab"


@pytest.mark.parametrize(
    "raw",
    [
        "del\x7f c1\u009b[2J nel\x85",
        "bidi \u202aa\u202bb\u202cc\u202dd\u202ee \u2066f\u2067g\u2068h\u2069",
        "lines\u2028and\u2029paragraphs",
        "hidden\u200b\ufeff tag\U000e0041",
        "\x1b[2J\x00\x07 C0 (json.dumps escapes these itself)",
    ],
)
def test_json_text_escapes_terminal_controls_and_parses_back_exactly(raw):
    import json

    from memtui.commands.common import json_text

    text = json_text({"content": raw, "keep": "注入 🙂 é [bold]x[/]"})
    assert not re.search(
        "[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff\U000e0000-\U000e007f]",
        text,
    )
    assert json.loads(text) == {"content": raw, "keep": "注入 🙂 é [bold]x[/]"}
    assert "注入 🙂 é [bold]x[/]" in text  # other text stays readable
    assert escape_json_controls(json.dumps("\U000e0041", ensure_ascii=False)) == '"\\udb40\\udc41"'


def test_json_text_is_strict_json_even_for_nan():
    import json
    import math

    from memtui.commands.common import json_text

    def refuse(name):
        raise AssertionError(name)

    data = {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": {"d": (math.nan,)}}
    assert json.loads(json_text(data), parse_constant=refuse) == {
        "a": "NaN",
        "b": ["Infinity", "-Infinity", 1.5],
        "c": {"d": ["NaN"]},
    }
