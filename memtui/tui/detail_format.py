"""The detail pane's text: every field of a record, then the sections a source adds.

Everything from the store goes through ``memtui.render`` (``safe_text`` / ``one_line``)
or ``capped``: literal text, control characters as escapes, long values cut with a
note of how much more there is.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from rich.text import Text

from memtui.core.records import parse_timestamp
from memtui.core.secrets import mask_metadata, secret_paths
from memtui.render import one_line, safe_text
from memtui.sources.base import DetailSection, SourceRecord
from memtui.tui.format import (
    DAMAGE_STYLE,
    DASH,
    DETAIL_CONTENT_CHARS,
    DETAIL_VALUE_CHARS,
    GRADE_STYLES,
    STATE_STYLES,
    capped,
    evidence_grade,
    fit,
    grade_cell,
    has_evidence,
    long_time,
    past_expiry,
    record_label,
    record_metadata,
    relative,
    scope_label,
    scope_value,
    short_time,
    state_style,
)


def _badge(label: str, style: str) -> Text:
    out = Text(" ")
    out.append_text(one_line(label, 40))
    out.append(" ")
    out.stylize(f"reverse {style}")
    return out


def state_badges(record: SourceRecord, now: datetime) -> Text:
    out = Text()
    state = record.state
    out.append_text(_badge(state.upper(), state_style(state)))
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
    raw_meta = record_metadata(record)
    meta = mask_metadata(raw_meta)
    out = Text(no_wrap=False)
    _heading(out, record, meta, now)
    out.append("\n")
    _section(out, "content")
    out.append_text(capped(record.content, DETAIL_CONTENT_CHARS, more="press m to show all"))
    out.append("\n\n")
    _scope_section(out, record, raw_meta, meta, lift)
    if has_evidence(record):
        _evidence_section(out, record, meta)
    _provenance_section(out, record, meta, now)
    _metadata_section(out, raw_meta, meta, revealed, lift)
    out.rstrip()
    return out


def _heading(out: Text, record: SourceRecord, meta: dict[str, Any], now: datetime) -> None:
    """The record's id, tier, type and state badges; why it was refuted; its damage."""
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


def _scope_section(
    out: Text,
    record: SourceRecord,
    raw_meta: dict[str, Any],
    meta: dict[str, Any],
    lift: tuple[str, ...],
) -> None:
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


def _evidence_section(out: Text, record: SourceRecord, meta: dict[str, Any]) -> None:
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


def _provenance_section(
    out: Text, record: SourceRecord, meta: dict[str, Any], now: datetime
) -> None:
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


def _metadata_section(
    out: Text,
    raw_meta: dict[str, Any],
    meta: dict[str, Any],
    revealed: dict[str, Any] | None,
    lift: tuple[str, ...],
) -> None:
    """Every metadata field (secret-named ones masked), then those revealed this session."""
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
