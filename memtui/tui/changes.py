"""The confirm-gated changes: refute, forget, forget a scope, reveal.

A key (or the palette) asks for a change; the record (or the scope's blast radius) is
read off the UI thread; a dialog names it and asks for a reason; only then is the
change written, one at a time, waiting its turn while another process holds the
database. ``ChangeFlow`` is the app's layer over ``AppBase`` (the source and the tabs).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.widgets import Static

from memtui.core.secrets import secret_paths
from memtui.render import escape_controls
from memtui.sources.base import ForgetOutcome, SourceRecord
from memtui.sources.changes import Change, NotSaved, Saved, save_change, scope_plan
from memtui.tui.app_base import AppBase
from memtui.tui.format import plural, record_label, scope_label

VERBS = {"forget": "forget", "refute": "refute", "forget-scope": "forget", "reveal": "reveal"}
KEYS = {"forget": "f", "refute": "r", "forget-scope": "F", "reveal": "v"}

READ_ONLY_REASON = (
    "This database is open read-only (--read-only), so nothing can be refuted or forgotten. "
    "Reopen it without --read-only to make changes."
)
CAPABILITY_OF = {
    "forget": "forget",
    "refute": "refute",
    "forget-scope": "forget_scope",
    "reveal": "reveal",
}


class ChangeFlow(AppBase):
    """Asking for a change, confirming it, saving it: the app's part that writes."""

    operator: str | None
    busy_retries: int
    retry_delay: float
    saving: str | None
    """The change on its way to the database (one at a time), if any."""
    busy_attempt: tuple[int, int] | None
    kept_reasons: dict[tuple[str, str], str]
    """The reasons of changes that could not be saved: the operator never types them twice."""

    def current_record(self) -> SourceRecord | None:
        """The highlighted record of the active tab as last read (Browse table or Search)."""
        if self.active_tab == "browse":
            return self.browse.table.current
        if self.active_tab == "search" and self.mounted_pane("search") is not None:
            return self.search.results.current_record()
        return None

    def current_record_id(self) -> str | None:
        """The highlighted record of the active tab (Browse table or Search results)."""
        if self.active_tab == "browse":
            record = self.browse.table.current
            return record.id if record else None
        if self.active_tab == "search" and self.mounted_pane("search") is not None:
            return self.search.results.current_id()
        return None

    def refuse_unless_able(self, kind: str) -> bool:
        """Refuse (with the reason) an action this source cannot do now; True if refused."""
        capability = CAPABILITY_OF[kind]
        if self.source.can(capability):
            return self.refuse_if_saving()
        if self.read_only and capability in self.source.write_capabilities:
            message = READ_ONLY_REASON if self.native else self.source.read_only_message()
            self.notify(message, title="Read-only", severity="warning", timeout=8, markup=False)
        else:
            self.notify(
                f"A {self.source.kind_label} cannot {VERBS[kind]} from memtui.",
                title="Not supported",
                severity="warning",
                markup=False,
            )
        return True

    def refuse_if_saving(self) -> bool:
        """One change at a time: the next waits until the last one reached the database."""
        if self.saving is None:
            return False
        self.notify(
            f"The last {self.saving} is still waiting for the database; try again when it is done.",
            title="Busy",
            severity="warning",
            timeout=5,
        )
        return True

    def request_refute(self, record_id: str | None = None) -> None:
        record_id = self.current_record_id() if record_id is None else record_id
        if record_id is None:
            self.notify("Highlight a record in Browse or Search first.", severity="warning")
            return
        if self.refuse_unless_able("refute"):
            return
        self._prepare("refute", str(record_id))

    def request_forget(self, record_id: str | None = None) -> None:
        record_id = self.current_record_id() if record_id is None else record_id
        if record_id is None:
            self.notify("Highlight a record in Browse or Search first.", severity="warning")
            return
        if self.refuse_unless_able("forget"):
            return
        self._prepare("forget", str(record_id))

    def request_reveal(self, record_id: str | None = None) -> None:
        record_id = self.current_record_id() if record_id is None else record_id
        if record_id is None:
            self.notify("Highlight a record in Browse first.", severity="warning")
            return
        if self.read_only and "reveal" in self.source.write_capabilities:
            self.notify(
                "This database is open read-only (--read-only), and every reveal writes an audit "
                "event. Reopen it without --read-only to reveal a masked field.",
                title="Read-only",
                severity="warning",
                timeout=8,
            )
            return
        if self.refuse_unless_able("reveal"):
            return
        self._prepare("reveal", str(record_id))

    @work(thread=True, exclusive=True, group="prepare", exit_on_error=False, name="Reading record")
    def _prepare(self, kind: str, record_id: str) -> None:
        """Read what the dialog shows (the record; a forget's rule) off the UI thread."""
        moved = self.source.path_changed()
        if moved is not None:  # refused before the operator types a reason
            self.call_from_thread(self._refuse_moved, moved)
            return
        record = self.source.get(record_id)
        preview: dict[str, Any] = {}
        if record is not None and kind == "forget":
            preview = self.source.forget_preview(record_id)
        self.call_from_thread(self._ask, kind, record_id, record, preview)

    def _ask(
        self, kind: str, record_id: str, record: SourceRecord | None, preview: dict[str, Any]
    ) -> None:
        from memtui.tui.dialogs import ConfirmRecordAction, RevealDialog

        if record is None:
            self.notify(
                f"Record {escape_controls(record_label(record_id))} is no longer on file.",
                severity="warning",
                markup=False,
            )
            return
        if kind == "refute":
            if record.record_type != "tactic":
                self.notify(
                    f"Only tactics can be refuted; {escape_controls(record_label(record.id))} is a "
                    f"{escape_controls(record.record_type)}. Forget it instead (f).",
                    title="Not a tactic",
                    severity="warning",
                    markup=False,
                )
                return
            if record.state == "refuted":
                self.notify(
                    f"Tactic {escape_controls(record_label(record.id))} is already refuted.",
                    severity="warning",
                    markup=False,
                )
                return
            self.push_screen(
                ConfirmRecordAction("refute", record, reason=self._kept("refute", record.id)),
                callback=lambda reason: self._confirmed("refute", record.id, reason),
            )
            return
        if kind == "forget":
            removes = [str(r) for r in preview.get("records", [record.id])]
            self.push_screen(
                ConfirmRecordAction(
                    "forget",
                    record,
                    reason=self._kept("forget", record.id),
                    rule=str(preview.get("rule") or ""),
                    removes=len(removes),
                ),
                callback=lambda reason: self._confirmed("forget", record.id, reason),
            )
            return
        fields = secret_paths(record.metadata)
        if not fields:
            self.notify(
                f"Record {escape_controls(record_label(record.id))} has no masked field.",
                severity="warning",
                markup=False,
            )
            return
        dialog = RevealDialog(record, fields, reason=self._kept("reveal", record.id))
        self.push_screen(
            dialog,
            callback=lambda reason: self._confirmed_reveal(record.id, dialog.field, reason),
        )

    def _confirmed_reveal(self, record_id: str, field: str, reason: str | None) -> None:
        if reason is None:
            self.notify("Cancelled: nothing was revealed.", timeout=3)
            return
        self._start_change("reveal", (record_id, field), reason)

    def _revealed(self, record_id: str, field: str, value: Any, event: int | None) -> None:
        self.browse.show_revealed(record_id, field, value)
        self.notify(
            f"Revealed {escape_controls(field)} of record "
            f"{escape_controls(record_label(record_id))} in the detail pane · audit event #{event}",
            title="Revealed",
            timeout=8,
            markup=False,
        )
        if self.mounted_pane("audit") is not None:
            self.audit.reload()

    def request_forget_scope(self, key: str, value: str) -> None:
        """Forget one scope (an engagement, a namespace, a mem0 user...): blast radius first."""
        if self.refuse_unless_able("forget-scope"):
            return
        self._blast_radius(key, value)

    @work(thread=True, exclusive=True, group="radius", exit_on_error=False, name="Blast radius")
    def _blast_radius(self, key: str, value: str) -> None:
        moved = self.source.path_changed()
        if moved is not None:
            self.call_from_thread(self._refuse_moved, moved)
            return
        radius, rule = scope_plan(self.source, (key, value))
        self.call_from_thread(self._show_forget_scope, (key, value), radius, rule)

    def _show_forget_scope(
        self, scope: tuple[str, str], radius: dict[str, dict[str, int]], rule: str
    ) -> None:
        from memtui.tui.dialogs import ForgetEngagementDialog

        if not radius:
            self.notify(
                f"{scope_words(scope).capitalize()} has no records to forget.",
                severity="warning",
                markup=False,
            )
            return
        self.push_screen(
            ForgetEngagementDialog(
                scope[1], radius, reason=self._kept("forget-scope", scope), key=scope[0], rule=rule
            ),
            callback=lambda reason: self._confirmed("forget-scope", scope, reason),
        )

    def _confirmed(self, kind: str, target: Any, reason: str | None) -> None:
        if reason is None:
            self.notify("Cancelled: nothing was changed.", timeout=3)
            return
        self._start_change(kind, target, reason)

    def _refuse_moved(self, moved: str) -> None:
        """Refuse a change (before its dialog, or as it was about to be written)."""
        self._change_done()
        self.moved = moved
        self.refresh_bindings()
        self._render_banner()
        self.notify(
            f"Nothing was changed: {escape_controls(moved)}. Press o to reopen the store "
            "at its path.",
            title="Refused: store file changed",
            severity="error",
            timeout=20,
            markup=False,
        )

    # ------------------------------------------------------------ saving a change

    @staticmethod
    def _key(kind: str, target: Any) -> tuple[str, str]:
        record = target[0] if kind == "reveal" else target
        return (kind, str(record))

    def _kept(self, kind: str, target: Any) -> str:
        """The reason of an earlier try that could not be saved (the dialog pre-fills it)."""
        return self.kept_reasons.get((kind, str(target)), "")

    def _start_change(self, kind: str, target: Any, reason: str) -> None:
        # The reason is kept until the change is saved: a busy database never loses it.
        self.kept_reasons[self._key(kind, target)] = reason
        self.saving = VERBS[kind]
        self.busy_attempt = None
        self._show_busy()
        self._mutate(kind, target, reason)

    def _show_busy(self) -> None:
        badge = self.query_one("#busy", Static)
        if self.saving is None:
            badge.display = False
            badge.remove_class("-busy")
            return
        badge.display = True
        if self.busy_attempt is None:
            badge.update(Text(f"saving {self.saving}…"))
            badge.remove_class("-busy")
        else:
            attempt, total = self.busy_attempt
            badge.update(Text(f"database busy — retrying ({attempt}/{total})"))
            badge.add_class("-busy")

    def _busy(self, attempt: int, total: int, delay: float) -> None:
        first = self.busy_attempt is None
        self.busy_attempt = (attempt, total)
        self._show_busy()
        if first:
            self.notify(
                f"The database is busy (another process is writing). Your {self.saving} "
                f"waits its turn: up to {total} more tries.",
                title="Database busy",
                severity="warning",
                timeout=max(4.0, delay * 2),
            )

    def _change_done(self) -> None:
        self.saving = None
        self.busy_attempt = None
        self._show_busy()

    # Not exclusive: a change that started is never "cancelled" (a thread cannot be stopped).
    @work(thread=True, group="mutation", exit_on_error=False, name="Saving")
    def _mutate(self, kind: str, target: Any, reason: str) -> None:
        """Apply one change through the shared pipeline (``memtui.sources.changes.save_change``),
        each busy retry shown in the header ("database busy — retrying (k/N)"); a change
        given up leaves a notice that keeps the operator's reason."""
        result = save_change(
            self.source,
            Change(kind, target, reason, self.operator),
            retries=self.busy_retries,
            delay=self.retry_delay,
            on_busy=lambda attempt, total, delay: self.call_from_thread(
                self._busy, attempt, total, delay
            ),
        )
        if isinstance(result, NotSaved):
            if result.moved is not None:  # the change would go to a file no longer at the path
                self.call_from_thread(self._refuse_moved, result.moved)
            else:
                self.call_from_thread(self._gave_up, kind, target, reason, result.tries)
            return
        # Our own change is not the agent's: the next poll must not call it "live".
        self.call_from_thread(self._own_change_seen)
        self.call_from_thread(self._mutated, kind, target, *notice_parts(result))

    def _own_change_seen(self) -> None:
        if not self.native:
            self.seen_version = None  # a foreign store's version: re-read on the next look

    def _gave_up(self, kind: str, target: Any, reason: str, tries: int) -> None:
        self._change_done()
        record = target[0] if kind == "reveal" else target
        what = (
            scope_words(target)
            if kind == "forget-scope"
            else f"record {escape_controls(record_label(str(record)))}"
        )
        self.notify(
            f"The database stayed busy: another process held it through {tries} tries, so "
            f"the {VERBS[kind]} of {what} was not done and nothing changed. Your reason is "
            f"kept: press {KEYS[kind]} on it again and the dialog has it filled in.",
            title="Not saved: database busy",
            severity="error",
            timeout=20,
            markup=False,
        )

    def _mutated(
        self, kind: str, target: Any, event: int | None, message: str, removed: int, value: Any
    ) -> None:
        self.kept_reasons.pop(self._key(kind, target), None)
        self._change_done()
        self.forgotten_here += removed
        if kind == "reveal":
            self._revealed(target[0], target[1], value, event)
            return
        self.notify(
            f"{message} · audit event #{event}",
            title="Done",
            severity="error" if "NOT verified" in message else "information",
            timeout=8,
            markup=False,
        )
        self.refresh_views()


