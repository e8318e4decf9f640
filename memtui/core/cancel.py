"""Stopping a long read part-way, because its reader moved on (a new search, escape).

A reader passes a ``cancelled`` callable down; the work checks it between steps
(and SQLite's progress handler checks it inside a statement), then raises
``Cancelled`` so that nothing half-done is returned.
"""

from __future__ import annotations

from collections.abc import Callable


class Cancelled(Exception):
    """The work was stopped by its ``cancelled`` callable before it finished."""


def stop_if(cancelled: Callable[[], bool] | None) -> None:
    """Raise ``Cancelled`` when ``cancelled()`` says so."""
    if cancelled is not None and cancelled():
        raise Cancelled("stopped before it finished")
