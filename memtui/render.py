"""Making untrusted memory text safe to show in a terminal.

Memory text is copied by agents from the systems they probe. It is never parsed
as markup, and control characters (C0, DEL, C1, bidi controls, line and
paragraph separators) are shown as visible escapes such as ``\\x1b`` instead of
reaching the terminal.
"""

from __future__ import annotations

import re

from rich.text import Text

# Bidi controls, line/paragraph separators, and invisible characters that can
# hide text: zero-width space, word joiner, BOM and the Unicode tag block.
_BIDI_AND_SEPARATORS = (
    "\u061c\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\u2028\u2029\ufeff"
    "\U000e0000-\U000e007f"
)
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI_AND_SEPARATORS}]")
# What json.dumps(ensure_ascii=False) leaves raw: it escapes C0 controls inside
# strings itself (a raw newline in its output is indentation). These can only
# sit inside strings (JSON's syntax is ASCII), where \uXXXX means the same.
_JSON_UNSAFE = re.compile(f"[\x7f-\x9f{_BIDI_AND_SEPARATORS}]")
_UNSAFE_KEEP_LINES = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI_AND_SEPARATORS}]")

ESCAPE_STYLE = "reverse"


def _escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _json_escape(char: str) -> str:
    units = char.encode("utf-16-be")
    return "".join(
        f"\\u{int.from_bytes(units[i : i + 2], 'big'):04x}" for i in range(0, len(units), 2)
    )


def escape_json_controls(text: str) -> str:
    """``json.dumps`` text with the controls it leaves raw written as ``\\uXXXX``.

    ``json.dumps(..., ensure_ascii=False)`` escapes C0 controls but leaves DEL,
    C1 controls (U+009B is a CSI), bidi overrides and line separators raw, and a
    terminal acts on them. Parsed, the escaped text gives back the exact same
    values; other non-ASCII text stays readable.
    """
    return _JSON_UNSAFE.sub(lambda m: _json_escape(m.group()), text)


def _pattern(keep_lines: bool) -> re.Pattern[str]:
    return _UNSAFE_KEEP_LINES if keep_lines else _UNSAFE


def escape_controls(text: str, *, keep_lines: bool = False) -> str:
    """Plain text with every control character replaced by a visible escape."""
    return _pattern(keep_lines).sub(lambda m: _escape(m.group()), text)


def safe_text(
    value: object,
    *,
    style: str = "",
    keep_lines: bool = False,
    limit: int | None = None,
) -> Text:
    """A Rich ``Text`` of untrusted ``value``: literal, with escapes in reverse video.

    ``limit`` truncates to that many characters (with an ellipsis) before any
    work is done, so a 1 MB record costs no more than a short one in a row.
    """
    raw = "" if value is None else str(value)
    truncated = False
    if limit is not None and len(raw) > limit:
        raw = raw[:limit]
        truncated = True
    if not keep_lines:
        raw = raw.replace("\r\n", "\n")
    out = Text(style=style, no_wrap=False)
    position = 0
    for match in _pattern(keep_lines).finditer(raw):
        if match.start() > position:
            out.append(raw[position : match.start()])
        out.append(_escape(match.group()), style=ESCAPE_STYLE)
        position = match.end()
    if position < len(raw):
        out.append(raw[position:])
    if truncated:
        out.append("…", style="dim")
    return out


def one_line(value: object, limit: int = 200) -> Text:
    """Untrusted text for a table cell: one line, escapes visible, truncated."""
    return safe_text(value, limit=limit)


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 record``, ``47,226 records``: thousands separated; ``many`` for an irregular
    plural (``plural(2, "cached index", "cached indexes")``)."""
    return f"{count:,} " + (word if count == 1 else many or f"{word}s")
