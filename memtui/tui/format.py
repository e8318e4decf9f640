"""Turning records, scores and counts into Rich ``Text`` for the app.

Everything that comes from the database goes through ``memtui.render`` (``safe_text`` /
``one_line``): it is never parsed as markup and control characters show as escapes.
Labels and numbers written by memtui itself are plain ``Text`` too, so no string in
the app is ever interpreted as markup.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich.cells import get_character_cell_size
from rich.text import Text

from memtui.core.records import format_timestamp, parse_timestamp
from memtui.render import one_line, safe_text
from memtui.render import plural as plural  # the app's views count with it too
from memtui.sources.base import SourceRecord

DASH = "—"

DETAIL_CONTENT_CHARS = 100_000
"""The detail pane shows at most this much of a record's content, then says how much is left.

A 1 MB record renders in about the time of a 100 kB one: the pane stays responsive.
"""
DETAIL_VALUE_CHARS = 10_000
"""At most this much of any other field (metadata values, proof, reasons) in the detail pane."""

STATE_STYLES = {
    "live": "green",
    "refuted": "bold red",
    "expired": "bold yellow",
    "inactive": "bold magenta",
    "deleted": "bold red",
}
GRADE_STYLES = {"proven": "green", "hypothesis": "bold yellow"}
DAMAGE_STYLE = "bold red"


@dataclass(frozen=True)
class Column:
    """A fixed-width table column; ``drop_order``: lower drops first when space runs out."""

    key: str
    label: str
    width: int
    drop_order: int | None = None  # None: never dropped


def layout_columns(
    columns: tuple[Column, ...], width: int, min_last: int, padding: int = 1
) -> tuple[list[Column], int]:
    """Which fixed columns fit beside a readable last (text) column, and that column's width."""
    shown = list(columns)

    def last_width() -> int:
        used = sum(c.width + 2 * padding for c in shown)
        return width - used - 2 * padding - 1

    droppable = sorted((c for c in columns if c.drop_order is not None), key=lambda c: c.drop_order)
    while last_width() < min_last and droppable:
        shown.remove(droppable.pop(0))
    return shown, max(last_width(), 12)


def short_date(value: str | int | None) -> str:
    return str(value)[:10] if value not in (None, "") else DASH


def short_time(value: str | None) -> str:
    return str(value)[:16].replace("T", " ") if value not in (None, "") else DASH


def long_time(value: str | None) -> str:
    return str(value)[:19].replace("T", " ") + " UTC" if value not in (None, "") else DASH


def now_label(now: datetime) -> str:
    return short_time(format_timestamp(now)) + "Z"


def relative(value: str | None, now: datetime) -> str:
    """``in 3d`` / ``2h ago`` relative to the store's clock (never the wall clock)."""
    if not value:
        return ""
    try:
        moment = parse_timestamp(value)
    except ValueError:
        return ""
    seconds = (moment - now).total_seconds()
    span = abs(seconds)
    if span < 60:
        amount = f"{int(span)}s"
    elif span < 3600:
        amount = f"{int(span // 60)}m"
    elif span < 86400 * 2:
        amount = f"{int(span // 3600)}h"
    else:
        amount = f"{int(span // 86400)}d"
    return f"in {amount}" if seconds > 0 else f"{amount} ago"


def _crop_end(text: Text, cells: int) -> Text:
    """The last characters of ``text`` that fit in ``cells`` terminal cells."""
    used = 0
    start = len(text.plain)
    for index in range(len(text.plain) - 1, -1, -1):
        size = get_character_cell_size(text.plain[index])
        if used + size > cells:
            break
        used += size
        start = index
    return text[start:]


def fit(value: object, cells: int) -> Text:
    """Untrusted text on one line in at most ``cells`` terminal cells, cut in the middle.

    ``python:postgr…rest:flask``: both ends stay, where fingerprints differ.
    Measured after control characters become visible escapes (``\\x1b`` takes four
    cells) and with wide characters counted as two, so a label never pushes what
    follows it (a count, a border) off the line. Costs the same for a 1 MB value.
    """
    raw = "" if value is None else str(value)
    cells = max(cells, 1)
    if len(raw) <= 2 * cells:
        whole = one_line(raw, 2 * cells)
        if whole.cell_len <= cells:
            return whole
    head_cells = (cells - 1) // 2
    tail_cells = cells - 1 - head_cells
    head = one_line(raw[:cells], cells)
    head.truncate(head_cells, overflow="crop")
    out = Text()
    out.append_text(head)
    out.append("…")
    if tail_cells > 0:
        out.append_text(_crop_end(one_line(raw[-cells:], cells), tail_cells))
    return out


