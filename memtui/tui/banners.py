"""The two banners under the top bar: what the source is (and what to know about it),
and what ``memtui check`` found wrong with the file. Both are laid out for the
terminal's width, again on each resize; the app sets what they say."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual.widgets import Static

from memtui.render import safe_text
from memtui.tui.format import fit, plural

BANNER_PROBLEMS = 6
"""At most this many problems are listed in the check banner (then "… and N more")."""


class SourceBanner(Static):
    """The source's kind and what an operator must know about it (its expiry rule,
    erasure gaps, a live agent, interrupted forgets): one line, more when it matters."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kind_label = ""
        self.writes_refused = False
        """A foreign store opened read-only: forget needs ``--allow-writes``."""
        self.notes: tuple[list[str], int] | None = None
        """The source's notes and how many forgets were interrupted (None: not read yet)."""
        self.moved: str | None = None
        """What happened to the store's file (replaced, deleted), if anything."""

    def lay_out(self, terminal_width: int) -> None:
        """Lay the banner's notes out for the terminal's width (again after a resize)."""
        if self.notes is None and self.moved is None:
            return
        notes, interrupted = self.notes or ([], 0)
        first = Text()
        first.append(self.kind_label, style="bold")
        lines = [first]
        if self.writes_refused:
            lines[0].append(" · read-only: forget needs --allow-writes", style="dim")
        width = max(terminal_width - 4, 40)
        for note in notes:
            text = fitted_note(note, width)
            if lines[-1].cell_len + 3 + text.cell_len <= width:
                lines[-1].append(" · ", style="dim")
                lines[-1].append_text(text)
            else:
                lines.append(text)
        if interrupted and not any("interrupted" in note for note in notes):
            lines.append(
                Text(
                    f"{plural(interrupted, 'interrupted forget')}: see the Audit tab",
                    style="bold red",
                )
            )
        if self.moved is not None:
            moved = Text("✗ ", style="bold red")
            moved.append_text(safe_text(self.moved, limit=width))
            moved.append(": changes are refused · o reopens it", style="bold red")
            lines.insert(0, moved)
        self.update(Text("\n").join(lines))


class CheckBanner(Static):
    """What ``memtui check`` found wrong with the file, or why it could not complete;
    hidden when it found nothing."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.path = Path()
        self.problems: list[dict[str, Any]] = []
        self.failure: str | None = None
        """Why ``memtui check`` could not complete on this file (it raised), if it did not."""

    def lay_out(self, terminal_width: int) -> None:
        """The check banner, laid out for the terminal's width (again after a resize)."""
        problems = self.problems
        width = max(terminal_width - 8, 40)
        if self.failure is not None:
            self.update(self._failure_text(width))
            self.display = True
            return
        if not problems:
            self.display = False
            return
        out = Text()
        out.append(
            f" ✗ memtui check found {plural(len(problems), 'problem')} in this file ",
            style="bold reverse",
        )
        out.append("\n")
        for finding in problems[:BANNER_PROBLEMS]:
            out.append("  • ")
            out.append_text(fit(f"{finding.get('check')}: {finding.get('message')}", width))
            out.append("\n")
        if len(problems) > BANNER_PROBLEMS:
            out.append(f"  … and {len(problems) - BANNER_PROBLEMS} more\n")
        out.append("  Run ")
        out.append_text(self._command(width))
        out.append(" for the full report (--json for scripts).")
        self.update(out)
        self.display = True

    def _command(self, width: int) -> Text:
        command = Text("memtui check ", style="bold")
        command.append_text(fit(str(self.path), max(width - 40, 20)))
        return command

    def _failure_text(self, width: int) -> Text:
        """The banner of a check that could not complete: why, in one line, and what to run."""
        out = Text()
        out.append(" ✗ memtui check could not complete on this file ", style="bold reverse")
        out.append("\n  ")
        reason = (self.failure or "").strip().splitlines()
        out.append_text(fit(reason[-1] if reason else "no reason given", width))
        out.append("\n  Run ")
        out.append_text(self._command(width))
        out.append(" to see more; the file may be damaged.")
        return out


def fitted_note(note: str, width: int) -> Text:
    """A banner note within ``width`` characters: a note that ends with the command that
    fixes it (`` `memtui forget-gaps PATH --allow-writes` ``) is cut before the command,
    so the command stays whole and visible."""
    close = note.rfind("`")
    start = note.rfind("`", 0, close)
    if len(note) <= width or start < 0 or note[close + 1 :].strip(" .;)"):
        return safe_text(note, limit=width)
    command = note[start:]
    room = width - len(command) - 2  # the ellipsis and a space
    if room < 12:
        return safe_text(note, limit=width)
    out = safe_text(note[:start].rstrip(), limit=room)
    out.append(" ")
    out.append_text(safe_text(command))
    return out