def scope_words(scope: tuple[str, str]) -> str:
    """A scope as a notice names it: ``engagement acme-q4``, ``namespace users.alice``."""
    return f"{scope_label(scope[0])} {escape_controls(str(scope[1]))}"


def notice_parts(saved: Saved) -> tuple[Any, ...]:
    """A saved change as the notice shows it: its event, message, records removed, value."""
    kind, target, outcome = saved.change.kind, saved.change.target, saved.outcome
    if saved.already:
        what = (
            scope_words(target)
            if kind == "forget-scope"
            else record_label(escape_controls(str(target)))
        )
        return saved.event_id, f"Done ({kind} {what}); see the audit log", 0, None
    if kind == "refute":
        return (
            saved.event_id,
            f"Refuted tactic {escape_controls(record_label(str(target)))}",
            0,
            None,
        )
    if kind == "forget" and outcome is not None:
        message = _forget_message(saved.record, outcome)
        return saved.event_id, message, len(outcome.removed), None
    if kind == "forget-scope" and outcome is not None:
        message = f"Forgot {plural(outcome.forgotten, 'record')} of {scope_words(target)}"
        if not outcome.verified:
            problem = outcome.problem or "see the audit log"
            message += f": erasure NOT verified ({escape_controls(str(problem))})"
        if outcome.remark:
            message += f"; {escape_controls(outcome.remark)}"
        return saved.event_id, message, outcome.forgotten, None
    return saved.event_id, "", 0, saved.value


def _forget_message(record: SourceRecord | None, outcome: ForgetOutcome) -> str:
    if record is None:
        what = record_label(str(outcome.record_id))
    else:
        kind = (
            record.tier
            if record.tier == record.record_type
            else f"{record.tier} {record.record_type}"
        )
        what = f"{kind} {record_label(record.id)}"
    problem = (outcome.problem or "").removeprefix("erasure not verified: ")
    state = (
        "erasure verified"
        if outcome.verified
        else "erasure NOT verified" + (f" ({problem})" if problem else " (see the audit log)")
    )
    more = len(outcome.removed) - 1
    extra = f" and {plural(more, 'related record')}" if more > 0 else ""
    remark = f"; {outcome.remark}" if outcome.remark else ""
    return f"Forgot {escape_controls(what)}{extra}: {escape_controls(state + remark)}"