def capped(
    value: object, limit: int, *, keep_lines: bool = True, style: str = "", more: str = ""
) -> Text:
    """The start of untrusted text, at most ``limit`` characters, saying how much is left
    (and ``more``: how to see it)."""
    raw = "" if value is None else str(value)
    out = safe_text(raw[:limit], keep_lines=keep_lines, style=style)
    if len(raw) > limit:
        out.append(f"… {len(raw) - limit:,} more characters not shown", style="bold yellow")
        if more:
            out.append(f" — {more}", style="bold yellow")
    return out


# ---------------------------------------------------------------- records (SourceRecord)

SCOPE_LABELS = {
    "profile_hash": "profile",
    "run_id": "run",
    "tool_name": "tool",
    "url_pattern": "url pattern",
}
"""How the tree and the detail pane name the native scope keys (any other key: as is)."""


def scope_label(key: str) -> str:
    return SCOPE_LABELS.get(key, key)


def hidden_words(hidden_state: str) -> str:
    """What a source's hidden records are, for labels: ``refuted and expired``, ``expired``."""
    if not hidden_state or hidden_state == "expired":
        return "expired"
    return f"{hidden_state} and expired"


def record_label(record_id: str) -> str:
    """``#12`` for a native (whole-number) id; any other id as is."""
    return f"#{record_id}" if record_id.isdigit() else record_id


def refutable(record: SourceRecord | None) -> bool:
    """Whether ``r`` applies: a tactic that is not refuted already."""
    return record is not None and record.record_type == "tactic" and record.state != "refuted"


def record_state(record: SourceRecord, now: datetime | None = None) -> str:
    """The record's state as its source judged it (``live``, ``refuted``, ``expired``...)."""
    return record.state


def record_metadata(record: SourceRecord) -> dict[str, Any]:
    return record.metadata if isinstance(record.metadata, dict) else {}


def evidence_grade(record: SourceRecord) -> Any:
    return record_metadata(record).get("evidence_grade")


def has_evidence(record: SourceRecord) -> bool:
    """Whether the record carries memtui's evidence metadata (grade, successes/attempts)."""
    meta = record_metadata(record)
    return bool(meta.get("evidence_grade")) or "total_attempts" in meta


def past_expiry(record: SourceRecord, now: datetime) -> bool:
    """Expired by its source's rule or, for a refuted or deleted record, past its expiry too
    (memtui's rule: live while ``expires_at > now``)."""
    if record.state == "expired":
        return True
    if record.state == "live" or not isinstance(record.expires_at, str) or not record.expires_at:
        return False
    try:
        return parse_timestamp(record.expires_at) <= now
    except ValueError:
        return False


def scope_value(record: SourceRecord, key: str) -> str:
    """One scope value as text (a list value, such as tags, joined with commas)."""
    value = record.scope.get(key) if isinstance(record.scope, dict) else None
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value if v is not None)
    return str(value)


def first_scope(record: SourceRecord, keys: tuple[str, ...]) -> str:
    """The first non-empty value among ``keys`` (a foreign source's scope column)."""
    for key in keys:
        value = scope_value(record, key)
        if value:
            return value
    return ""


def counts_text(record: SourceRecord) -> str:
    meta = record_metadata(record)
    if "total_attempts" in meta:
        return f"{meta.get('total_successes', 0)}/{meta.get('total_attempts', 0)}"
    return ""


def state_style(state: str) -> str:
    return STATE_STYLES.get(state, "bold")


def grade_cell(record: SourceRecord) -> Text:
    if record.state == "refuted":
        return Text("REFUTED", style=STATE_STYLES["refuted"])
    grade = evidence_grade(record)
    if not grade:
        return Text("")
    label = "HYPOTHESIS" if grade == "hypothesis" else str(grade)
    out = one_line(label, 12)
    out.stylize(GRADE_STYLES.get(str(grade), ""))
    return out


