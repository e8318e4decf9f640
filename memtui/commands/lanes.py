"""`memtui lanes DB --profile P`: the structured retrieval lanes as tables or JSON."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from memtui.commands.common import console, db_argument, emit_json, json_option, open_cli_source
from memtui.core.lanes import DEFAULT_MIN_DENOMINATOR, DEFAULT_MIN_SIMILARITY
from memtui.render import one_line, safe_text
from memtui.sources.capabilities import able

NO_DATA = "no data"
HYPOTHESIS_MARK = "HYPOTHESIS — re-verify"
PROVEN_MARK = "proven"
BAR_WIDTH = 20
NARROW_BAR_WIDTH = 10
WIDE = 100
"""From this many columns on, the tables spread out: the full interval bar, more ids."""
MAX_IDS_SHOWN = 8
NARROW_IDS_SHOWN = 3
MIN_TACTIC_WIDTH = 50
"""Below this width for a tactic's text, its grade wraps onto two lines to leave the text more."""


def _number(value: float | None) -> Text:
    if value is None:
        return Text(NO_DATA, style="dim")
    return Text(f"{value:.4f}")


def _ratio(hits: int, n: int) -> str:
    return f"{hits}/{n}"


def abbreviate_ids(record_ids: list[Any], most: int = MAX_IDS_SHOWN) -> str:
    """``3, 7, 12 +4``: the first ``most`` record ids, then how many more (--json lists all)."""
    shown = ", ".join(str(i) for i in record_ids[:most])
    extra = len(record_ids) - most
    return shown + (f" +{extra}" if extra > 0 else "")


def _ids(out: Console, record_ids: list[Any]) -> Text:
    return one_line(
        abbreviate_ids(record_ids, MAX_IDS_SHOWN if out.width >= WIDE else NARROW_IDS_SHOWN)
    )


def _cell(value: float, width: int) -> int:
    return min(width - 1, max(0, math.floor(value * width)))


def interval_bar(
    interval: tuple[float, float] | list[float] | None,
    rate: float | None,
    width: int = BAR_WIDTH,
) -> Text:
    """The Wilson interval drawn on 0..1: ``━`` spans it, ``●`` marks the raw rate."""
    if interval is None:
        return Text(NO_DATA, style="dim")
    lo, hi = interval
    first, last = _cell(lo, width), _cell(hi, width)
    mark = None if rate is None else _cell(rate, width)
    bar = Text("0▕", style="dim")
    for index in range(width):
        if index == mark:
            bar.append("●", style="bold")
        elif first <= index <= last:
            bar.append("━", style="cyan")
        else:
            bar.append("·", style="dim")
    bar.append("▏1", style="dim")
    return bar


def _table() -> Table:
    return Table()


def _tool_column(table: Table) -> None:
    table.add_column("tool", overflow="fold", max_width=20)


def _priors_table(out: Console, rows: list[dict[str, Any]]) -> Table:
    bar_width = BAR_WIDTH if out.width >= WIDE else NARROW_BAR_WIDTH
    table = _table()
    _tool_column(table)
    table.add_column("hits/n", justify="right", no_wrap=True)
    table.add_column("raw rate", justify="right", no_wrap=True)
    table.add_column("Wilson LB", justify="right", no_wrap=True)
    table.add_column("95% interval" + (" on 0..1" if out.width >= WIDE else ""), no_wrap=True)
    table.add_column("profiles", justify="right", no_wrap=True)
    table.add_column("record ids", min_width=6)
    for row in rows:
        table.add_row(
            one_line(row["tool"], 40),
            _ratio(row["hits"], row["n"]),
            _number(row["rate"]),
            _number(row["wilson"]),
            interval_bar(row["interval"], row["rate"], bar_width),
            str(len(row["profiles"])),
            _ids(out, row["record_ids"]),
        )
    return table


def _grade(row: dict[str, Any]) -> Text:
    if row["hypothesis"]:
        return Text(HYPOTHESIS_MARK, style="bold yellow")
    return Text(PROVEN_MARK, style="green")


def _tactic_text(row: dict[str, Any]) -> Text:
    """Endpoint · param · technique on the first line, then the tactic's content."""
    where = " · ".join(str(p) for p in (row["endpoint"], row["param"], row["technique"]) if p)
    text = Text()
    if where:
        text.append_text(one_line(where, 120))
        text.stylize("bold")
        text.append("\n")
    text.append_text(one_line(row["content"], 300))
    return text


