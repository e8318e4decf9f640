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

from memtui.core.records import MemoryRecord, format_timestamp, parse_timestamp
from memtui.core.secrets import mask_metadata, secret_paths
from memtui.render import one_line, safe_text

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
}
GRADE_STYLES = {"proven": "green", "hypothesis": "bold yellow"}


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


def record_state(record: MemoryRecord, now: datetime) -> str:
    """``refuted``, ``expired`` or ``live`` (the store's strict expiry rule)."""
    if record.refuted:
        return "refuted"
    if record.is_expired(now):
        return "expired"
    return "live"


def short_date(value: str | None) -> str:
    return value[:10] if value else DASH


def short_time(value: str | None) -> str:
    return value[:16].replace("T", " ") if value else DASH


def long_time(value: str | None) -> str:
    return value[:19].replace("T", " ") + " UTC" if value else DASH


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


def counts_text(record: MemoryRecord) -> str:
    meta = record.metadata
    if "total_attempts" in meta:
        return f"{meta.get('total_successes', 0)}/{meta.get('total_attempts', 0)}"
    return ""


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


def capped(value: object, limit: int, *, keep_lines: bool = True, style: str = "") -> Text:
    """The start of untrusted text, at most ``limit`` characters, saying how much is left."""
    raw = "" if value is None else str(value)
    out = safe_text(raw[:limit], keep_lines=keep_lines, style=style)
    if len(raw) > limit:
        out.append(f"… {len(raw) - limit:,} more characters not shown", style="bold yellow")
    return out


def grade_cell(record: MemoryRecord) -> Text:
    if record.refuted:
        return Text("REFUTED", style=STATE_STYLES["refuted"])
    grade = record.evidence_grade
    if not grade:
        return Text("")
    label = "HYPOTHESIS" if grade == "hypothesis" else str(grade)
    cell = one_line(label, 12)
    cell.stylize(GRADE_STYLES.get(str(grade), ""))
    return cell


def expires_cell(record: MemoryRecord, now: datetime) -> Text:
    if not record.expires_at:
        return Text(DASH, style="dim")
    if record.is_expired(now):
        return Text("expired", style=STATE_STYLES["expired"])
    return Text(short_date(record.expires_at))


def record_row(record: MemoryRecord, now: datetime, content_width: int) -> list[Text]:
    """The cells of one record in a table: id, type, tool, grade, s/a, created, expires, content."""
    hidden = record_state(record, now) != "live"
    cells = [
        Text(str(record.id), justify="right"),
        one_line(record.record_type, 14),
        one_line(record.tool_name or "", 12),
        grade_cell(record),
        Text(counts_text(record), justify="right"),
        Text(short_date(record.created_at)),
        expires_cell(record, now),
        one_line(record.content, max(content_width - 1, 8)),
    ]
    for cell in cells[7:]:
        cell.no_wrap = True
        cell.overflow = "ellipsis"
    if hidden:
        for cell in cells:
            cell.stylize("dim")
    return cells


def _badge(label: str, style: str) -> Text:
    return Text(f" {label} ", style=f"reverse {style}")


def state_badges(record: MemoryRecord, now: datetime) -> Text:
    out = Text()
    state = record_state(record, now)
    out.append_text(_badge(state.upper(), STATE_STYLES[state]))
    if record.refuted and record.is_expired(now):
        out.append(" ")
        out.append_text(_badge("EXPIRED", STATE_STYLES["expired"]))
    grade = record.evidence_grade
    if grade:
        out.append(" ")
        label = "HYPOTHESIS: re-verify before trusting" if grade == "hypothesis" else "PROVEN"
        out.append_text(_badge(label, GRADE_STYLES.get(str(grade), "")))
    return out


def _field(out: Text, label: str, value: Any, *, width: int = 12, style: str = "") -> None:
    out.append(f"  {label:<{width}} ", style="dim")
    if value is None or value == "":
        out.append(DASH, style="dim")
    elif isinstance(value, Text):
        out.append_text(value)
    else:
        out.append_text(capped(value, DETAIL_VALUE_CHARS, keep_lines=False, style=style))
    out.append("\n")


def _section(out: Text, title: str) -> None:
    out.append(title, style="bold")
    out.append("\n")


def _json_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def record_detail(
    record: MemoryRecord, now: datetime, revealed: dict[str, Any] | None = None
) -> Text:
    """Every field of a record: state, content, scope, evidence, provenance, metadata.

    Secret-named metadata fields are masked (``memtui.core.secrets``) everywhere they
    are read here; ``revealed`` holds the values the operator revealed in this session,
    each one audited. Content shows up to ``DETAIL_CONTENT_CHARS`` characters, any other
    value up to ``DETAIL_VALUE_CHARS``, each saying how much more there is.
    """
    raw_meta = record.metadata or {}
    meta = mask_metadata(raw_meta) if isinstance(raw_meta, dict) else {}
    out = Text(no_wrap=False)
    out.append(f"#{record.id}", style="bold")
    out.append("  ")
    out.append_text(one_line(record.tier, 20))
    out.append(" · ", style="dim")
    out.append_text(one_line(record.record_type, 40))
    out.append("  ")
    out.append_text(state_badges(record, now))
    out.append("\n")
    if record.refuted:
        out.append("  refuted: ", style=STATE_STYLES["refuted"])
        out.append_text(
            capped(meta.get("refuted_reason") or "no reason recorded", DETAIL_VALUE_CHARS)
        )
        if meta.get("refuted_at"):
            out.append(f"  ({short_time(meta['refuted_at'])})", style="dim")
        out.append("\n")
    out.append("\n")
    _section(out, "content")
    out.append_text(capped(record.content, DETAIL_CONTENT_CHARS))
    out.append("\n\n")

    _section(out, "scope")
    _field(out, "profile", record.profile_hash)
    _field(out, "engagement", record.engagement)
    _field(out, "run", record.run_id)
    _field(out, "tool", record.tool_name)
    _field(out, "url pattern", record.url_pattern)
    _field(out, "signature", record.signature)
    out.append("\n")

    if "total_attempts" in meta or record.evidence_grade:
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
    _field(out, "created", long_time(record.created_at))
    if record.expires_at:
        state = "EXPIRED " if record.is_expired(now) else ""
        _field(
            out,
            "expires",
            Text(
                f"{state}{long_time(record.expires_at)} ({relative(record.expires_at, now)})",
                style=STATE_STYLES["expired"] if state else "",
            ),
        )
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
    if not meta:
        out.append("  (none)\n", style="dim")
    secrets = secret_paths(raw_meta)
    keys = {key: fit(key, 40) for key in meta}
    width = min(max((k.cell_len for k in keys.values()), default=0), 20)
    for key, value in meta.items():
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


def plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")
