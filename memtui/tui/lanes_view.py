"""The Lanes tab: structured retrieval for a profile (priors, tactics, negative evidence)
and an engagement (host history), as a planner would read it.

Everything comes from the source (``lane_choices`` and ``lanes``); a source without
the ``lanes`` capability (every foreign store) gets one line saying why, no worker."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widget import Widget
from textual.widgets import Label, Select, Static
from textual.worker import get_current_worker

from memtui.render import one_line
from memtui.sources.base import MemorySource
from memtui.sources.capabilities import able, with_article
from memtui.tui.base import Pane, fill_select
from memtui.tui.format import DASH, cell, interval_bar, plural, short_date
from memtui.tui.search_view import COMPACT_BELOW_HEIGHT

SEVERITY_STYLES = {
    "critical": "bold red",
    "high": "red",
    "medium": "yellow",
    "low": "green",
    "info": "dim",
}


def _table(*columns: tuple[str, dict[str, Any]]) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False, expand=False, padding=(0, 1))
    for name, options in columns:
        table.add_column(name, **options)
    return table


def _ids(ids: list[Any], limit: int = 4) -> Text:
    shown = " ".join(f"#{i}" for i in ids[:limit])
    if len(ids) > limit:
        shown += f" +{len(ids) - limit}"
    out = one_line(shown, 200)
    out.stylize("dim")
    return out


def unavailable_text(kind_label: str) -> Text:
    """The one line a source without lanes shows instead of the tab."""
    out = one_line(
        "Lanes (priors, tactics, host history) need a memtui database: "
        f"this is {with_article(kind_label)}.",
        300,
    )
    out.stylize("dim")
    return out


def _bound(value: float | None) -> Text:
    return Text("no data", style="dim") if value is None else Text(f"{value:.4f}", style="bold")


def _rate(value: float | None) -> Text:
    return Text("no data", style="dim") if value is None else Text(f"{value:.3f}")


def priors_table(rows: list[dict[str, Any]], profile: str) -> Table | Text:
    if not rows:
        return Text("No tactics on file for this profile or a similar one.", style="dim")
    table = _table(
        ("tool", {"no_wrap": True, "min_width": 6}),
        ("hits/n", {"justify": "right", "no_wrap": True, "min_width": 6}),
        ("rate", {"justify": "right", "no_wrap": True, "min_width": 5}),
        ("Wilson LB", {"justify": "right", "no_wrap": True, "min_width": 9}),
        ("interval ┃LB ●rate", {"no_wrap": True, "min_width": 22}),
        ("pooled from", {"overflow": "ellipsis", "no_wrap": True, "ratio": 1}),
    )
    table.expand = True
    for row in rows:
        interval = row.get("interval") or (None, None)
        pooled = Text()
        for item in row.get("profiles", []):
            if pooled:
                pooled.append(", ")
            if item["profile_hash"] == profile:
                pooled.append(f"this {item['hits']}/{item['n']}")
            else:
                pooled.append(f"sim {item['similarity']:.2f} {item['hits']}/{item['n']}", "dim")
        pooled.append("  ")
        pooled.append_text(_ids(row.get("record_ids", [])))
        table.add_row(
            cell(row["tool"], 20),
            Text(f"{row['hits']}/{row['n']}"),
            _rate(row.get("rate")),
            _bound(row.get("wilson")),
            interval_bar(interval[0], interval[1], row.get("wilson"), row.get("rate"), 22),
            pooled,
        )
    return table


def tactics_table(rows: list[dict[str, Any]]) -> Table | Text:
    if not rows:
        return Text("No live tactics recorded for exactly this profile.", style="dim")
    table = _table(
        ("grade", {"no_wrap": True, "min_width": 12}),
        ("id", {"justify": "right", "no_wrap": True, "min_width": 3}),
        ("tool", {"no_wrap": True, "min_width": 6}),
        ("s/a", {"justify": "right", "no_wrap": True, "min_width": 5}),
        ("Wilson LB", {"justify": "right", "no_wrap": True, "min_width": 9}),
        ("endpoint", {"no_wrap": True, "overflow": "ellipsis", "ratio": 3}),
        ("param", {"no_wrap": True, "overflow": "ellipsis", "ratio": 1}),
        ("technique", {"no_wrap": True, "overflow": "ellipsis", "ratio": 2}),
    )
    table.expand = True
    for row in rows:
        grade = (
            Text("? HYPOTHESIS", style="bold yellow")
            if row.get("hypothesis")
            else Text("✓ proven", style="green")
        )
        table.add_row(
            grade,
            cell(f"#{row['record_id']}", 40, style="dim"),
            cell(row.get("tool") or "", 20),
            Text(f"{row['hits']}/{row['n']}"),
            _bound(row.get("wilson")),
            cell(row.get("endpoint") or "", 60),
            cell(row.get("param") or "", 20),
            cell(row.get("technique") or "", 40),
        )
    return table


def negative_table(rows: list[dict[str, Any]], min_denominator: int) -> Table | Text:
    if not rows:
        return Text(
            f"No tool has 0 hits over {min_denominator} or more tries for this profile.",
            style="dim",
        )
    table = _table(
        ("tool", {"no_wrap": True}),
        ("hits/n", {"justify": "right"}),
        ("advice", {"no_wrap": True}),
        ("evidence", {"no_wrap": True}),
    )
    for row in rows:
        advice = Text(str(row.get("advice", "deprioritize")), style="bold yellow")
        advice.append(" (not skip)", style="dim")
        table.add_row(
            cell(row["tool"], 20),
            Text(f"{row['hits']}/{row['n']}"),
            advice,
            _ids(row.get("record_ids", [])),
        )
    return table


def history_table(rows: list[dict[str, Any]], total: int | None = None) -> Table | Text:
    """The findings, most severe first; ``total`` when ``rows`` are only the first of them."""
    if not rows:
        return Text(
            "No earlier findings for this engagement (false positives and info are left out).",
            style="dim",
        )
    table = _table(
        ("severity", {"no_wrap": True, "min_width": 8}),
        ("finding", {"no_wrap": True, "min_width": 6}),
        ("run", {"no_wrap": True, "overflow": "ellipsis"}),
        ("type", {"no_wrap": True, "overflow": "ellipsis"}),
        ("title", {"overflow": "ellipsis", "no_wrap": True, "ratio": 2, "min_width": 20}),
        ("url", {"overflow": "ellipsis", "no_wrap": True, "ratio": 1, "min_width": 12}),
        ("created", {"no_wrap": True}),
    )
    table.expand = True
    for row in rows:
        severity = cell(row.get("severity") or DASH, 12)
        severity.stylize(SEVERITY_STYLES.get(str(row.get("severity")), ""))
        table.add_row(
            severity,
            cell(row.get("finding_id") or "", 20),
            cell(row.get("run_id") or "", 20),
            cell(row.get("type") or "", 20),
            cell(row.get("title") or "", 200),
            cell(row.get("url") or "", 100),
            Text(short_date(row.get("created_at")), style="dim"),
        )
    if total is not None and total > len(rows):
        table.caption = Text(
            f"… and {total - len(rows):,} more, less severe or later "
            "(`memtui lanes DB --engagement NAME` lists every one)",
            style="dim",
        )
        table.caption_justify = "left"
    return table


class LanesPane(Pane):
    """Pick a profile and an engagement; the four lanes follow."""

    MIN_DENOMINATOR = 5
    HISTORY_ROWS = 100
    """Findings shown at most: an engagement can hold tens of thousands, and a table
    of them all would hold the screen for minutes."""

    def __init__(self, source: MemorySource, **kwargs: Any) -> None:
        super().__init__(source, **kwargs)
        self.profile: str | None = None
        self.engagement: str | None = None
        self.data: dict[str, Any] = {}
        self.choices: tuple[list[str], list[str]] = ([], [])
        self.choices_requested = False

    @property
    def available(self) -> bool:
        """Whether the source has lanes at all (a memtui database)."""
        return self.source.can("lanes")

    def compose(self) -> ComposeResult:
        if not self.available:
            yield Static(unavailable_text(self.source.kind_label), id="lanes-unavailable")
            return
        with Horizontal(id="lanes-bar"):
            yield Label("profile", classes="field-label")
            yield Select[str](
                [], prompt="choose a profile", id="lanes-profile", type_to_search=False
            )
            yield Label("engagement", classes="field-label")
            yield Select[str](
                [], prompt="choose an engagement", id="lanes-engagement", type_to_search=False
            )
        with VerticalScroll(id="lanes-body") as body:
            body.can_focus = True
            for section, title in (
                ("priors", "priors: per tool, pooled over similar profiles, by Wilson bound"),
                ("tactics", "learned tactics for exactly this profile"),
                ("negative", "negative evidence"),
                ("history", "host history"),
            ):
                static = Static(Text("…", style="dim"), id=f"lane-{section}", classes="lane")
                static.border_title = title
                yield static

    def tab_shown(self) -> None:
        super().tab_shown()
        # Read the profiles when the tab is first shown, not at start: at a
        # million records that work would hold up Browse's first screen.
        if not self.choices_requested:
            self.reload()

    def main_widget(self) -> Widget | None:
        return self.query_one("#lanes-profile", Select) if self.available else None

    def reload(self) -> None:
        self.choices_requested = True
        if self.available:  # no lanes, no worker: the tab says why once
            self._load_choices()

    @work(
        thread=True,
        exclusive=True,
        group="lanes-choices",
        exit_on_error=False,
        name="Reading profiles",
    )
    def _load_choices(self) -> None:
        profiles, tactic_counts, engagements = able(self.source, "lanes").lane_choices()
        if get_current_worker().is_cancelled:
            return
        self.app.call_from_thread(self._apply_choices, profiles, tactic_counts, engagements)

    def _apply_choices(
        self, profiles: list[str], counts: dict[str, int], engagements: list[str]
    ) -> None:
        profile = self.profile if self.profile in profiles else None
        if profile is None and profiles:
            # The profile with the most live tactics is the likeliest question.
            profile = max(profiles, key=lambda p: (counts.get(p, 0), -profiles.index(p)))
        engagement = self.engagement if self.engagement in engagements else None
        if engagement is None and engagements:
            engagement = engagements[0]
        unchanged = (profiles, engagements) == self.choices and (profile, engagement) == (
            self.profile,
            self.engagement,
        )
        self.profile, self.engagement = profile, engagement
        self.choices = (profiles, engagements)
        if not unchanged:  # a live refresh with the same choices leaves the selects alone
            self._fill_selects()
        self._load_lanes(profile, engagement)

    def _fill_selects(self) -> None:
        profiles, engagements = self.choices
        fill_select(self.query_one("#lanes-profile", Select), profiles, self.profile)
        fill_select(self.query_one("#lanes-engagement", Select), engagements, self.engagement)

    def on_resize(self) -> None:
        if not self.available:
            return
        compact = self.app.size.height < COMPACT_BELOW_HEIGHT
        for select in self.query("#lanes-bar Select"):
            select.compact = compact  # type: ignore[attr-defined]
        self.set_class(compact, "-compact")
        if self.choices != ([], []):
            self._fill_selects()

    @on(Select.Changed)
    def _changed(self, event: Select.Changed) -> None:
        event.stop()
        value = event.value if isinstance(event.value, str) else None
        if event.select.id == "lanes-profile":
            self.profile = value
        else:
            self.engagement = value
        self._load_lanes(self.profile, self.engagement)

    @work(thread=True, exclusive=True, group="lanes", exit_on_error=False, name="Computing lanes")
    def _load_lanes(self, profile: str | None, engagement: str | None) -> None:
        data = dict(
            able(self.source, "lanes").lanes(
                profile,
                engagement,
                min_denominator=self.MIN_DENOMINATOR,
                history_limit=self.HISTORY_ROWS,
            )
        )
        data.setdefault("profile", profile)
        data.setdefault("engagement", engagement)
        if get_current_worker().is_cancelled:
            return
        self.app.call_from_thread(self._apply_lanes, data)

    def _apply_lanes(self, data: dict[str, Any]) -> None:
        self.data = data
        profile = data.get("profile")
        none = Text("Choose a profile above.", style="dim")
        priors = self.query_one("#lane-priors", Static)
        tactics = self.query_one("#lane-tactics", Static)
        negative = self.query_one("#lane-negative", Static)
        history = self.query_one("#lane-history", Static)
        if profile:
            prior_rows = data.get("priors") or []
            tactic_rows = data.get("tactics") or []
            negative_rows = data.get("negative") or []
            priors.update(priors_table(prior_rows, profile))
            priors.border_subtitle = plural(len(prior_rows), "tool")
            tactics.update(tactics_table(tactic_rows))
            hypotheses = sum(1 for r in tactic_rows if r.get("hypothesis"))
            tactics.border_subtitle = (
                f"{plural(len(tactic_rows), 'tactic')}, {hypotheses} hypothesis: re-verify"
                if hypotheses
                else plural(len(tactic_rows), "tactic")
            )
            negative.update(negative_table(negative_rows, self.MIN_DENOMINATOR))
            negative.border_subtitle = f"0 hits over ≥ {self.MIN_DENOMINATOR} tries"
        else:
            for static in (priors, tactics, negative):
                static.update(none)
        if data.get("engagement"):
            history_rows = data.get("history") or []
            total = data.get("history_total", len(history_rows))
            history.update(history_table(history_rows, total))
            title = Text("host history: ")
            title.append_text(cell(data["engagement"], 80))
            history.border_title = title
            history.border_subtitle = plural(total, "finding") + (
                f", the first {len(history_rows)} shown" if total > len(history_rows) else ""
            )
        else:
            history.update(Text("Choose an engagement above.", style="dim"))
