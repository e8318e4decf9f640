"""Turning records, scores and counts into Rich ``Text`` for the app.

Everything that comes from the database goes through ``memtui.render`` (``safe_text`` /
``one_line``): it is never parsed as markup and control characters show as escapes.
Labels and numbers written by memtui itself are plain ``Text`` too, so no string in
the app is ever interpreted as markup.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich.cells import get_character_cell_size
from rich.text import Text

from memtui.core.records import format_timestamp, parse_timestamp
from memtui.core.secrets import mask_metadata, secret_paths
from memtui.render import one_line, safe_text
from memtui.render import plural as plural  # the app's views count with it too
from memtui.sources.base import DetailSection, SourceRecord

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


def _metadata(record: SourceRecord) -> dict[str, Any]:
    return record.metadata if isinstance(record.metadata, dict) else {}


def evidence_grade(record: SourceRecord) -> Any:
    return _metadata(record).get("evidence_grade")


def has_evidence(record: SourceRecord) -> bool:
    """Whether the record carries memtui's evidence metadata (grade, successes/attempts)."""
    meta = _metadata(record)
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
    meta = _metadata(record)
    if "total_attempts" in meta:
        return f"{meta.get('total_successes', 0)}/{meta.get('total_attempts', 0)}"
    return ""


def _state_style(state: str) -> str:
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
        return safe_text(record.state, limit=12, style=_state_style(record.state))
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
            word = safe_text(record.state, limit=12, style=_state_style(record.state))
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


def _badge(label: str, style: str) -> Text:
    out = Text(" ")
    out.append_text(one_line(label, 40))
    out.append(" ")
    out.stylize(f"reverse {style}")
    return out


def state_badges(record: SourceRecord, now: datetime) -> Text:
    out = Text()
    state = record.state
    out.append_text(_badge(state.upper(), _state_style(state)))
    if state != "expired" and past_expiry(record, now):
        out.append(" ")
        out.append_text(_badge("EXPIRED", STATE_STYLES["expired"]))
    grade = evidence_grade(record)
    if grade:
        out.append(" ")
        label = "HYPOTHESIS: re-verify before trusting" if grade == "hypothesis" else "PROVEN"
        out.append_text(_badge(label, GRADE_STYLES.get(str(grade), "")))
    if record.damage:
        out.append(" ")
        out.append_text(_badge("DAMAGED", DAMAGE_STYLE))
    return out


def _damage_lines(out: Text, record: SourceRecord) -> None:
    """What another writer left unreadable in the row, one line each."""
    out.append("\n")
    _section(out, "damaged row (written by another program)")
    for damage in record.damage:
        out.append("  ")
        out.append_text(capped(damage, DETAIL_VALUE_CHARS, style=DAMAGE_STYLE))
        out.append("\n")


def _field(out: Text, label: str, value: Any, *, width: int = 12, style: str = "") -> None:
    out.append("  ")
    out.append_text(safe_text(f"{label:<{width}}", limit=40, style="dim"))
    out.append(" ")
    if value is None or value == "":
        out.append(DASH, style="dim")
    elif isinstance(value, Text):
        out.append_text(value)
    else:
        out.append_text(capped(value, DETAIL_VALUE_CHARS, keep_lines=False, style=style))
    out.append("\n")


def _section(out: Text, title: str) -> None:
    out.append_text(safe_text(title, limit=200, style="bold"))
    out.append("\n")


def _json_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _moment(value: str | int | None, now: datetime | None = None) -> str:
    """A timestamp as ``YYYY-MM-DD HH:MM:SS UTC`` (with ``now``: and ``(in 3d)``);
    anything else (a revision number, a malformed date) as written."""
    if isinstance(value, str):
        try:
            parse_timestamp(value)
        except ValueError:
            return value
        when = relative(value, now) if now is not None else ""
        return long_time(value) + (f" ({when})" if when else "")
    return str(value)


