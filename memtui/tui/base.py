"""What every tab shares: access to the source and errors from workers made visible."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any, cast

from textual.containers import Container
from textual.widget import Widget
from textual.widgets import Select
from textual.worker import Worker, WorkerState

from memtui.render import escape_controls
from memtui.sources.base import MemorySource
from memtui.tui.format import fit


def offers(source: MemorySource, capability: str) -> bool:
    """Whether an action's key applies to ``source`` at all: it can do it, or could when
    opened writable (pressing the key then says why not)."""
    return source.can(capability) or capability in source.write_capabilities


def fill_select(select: Select[str], values: list[str], value: str | None) -> None:
    """Options of a Select as literal one-line labels, both ends kept to fit its width.

    Profile fingerprints differ at their ends (``…:rest:flask`` / ``…:rest:django``), so
    labels are cut in the middle. Does not post ``Select.Changed``.
    """
    width = max(select.size.width - 8, 12) if select.size.width else 40
    with select.prevent(Select.Changed):
        select.set_options([(fit(v, width), v) for v in values])
        if value is not None and value in values:
            select.value = value


def report_worker_error(widget: Widget, worker: Worker) -> None:
    """Show a failed worker's error as a notification: never swallowed."""
    error = worker.error
    what = worker.name or (worker.description or "background work").split("(")[0]
    message = escape_controls(str(error)) if error is not None else "unknown error"
    widget.app.notify(
        message,
        title=f"{what} failed",
        severity="error",
        timeout=12,
        markup=False,
    )


class ReportsWorkerErrors:
    """Mixin for any widget (or the app) that starts workers: failures become notifications.

    ``Worker.StateChanged`` does not bubble, so each node that starts workers needs this.
    """

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            report_worker_error(cast(Widget, self), event.worker)
            self.worker_failed(event.worker)

    def worker_failed(self, worker: Worker) -> None:
        """Hook: undo a 'working…' state after a failure."""


class Pane(ReportsWorkerErrors, Container):
    """One tab's content: reads the source the app hands it, reports its workers' errors.

    The app sets ``source`` again when it reopens the store; the pane hands it on to
    the widgets of its own that read it (``source_changed``).
    """

    def __init__(self, source: MemorySource, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._source = source

    @property
    def source(self) -> MemorySource:
        return self._source

    @source.setter
    def source(self, source: MemorySource) -> None:
        self._source = source
        self.source_changed(source)

    def source_changed(self, source: MemorySource) -> None:
        """Hook: the store was reopened; hand ``source`` to the widgets that read it."""

    def now(self) -> datetime:
        return self.source.now()

    _notice: tuple[str, float] = ("", 0.0)

    def notify_once(self, message: str, *, timeout: float = 3.0, **kwargs: Any) -> None:
        """A notification, unless the same one is still on screen (a key held down at the
        end of a range would stack identical toasts)."""
        now = time.monotonic()
        last, until = self._notice
        if message == last and now < until:
            return
        self._notice = (message, now + timeout)
        self.notify(message, timeout=timeout, **kwargs)

    def main_widget(self) -> Widget | None:
        """The widget that takes focus when the tab is switched to (None: nothing can)."""
        return None

    stale = False
    """Another process changed the database while this tab was hidden: reload on show."""

    def tab_shown(self) -> None:
        """The tab was switched to (the app calls this; Textual's Show event is not sent
        every time: not after a scroll in the tab being left). Reload if stale; a pane
        that reads its data when first shown extends this."""
        if self.stale:
            self.stale = False
            self.reload()

    def reload(self) -> None:
        """Re-read everything this tab shows from the database."""

    _reload_pending = False

    def database_changed(self, shown: bool) -> None:
        """Another process committed: reload now if the tab is shown, else when it is.

        While the tab is still loading from the last change, one more reload is queued
        for when it finishes: never a pile of threads behind a busy agent.
        """
        if not shown:
            self.stale = True
        elif self.loading_now():
            self._reload_pending = True
        else:
            self.reload()

    def loading_now(self) -> bool:
        return any(worker.node is self and worker.is_running for worker in self.app.workers)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        super().on_worker_state_changed(event)
        if event.state in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            if self._reload_pending and not self.loading_now():
                self._reload_pending = False
                self.reload()