def _tactics_table(out: Console, rows: list[dict[str, Any]]) -> Table:
    # About 42 columns go to rules, padding, id, tool, hits/n and Wilson LB; the grade
    # wraps ("HYPOTHESIS —" / "re-verify") when it would leave the text too little.
    grade_width = len(HYPOTHESIS_MARK)
    if out.width - 42 - grade_width < MIN_TACTIC_WIDTH:
        grade_width = len("HYPOTHESIS —")
    table = _table()
    table.add_column("grade", width=grade_width)
    table.add_column("id", justify="right", no_wrap=True)
    _tool_column(table)
    table.add_column("hits/n", justify="right", no_wrap=True)
    table.add_column("Wilson LB", justify="right", no_wrap=True)
    table.add_column(
        "endpoint · param · technique / content", overflow="fold", min_width=12, ratio=1
    )
    for row in rows:
        table.add_row(
            _grade(row),
            str(row["record_id"]),
            one_line(row["tool"] or "", 40),
            _ratio(row["hits"], row["n"]),
            _number(row["wilson"]),
            _tactic_text(row),
        )
    return table


def _negative_table(out: Console, rows: list[dict[str, Any]]) -> Table:
    table = _table()
    _tool_column(table)
    table.add_column("hits/n", justify="right", no_wrap=True)
    table.add_column("denominator", justify="right", no_wrap=True)
    table.add_column("advice", no_wrap=True)
    table.add_column("profiles", justify="right", no_wrap=True)
    table.add_column("record ids", min_width=6)
    for row in rows:
        table.add_row(
            one_line(row["tool"], 40),
            _ratio(row["hits"], row["n"]),
            str(row["n"]),
            Text(row["advice"], style="yellow"),
            str(len(row["profiles"])),
            _ids(out, row["record_ids"]),
        )
    return table


def _stacked(*parts: Text) -> Text:
    return Text("\n").join(part for part in parts if part.plain)


def _history_table(out: Console, rows: list[dict[str, Any]]) -> Table:
    """Finding and run, severity and type stacked in two narrow columns; the title, then the
    URL dimmed, in the wide one."""
    table = _table()
    table.add_column("id", justify="right", no_wrap=True)
    table.add_column("finding / run", overflow="fold", max_width=20)
    table.add_column("severity / type", overflow="fold", max_width=20)
    table.add_column("title / url", overflow="fold", min_width=12, ratio=1)
    for row in rows:
        url = one_line(row["url"] or "", 200)
        url.stylize("dim")
        table.add_row(
            str(row["record_id"]),
            _stacked(one_line(row["finding_id"] or "", 30), one_line(row["run_id"] or "", 30)),
            _stacked(one_line(row["severity"] or "", 12), one_line(row["type"] or "", 30)),
            _stacked(one_line(row["title"], 300), url),
        )
    return table


def _title(*parts: str | Text) -> Text:
    """A section's title, on its own line above the table (so it wraps at the terminal's
    width, not the table's); untrusted parts arrive as ``safe_text`` already."""
    out = Text(style="bold")
    for part in parts:
        out.append(part if isinstance(part, Text) else Text(part))
    return out


def _note(out: Console, message: str | Text) -> None:
    text = message if isinstance(message, Text) else Text(message)
    text.stylize("italic")
    out.print(text)


def _jsonable_priors(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {**row, "interval": None if row["interval"] is None else list(row["interval"])}
        for row in rows
    ]


@click.command()
@db_argument
@click.option("--profile", "profile", required=True, help="Stack fingerprint, e.g. a:b:c:d:e:f.")
@click.option("--engagement", default=None, help="Show this engagement's earlier findings.")
@click.option(
    "--current-run",
    "current_run",
    default=None,
    help="The run in progress: its findings stay out of the host history.",
)
@click.option(
    "--min-denominator",
    type=click.IntRange(min=1),
    default=DEFAULT_MIN_DENOMINATOR,
    show_default=True,
    help="Fewest pooled tries before a zero-hit tool counts as negative evidence.",
)
@click.option(
    "--min-similarity",
    type=click.FloatRange(0.0, 1.0),
    default=DEFAULT_MIN_SIMILARITY,
    show_default=True,
    help="Pool priors over profiles at least this similar.",
)
@click.option(
    "--per-tool-cap",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Most learned tactics shown per tool.",
)
@json_option
def lanes(
    db: Path,
    profile: str,
    engagement: str | None,
    current_run: str | None,
    min_denominator: int,
    min_similarity: float,
    per_tool_cap: int,
    as_json: bool,
) -> None:
    """Priors, learned tactics, negative evidence and host history for a profile.

    Advisory data with record ids (provenance); it authorizes nothing. Host
    history needs --engagement.
    """
    if current_run is not None and engagement is None:
        raise click.UsageError("--current-run needs --engagement (it filters the host history)")
    with open_cli_source(db, read_only=True) as source:
        report = able(source, "lanes").lane_report(
            profile,
            engagement,
            current_run=current_run,
            min_denominator=min_denominator,
            min_similarity=min_similarity,
            per_tool_cap=per_tool_cap,
        )
    asked = _Asked(profile, engagement, current_run, min_denominator, min_similarity, per_tool_cap)
    if as_json:
        emit_json(_lanes_json(asked, report))
        return
    out = console()
    _print_profile_lanes(out, asked, report)
    _print_history(out, asked, report)