def record_detail(
    record: SourceRecord,
    now: datetime,
    revealed: dict[str, Any] | None = None,
    *,
    lift: tuple[str, ...] = (),
) -> Text:
    """Every field of a record: state, content, scope, evidence, provenance, metadata.

    Secret-named metadata fields are masked (``memtui.core.secrets``) everywhere they
    are read here; ``revealed`` holds the values the operator revealed in this session,
    each one audited. ``lift`` names metadata fields shown with the scope instead (the
    native ``signature``). Content
    shows up to ``DETAIL_CONTENT_CHARS`` characters, any other value up to
    ``DETAIL_VALUE_CHARS``, each saying how much more there is.
    """
    raw_meta = _metadata(record)
    meta = mask_metadata(raw_meta)
    out = Text(no_wrap=False)
    out.append_text(safe_text(record_label(record.id), limit=400, style="bold"))
    out.append("  ")
    out.append_text(one_line(record.tier, 20))
    out.append(" · ", style="dim")
    out.append_text(one_line(record.record_type, 40))
    out.append("  ")
    out.append_text(state_badges(record, now))
    out.append("\n")
    if record.state == "refuted":
        out.append("  refuted: ", style=STATE_STYLES["refuted"])
        out.append_text(
            capped(meta.get("refuted_reason") or "no reason recorded", DETAIL_VALUE_CHARS)
        )
        if meta.get("refuted_at"):
            out.append("  (")
            out.append_text(one_line(short_time(str(meta["refuted_at"])), 40))
            out.append(")")
            out.stylize("dim", len(out) - 1)
        out.append("\n")
    if record.damage:
        _damage_lines(out, record)
    out.append("\n")
    _section(out, "content")
    out.append_text(capped(record.content, DETAIL_CONTENT_CHARS, more="press m to show all"))
    out.append("\n\n")

    _section(out, "scope")
    scope = record.scope if isinstance(record.scope, dict) else {}
    for key in scope:
        _field(out, scope_label(str(key)), scope_value(record, key))
    for key in lift:
        if key in raw_meta:
            _field(out, key, _json_value(meta[key]))
    if not scope and not any(key in raw_meta for key in lift):
        out.append("  (none)\n", style="dim")
    out.append("\n")

    if has_evidence(record):
        _section(out, "evidence")
        grade = grade_cell(record)
        _field(out, "grade", grade if grade.plain else None)
        if "total_attempts" in meta:
            rate = meta.get("success_rate")
            _field(
                out,
                "successes",
                f"{meta.get('total_successes', 0)} of {meta.get('total_attempts', 0)} attempts"
                + (f" (rate {rate:.3f})" if isinstance(rate, int | float) else ""),
            )
            confidence = meta.get("confidence")
            if isinstance(confidence, int | float):
                _field(out, "confidence", f"{confidence:.4f} (Wilson lower bound)")
        if meta.get("proof"):
            _field(out, "proof", meta.get("proof"))
        out.append("\n")

    _section(out, "provenance")
    _field(out, "created", _moment(record.created_at) if record.created_at else None)
    if record.expires_at not in (None, ""):
        expired = past_expiry(record, now)
        line = capped(
            ("EXPIRED " if expired else "") + _moment(record.expires_at, now),
            DETAIL_VALUE_CHARS,
            keep_lines=False,
        )
        if expired:
            line.stylize(STATE_STYLES["expired"])
        _field(out, "expires", line)
    else:
        _field(out, "expires", "never")
    targets = meta.get("targets_seen")
    if isinstance(targets, list):
        _field(
            out,
            "targets seen",
            f"{len(targets)} (one-way hashes) "
            + ", ".join(str(t) for t in targets[:50])
            + (f", … {len(targets) - 50} more" if len(targets) > 50 else ""),
        )
    if meta.get("finding_id"):
        _field(out, "finding", meta.get("finding_id"))
    out.append("\n")

    _section(out, "metadata")
    shown = {key: value for key, value in meta.items() if key not in lift}
    if not shown:
        out.append("  (none)\n", style="dim")
    secrets = secret_paths(raw_meta)
    keys = {key: fit(key, 40) for key in shown}
    width = min(max((k.cell_len for k in keys.values()), default=0), 20)
    for key, value in shown.items():
        label = keys[key]
        label.stylize("cyan")
        out.append("  ")
        out.append_text(label)
        out.append(" " * max(1, width - label.cell_len + 1))
        out.append_text(capped(_json_value(value), DETAIL_VALUE_CHARS))
        out.append("\n")
    if secrets:
        out.append("  masked: ", style="yellow")
        out.append_text(capped(", ".join(secrets), DETAIL_VALUE_CHARS, style="yellow"))
        out.append("  (v reveals one; every reveal is audited)\n", style="dim")
    for path, value in (revealed or {}).items():
        out.append("  revealed ", style="bold yellow")
        out.append_text(capped(path, 200, style="cyan"))
        out.append(" = ")
        out.append_text(capped(_json_value(value), DETAIL_VALUE_CHARS))
        out.append("\n")
    out.rstrip()
    return out