def expires_cell(record: SourceRecord, now: datetime) -> Text:
    """``expired`` past expiry, the state word of a deleted or inactive record, else the date."""
    if past_expiry(record, now):
        return Text("expired", style=STATE_STYLES["expired"])
    if record.state not in ("live", "refuted"):
        return safe_text(record.state, limit=12, style=state_style(record.state))
    if record.expires_at in (None, ""):
        return Text(DASH, style="dim")
    return one_line(short_date(record.expires_at), 12)


ROW_KEYS = ("id", "type", "tool", "grade", "sa", "created", "expires", "scope", "content")
"""The cells ``record_row`` makes; a table shows the ones its source can fill."""


def record_row(
    record: SourceRecord,
    now: datetime,
    content_width: int,
    *,
    scope_keys: tuple[str, ...] = (),
    id_width: int | None = None,
    scope_width: int = 14,
    tool_width: int = 8,
    columns: frozenset[str] | None = None,
) -> dict[str, Text]:
    """The cells of one record in a table, by column key (``ROW_KEYS``).

    ``tool`` is the native ``tool_name`` scope, ``grade`` and ``sa`` come from the
    evidence metadata, ``scope`` is the first non-empty value of ``scope_keys`` (cut
    in the middle to ``scope_width``: namespaces differ at their ends).
    A hidden record (any state but live) is dimmed; its state word shows in the
    grade (refuted) or expires (expired, deleted, inactive) cell, or, when that
    column is not among ``columns`` (the ones shown), before the content.
    """
    record_id = fit(record.id, id_width) if id_width else one_line(record.id, 80)
    record_id.justify = "right"
    cells = {
        "id": record_id,
        "type": one_line(record.record_type, 14),
        "tool": fit(scope_value(record, "tool_name"), tool_width),
        "grade": grade_cell(record),
        "sa": Text(counts_text(record), justify="right"),
        "created": one_line(short_date(record.created_at), 12),
        "expires": expires_cell(record, now),
        "scope": fit(first_scope(record, scope_keys), scope_width),
        "content": one_line(record.content, max(content_width - 1, 8)),
    }
    content = cells["content"]
    if record.state != "live" and columns is not None:
        home = "grade" if record.state == "refuted" else "expires"
        if home not in columns:
            word = safe_text(record.state, limit=12, style=state_style(record.state))
            word.append(" · ")
            word.append_text(content)
            content = cells["content"] = word
    if record.damage:
        mark = Text("damaged", style=DAMAGE_STYLE)
        mark.append(" · ")
        mark.append_text(content)
        content = cells["content"] = mark
    content.no_wrap = True
    content.overflow = "ellipsis"
    if record.state != "live":
        for text in cells.values():
            text.stylize("dim")
    return cells


def interval_bar(
    lo: float | None, hi: float | None, bound: float | None, rate: float | None, width: int = 24
) -> Text:
    """The Wilson interval drawn on [0, 1]: ``─`` outside, ``━`` inside, ``┃`` at the bound."""
    out = Text(no_wrap=True)
    if lo is None or hi is None:
        out.append("no data".ljust(width), style="dim")
        return out

    def cell(value: float) -> int:
        return min(width - 1, max(0, int(value * width)))

    start, end = cell(lo), cell(hi)
    mark = cell(bound) if bound is not None else None
    rate_cell = cell(rate) if rate is not None else None
    for i in range(width):
        if i == mark:
            out.append("┃", style="bold green")
        elif i == rate_cell:
            out.append("●", style="cyan")
        elif start <= i <= end:
            out.append("━", style="green")
        else:
            out.append("─", style="dim")
    return out


def share_bar(keyword: float, vector: float, width: int = 30) -> Text:
    """One bar split between the lanes by their share of the merged score."""
    total = keyword + vector
    out = Text(no_wrap=True)
    if total <= 0:
        out.append("·" * width, style="dim")
        return out
    kw_cells = round(width * keyword / total)
    out.append("█" * kw_cells, style="magenta")
    out.append("█" * (width - kw_cells), style="cyan")
    return out


def cell(value: object, limit: int = 200, style: str = "") -> Text:
    """``one_line`` for a table cell that must not wrap: cut with an ellipsis instead."""
    out = one_line(value, limit)
    out.no_wrap = True
    out.overflow = "ellipsis"
    if style:
        out.stylize(style)
    return out