@dataclass(frozen=True)
class _Asked:
    """What ``memtui lanes`` was asked for."""

    profile: str
    engagement: str | None
    current_run: str | None
    min_denominator: int
    min_similarity: float
    per_tool_cap: int


def _lanes_json(asked: _Asked, report: dict[str, Any]) -> dict[str, Any]:
    known_profiles = report["known_profiles"]
    profile_known = asked.profile in known_profiles
    data: dict[str, Any] = {
        "profile": asked.profile,
        "known_profile": profile_known,
        "min_similarity": asked.min_similarity,
        "min_denominator": asked.min_denominator,
        "pooled_profiles": report["pooled"],
        "engagement": asked.engagement,
        "current_run": asked.current_run,
        "priors": _jsonable_priors(report["priors"]),
        "learned_tactics": report["tactics"],
        "negative_evidence": report["negative"],
        "host_history": report["history"],
    }
    if not profile_known:
        data["known_profiles"] = known_profiles
    return data


def _print_profile_lanes(out: Console, asked: _Asked, report: dict[str, Any]) -> None:
    """The priors (and what they pooled), the learned tactics and the negative evidence."""
    profile, min_similarity = asked.profile, asked.min_similarity
    known_profiles, pooled = report["known_profiles"], report["pooled"]
    priors, tactics, negative = report["priors"], report["tactics"], report["negative"]
    shown_profile = safe_text(profile)
    if profile not in known_profiles:
        note = Text("note: no record has exactly the profile ")
        note.append(shown_profile)
        note.append(
            "; learned tactics are empty and the priors pool only similar profiles. "
            "Known profiles: "
        )
        note.append(safe_text(", ".join(known_profiles) or "(none)"))
        _note(out, note)
        out.print()

    others = [p for p in pooled if p["profile_hash"] != profile]
    if others:
        pooled_note = Text(
            f"pooled: this profile and {len(others)} similar one(s) "
            f"(similarity ≥ {min_similarity}): "
        )
        pooled_note.append(
            safe_text(", ".join(f"{p['profile_hash']} ({p['similarity']:.2f})" for p in others))
        )
    else:
        pooled_note = Text(
            f"pooled: this profile only (no other profile has similarity ≥ {min_similarity})"
        )
    if priors:
        out.print(_title("priors for ", shown_profile))
        out.print(_priors_table(out, priors))
    else:
        _note(out, _title("priors for ", shown_profile, ": no live tactic to pool"))
    _note(out, pooled_note)
    _note(out, "priors order work; they are not plan entries. Ranked by Wilson lower bound.")
    out.print()
    _print_tactics(out, asked, tactics)
    _print_negative(out, asked, negative)


def _print_tactics(out: Console, asked: _Asked, tactics: list[dict[str, Any]]) -> None:
    shown_profile = safe_text(asked.profile)
    if tactics:
        out.print(
            _title(
                "learned tactics for exactly ",
                shown_profile,
                f" (proven first, at most {asked.per_tool_cap} per tool)",
            )
        )
        out.print(_tactics_table(out, tactics))
        if any(t["hypothesis"] for t in tactics):
            _note(out, f"{HYPOTHESIS_MARK}: not proven; verify before relying on it.")
    else:
        _note(out, _title("learned tactics: none recorded for exactly ", shown_profile))
    out.print()


def _print_negative(out: Console, asked: _Asked, negative: list[dict[str, Any]]) -> None:
    negative_title = (
        f"negative evidence (zero hits over at least {asked.min_denominator} pooled tries)"
    )
    if negative:
        out.print(_title(negative_title))
        out.print(_negative_table(out, negative))
        _note(out, "deprioritize means try it later, not never: zero hits is not proof.")
    else:
        _note(out, f"{negative_title}: none")
    out.print()


def _print_history(out: Console, asked: _Asked, report: dict[str, Any]) -> None:
    """The engagement's earlier findings (without the current run's), or how to ask."""
    engagement, current_run = asked.engagement, asked.current_run
    if engagement is None:
        _note(out, "host history: not shown; pass --engagement E to list its earlier findings.")
        return
    known_engagements, history = report["known_engagements"], report["history"]
    shown_engagement = safe_text(engagement)
    if engagement not in known_engagements:
        note = Text("note: no record belongs to engagement ")
        note.append(shown_engagement)
        note.append("; known engagements: ")
        note.append(safe_text(", ".join(known_engagements) or "(none)"))
        _note(out, note)
    excluded = "false positives, info findings"
    if current_run is not None:
        excluded = f"run {current_run}, {excluded}"
    history_title = _title("host history for ", shown_engagement, " (without ")
    history_title.append(safe_text(excluded))
    history_title.append(")")
    if history:
        out.print(history_title)
        out.print(_history_table(out, history))
    else:
        history_title.append(": no findings")
        _note(out, history_title)