SECTION_CELL_CHARS = 60
"""A cell of a detail section's table shows at most this many cells of text."""
SECTION_ROWS = 200
"""A detail section's table shows at most this many rows, then says how many more."""


def _section_table(columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> list[Text]:
    """Aligned lines of a small table, every cell inert, cut in the middle to fit."""
    count = max([len(columns)] + [len(row) for row in rows])
    head = [fit(c, SECTION_CELL_CHARS) for c in columns] + [Text("")] * (count - len(columns))
    body = [
        [fit("" if v is None else _json_value(v), SECTION_CELL_CHARS) for v in row]
        + [Text("")] * (count - len(row))
        for row in rows
    ]
    table = ([head] if any(columns) else []) + body
    widths = [max(line[i].cell_len for line in table) for i in range(count)]
    lines: list[Text] = []
    for index, cells in enumerate(table):
        line = Text("  ")
        for i, text in enumerate(cells):
            line.append_text(text)
            if i < count - 1:
                line.append(" " * (widths[i] - text.cell_len + 2))
        line.rstrip()
        if index == 0 and any(columns):
            line.stylize("dim")
        lines.append(line)
    return lines


def detail_sections(sections: list[DetailSection], *, notes: str = "") -> Text:
    """The source's line about a record (``source.notes``) and its extra detail sections
    (``source.detail``): each a title, a small table and a note.

    Every cell is untrusted text: rendered inert, one line each, cut to fit. A section
    of one column (a JSON value, say) keeps its lines, capped like any detail value.
    """
    blocks: list[Text] = []
    if notes:
        block = Text()
        _section(block, "notes")
        block.append("  ")
        block.append_text(capped(notes, DETAIL_VALUE_CHARS, keep_lines=False))
        blocks.append(block)
    for section in sections:
        block = Text()
        _section(block, section.title)
        rows = [tuple(row) for row in section.rows]
        shown = rows[:SECTION_ROWS]
        if len(section.columns) <= 1 and all(len(row) <= 1 for row in shown):
            lines = [
                _indent(capped(_json_value(row[0]), DETAIL_VALUE_CHARS)) for row in shown if row
            ]
        else:
            lines = _section_table(tuple(str(c) for c in section.columns), shown)
        if len(rows) > len(shown):
            lines.append(Text(f"  … {len(rows) - len(shown):,} more rows not shown", style="dim"))
        if section.note:
            note = Text("  ")
            note.append_text(capped(section.note, DETAIL_VALUE_CHARS, keep_lines=False))
            note.stylize("dim")
            lines.append(note)
        block.append_text(Text("\n").join(lines))
        block.rstrip()
        blocks.append(block)
    if not blocks:
        return Text("")
    out = Text("\n", no_wrap=False)
    out.append_text(Text("\n\n").join(blocks))
    return out


def _indent(text: Text) -> Text:
    out = Text("  ")
    for index, line in enumerate(text.split("\n", allow_blank=True)):
        if index:
            out.append("\n  ")
        out.append_text(line)
    return out


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
