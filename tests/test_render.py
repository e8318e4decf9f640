import pytest

from memtui.render import escape_controls, one_line, safe_text


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
