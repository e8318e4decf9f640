"""Explicit-preference stores with context revisions (a textbook design) as a source.

Tables: ``assistant_preferences(id, session, name, value, source, created,
active)`` with one active version per ``(session, name)``;
``assistant_memory_revisions(session, revision)``; ``assistant_work(id, origin,
session, prompt, result, status, created, context_revision)``;
``memory_events(seq, kind, payload, created)``.

- Tier ``preference``: one record per stored version (``pref:<id>``), live
  when active, ``inactive`` otherwise; the detail pane lists every version of
  that preference with its source, the active one marked.
- Tier ``work``: past work (``work:<id>``) with the context revision it was
  stamped with; it is eligible for future context (live) only while that is
  its session's current revision, else ``inactive``. The default (eligible)
  view is the eligible-work view.
- Scopes: ``session`` (both), ``name`` (preferences), ``origin`` (work).
- No expiry: a preference lives until replaced or forgotten.
- Forget applies the store's own rule in one transaction: every version of that
  ``(session, name)`` deleted, the session's revision advanced (older work
  stops entering future context), and a ``memory_events`` row naming what
  changed, never the value; plus memtui's audit event. Only preferences are
  forgotten this way; work results follow their session's revision. The rule
  keeps work results, so a work row (in any session) that quotes a forgotten
  value as a whole phrase keeps it on file: the outcome is then not verified,
  and it names those rows with their session and whether they are still
  eligible for future context (an eligible one still brings the value there).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from memtui.core.records import format_timestamp
from memtui.sources.base import (
    FIELD_SEPARATOR,
    DetailSection,
    SourceError,
    SourceRecord,
    display_time,
)
from memtui.sources.union_view import UnionViewSource

TIERS = ("preference", "work")
_PARTS = {"pref": 0, "work": 1}


def _epoch_text(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return format_timestamp(datetime.fromtimestamp(float(value), tz=UTC))
    except (TypeError, ValueError, OverflowError, OSError):
        return str(value)


def _epoch_shown(value: Any) -> str:
    """An epoch time in a detail row, as the app shows a record's created_at."""
    return display_time(_epoch_text(value))


class PreferenceSource(UnionViewSource):
    kind = "preferences"
    kind_label = "explicit-preference store"
    tiers = TIERS
    scope_keys = ("session", "name", "origin")
    hidden_state = "inactive"

    @property
    def expiry_rule(self) -> str:
        return (
            "no expiry: a preference is live while it is the active version (until replaced "
            "or forgotten); a work result is eligible (live) while stamped with its session's "
            "current context revision"
        )

    def has_history(self) -> bool:
        return True

    def _has_work(self) -> bool:
        return "assistant_work" in self.columns

    def _has_second_table(self) -> bool:
        return self._has_work()

    def _has_events(self) -> bool:
        return "memory_events" in self.columns

    # -- the union of both tiers, for filters, order, counts

    def _items(self) -> str:
        prefs = (
            "SELECT 0 AS part, p.id AS rid, 'preference' AS tier, 'preference' AS record_type, "
            "p.session AS session, p.name AS name, NULL AS origin, "
            "CASE WHEN p.active != 0 THEN 1 ELSE 0 END AS live FROM assistant_preferences AS p"
        )
        if not self._has_work():
            return prefs
        work = (
            "SELECT 1, w.id, 'work', 'work', w.session, NULL, w.origin, "
            "CASE WHEN w.context_revision = coalesce(r.revision, 0) THEN 1 ELSE 0 END "
            "FROM assistant_work AS w "
            "LEFT JOIN assistant_memory_revisions AS r ON r.session = w.session"
        )
        return f"{prefs} UNION ALL {work}"

    def _data_fingerprint(self) -> Any:
        parts = [list(self.query("SELECT count(*), max(id) FROM assistant_preferences")[0])]
        parts.append(
            self.query(
                "SELECT group_concat(session || '=' || revision) FROM "
                "(SELECT * FROM assistant_memory_revisions ORDER BY session)"
            )[0][0]
        )
        if self._has_work():
            parts.append(list(self.query("SELECT count(*), max(id) FROM assistant_work")[0]))
        return parts

    def _key(self, record_id: str) -> tuple[int, int] | None:
        prefix, sep, number = str(record_id).partition(":")
        if not sep or prefix not in _PARTS or not number.isdigit():
            return None
        return _PARTS[prefix], int(number)

    def _load(self, keys: Iterable[tuple[int, int]]) -> dict[tuple[int, int], SourceRecord]:
        keys = list(keys)
        out: dict[tuple[int, int], SourceRecord] = {}
        prefs = [k[1] for k in keys if k[0] == 0]
        work = [k[1] for k in keys if k[0] == 1]
        for start in range(0, len(prefs), 500):
            chunk = prefs[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.query(
                "SELECT p.id, p.session, p.name, p.value, p.source, p.created, p.active, "
                "(SELECT count(*) FROM assistant_preferences AS q WHERE q.session = p.session "
                "AND q.name = p.name AND q.id <= p.id), "
                "(SELECT count(*) FROM assistant_preferences AS q WHERE q.session = p.session "
                "AND q.name = p.name) "
                f"FROM assistant_preferences AS p WHERE p.id IN ({marks})",
                chunk,
            ):
                out[(0, row[0])] = self._preference(row)
        for start in range(0, len(work), 500):
            chunk = work[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.query(
                "SELECT w.id, w.origin, w.session, w.prompt, w.result, w.status, w.created, "
                "w.context_revision, coalesce(r.revision, 0) FROM assistant_work AS w "
                "LEFT JOIN assistant_memory_revisions AS r ON r.session = w.session "
                f"WHERE w.id IN ({marks})",
                chunk,
            ):
                out[(1, row[0])] = self._work(row)
        return out

    def _preference(self, row: tuple[Any, ...]) -> SourceRecord:
        rid, session, name, value, source, created, active, version, versions = row
        return SourceRecord(
            id=f"pref:{rid}",
            tier="preference",
            record_type="preference",
            content=f"{name}: {value}",
            scope={"session": session, "name": name, "origin": None},
            created_at=_epoch_text(created),
            expires_at=None,
            state="live" if active else "inactive",
            metadata={
                "name": name,
                "value": value,
                "source": source,
                "active": bool(active),
                "version": version,
                "versions": versions,
            },
        )

    def _work(self, row: tuple[Any, ...]) -> SourceRecord:
        rid, origin, session, prompt, result, status, created, stamped, current = row
        eligible = stamped == current
        content = prompt if result is None else f"{prompt}{FIELD_SEPARATOR}{result}"
        return SourceRecord(
            id=f"work:{rid}",
            tier="work",
            record_type="work",
            content=content,
            scope={"session": session, "name": None, "origin": origin},
            created_at=_epoch_text(created),
            expires_at=None,
            state="live" if eligible else "inactive",
            metadata={
                "prompt": prompt,
                "result": result,
                "status": status,
                "context_revision": stamped,
                "session_revision": current,
                "eligible": eligible,
            },
        )

    def notes(self, record: SourceRecord) -> str:
        meta = record.metadata
        if record.tier == "preference":
            mark = "active" if meta.get("active") else "old"
            return (
                f"{mark} v{meta.get('version')}/{meta.get('versions')} · from {meta.get('source')}"
            )
        eligible = "eligible" if meta.get("eligible") else "not eligible"
        return (
            f"rev {meta.get('context_revision')} (session at {meta.get('session_revision')}): "
            f"{eligible} · {meta.get('status')}"
        )

    def detail(self, record_id: str) -> list[DetailSection]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        session = record.scope["session"]
        sections: list[DetailSection] = []
        if record.tier == "preference":
            name = record.scope["name"]
            rows = self.query(
                "SELECT id, CASE WHEN active != 0 THEN 'active' ELSE '' END, value, source, "
                "created FROM assistant_preferences WHERE session = ? AND name = ? ORDER BY id",
                (session, name),
            )
            sections.append(
                DetailSection(
                    title=f"versions of {name!r} in session {session!r}",
                    columns=("id", "active", "value", "source", "created"),
                    rows=[(f"pref:{r[0]}", r[1], r[2], r[3], _epoch_shown(r[4])) for r in rows],
                )
            )
            if self._has_events():
                events = self.query(
                    "SELECT seq, kind, payload, created FROM memory_events "
                    "WHERE json_valid(payload) AND json_extract(payload, '$.session') = ? "
                    "AND json_extract(payload, '$.name') = ? ORDER BY seq",
                    (session, name),
                )
                sections.append(
                    DetailSection(
                        title="memory events",
                        columns=("seq", "kind", "payload", "created"),
                        rows=[(r[0], r[1], r[2], _epoch_shown(r[3])) for r in events],
                        note=None if events else "no events name this preference",
                    )
                )
        else:
            meta = record.metadata
            sections.append(
                DetailSection(
                    title="context revision",
                    columns=("stamped", "session now", "eligible for future context"),
                    rows=[
                        (
                            meta["context_revision"],
                            meta["session_revision"],
                            "yes" if meta["eligible"] else "no (its session's revision moved on)",
                        )
                    ],
                )
            )
        sections.append(self.history_section(record.id))
        return sections

    # -- forget

    def _versions(self, record: SourceRecord) -> list[tuple[Any, ...]]:
        return self.query(
            "SELECT id, value FROM assistant_preferences WHERE session = ? AND name = ? "
            "ORDER BY id",
            (record.scope["session"], record.scope["name"]),
        )

    def forget_preview(self, record_id: str) -> dict[str, Any]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        if record.tier != "preference":
            raise SourceError(self._work_refusal())
        versions = self._versions(record)
        work = (
            self.query(
                "SELECT count(*) FROM assistant_work WHERE session = ?", (record.scope["session"],)
            )[0][0]
            if self._has_work()
            else 0
        )
        return {
            "records": [f"pref:{v[0]}" for v in versions],
            "rule": (
                f"Every version of {record.scope['name']!r} in session "
                f"{record.scope['session']!r} is deleted, the session's revision advanced "
                "(its past work leaves future context), and an event logged without the value."
            ),
            "counts": {"versions": len(versions), "session_work": work},
        }

    def _work_refusal(self) -> str:
        return (
            "only preferences are forgotten in an explicit-preference store (its forget "
            "rule); a work result leaves future context when its session's revision advances"
        )

    def record_value_columns(self) -> list[tuple[str, str]]:
        return [("assistant_preferences", "value")]

    def _apply_forget(self, record: SourceRecord) -> dict[str, Any]:
        if record.tier != "preference":
            raise SourceError(self._work_refusal())
        session, name = record.scope["session"], record.scope["name"]
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            versions = conn.execute(
                "SELECT id, value FROM assistant_preferences WHERE session = ? AND name = ?",
                (session, name),
            ).fetchall()
            conn.execute(
                "DELETE FROM assistant_preferences WHERE session = ? AND name = ?", (session, name)
            )
            conn.execute(
                "INSERT INTO assistant_memory_revisions (session, revision) VALUES (?, 1) "
                "ON CONFLICT(session) DO UPDATE SET revision = revision + 1",
                (session,),
            )
            revision = conn.execute(
                "SELECT revision FROM assistant_memory_revisions WHERE session = ?", (session,)
            ).fetchone()[0]
            self._record_forgotten_event(session, name, len(versions), revision)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        gone = (
            conn.execute(
                "SELECT 1 FROM assistant_preferences WHERE session = ? AND name = ?",
                (session, name),
            ).fetchone()
            is None
        )
        values = sorted({str(v[1]) for v in versions})
        # The store's rule keeps work results: a result that quotes the value keeps it
        # on file, and in future context while its session's revision has not moved
        # on (the rule advances only this session's). Name those rows; never claim an
        # erasure they contradict.
        quoting = self._work_quoting(values)
        work_ids = (
            [
                f"work:{r[0]}"
                for r in conn.execute(
                    "SELECT id FROM assistant_work WHERE session = ?", (session,)
                ).fetchall()
            ]
            if self._has_work()
            else []
        )
        return {
            "removed": [f"pref:{v[0]}" for v in versions],
            "touched": sorted({*work_ids, *(q[0] for q in quoting)}, key=_id_order),
            "checks": {
                "versions_gone": gone,
                "no_work_quotes_value": not quoting,
                "value_out_of_future_context": not any(q[2] for q in quoting),
            },
            "probes": [v.encode("utf-8") for v in values],
            "note": _quoting_note(quoting) if quoting else None,
            "details": {
                "versions_deleted": len(versions),
                "session_revision": revision,
                "work_rows_quoting_value": len(quoting),
                "work_quoting_value": [
                    {"id": rid, "session": sess, "eligible_for_future_context": eligible}
                    for rid, sess, eligible in quoting[:QUOTING_LISTED]
                ],
            },
        }

    def _record_forgotten_event(
        self, session: str, name: str, versions: int, revision: int
    ) -> None:
        """The store's own ``preference_forgotten`` event (when it keeps events), in the
        forget's transaction."""
        if not self._has_events():
            return
        self._conn.execute(
            "INSERT INTO memory_events (kind, payload, created) VALUES (?, ?, ?)",
            (
                "preference_forgotten",
                json.dumps(
                    {
                        "session": session,
                        "name": name,
                        "versions_deleted": versions,
                        "revision": revision,
                        "by": "memtui",
                    },
                    sort_keys=True,
                ),
                self.now().timestamp(),
            ),
        )

    def _work_quoting(self, values: list[str]) -> list[tuple[str, str, bool]]:
        """Work rows (any session) whose prompt or result quotes one of ``values``
        word for word: ``(id, session, eligible for future context)``, by id."""
        values = [v for v in values if v.strip()]
        if not self._has_work() or not values:
            return []
        quotes = " OR ".join(
            "instr(w.prompt, ?) > 0 OR instr(coalesce(w.result, ''), ?) > 0" for _ in values
        )
        rows = self._conn.execute(
            "SELECT w.id, w.session, w.context_revision = coalesce(r.revision, 0), w.prompt, "
            "w.result FROM assistant_work AS w "
            "LEFT JOIN assistant_memory_revisions AS r ON r.session = w.session "
            f"WHERE {quotes} ORDER BY w.id",
            [v for v in values for _ in (0, 1)],
        ).fetchall()
        # instr finds the text anywhere; a quote is the value as a whole phrase
        # ("no" in "notes" is not one).
        patterns = [_quote_pattern(v) for v in values]
        return [
            (f"work:{r[0]}", str(r[1]), bool(r[2]))
            for r in rows
            if any(p.search(str(text)) for p in patterns for text in (r[3], r[4]) if text)
        ]


QUOTING_LISTED = 50
"""The audit event lists at most this many of the work rows that quote a forgotten value
(it counts them all); the outcome's note names the first ``QUOTING_NAMED``."""
QUOTING_NAMED = 5


def _quote_pattern(value: str) -> re.Pattern[str]:
    start = r"(?<!\w)" if re.match(r"\w", value) else ""
    end = r"(?!\w)" if re.search(r"\w$", value) else ""
    return re.compile(start + re.escape(value) + end)


def _id_order(record_id: str) -> tuple[int, int]:
    prefix, _, number = record_id.partition(":")
    return _PARTS.get(prefix, 9), int(number) if number.isdigit() else 0


def _quoting_note(quoting: list[tuple[str, str, bool]]) -> str:
    """In words, never the value: which work rows still quote it, and the store's rule."""
    named = ", ".join(
        f"{rid} (session {session!r}, "
        f"{'still eligible' if eligible else 'no longer eligible'} for future context)"
        for rid, session, eligible in quoting[:QUOTING_NAMED]
    )
    more = len(quoting) - QUOTING_NAMED
    if more > 0:
        eligible = sum(1 for q in quoting if q[2])
        named += f" and {more} more ({eligible} of all {len(quoting)} still eligible)"
    rows = (
        "1 work row still quotes" if len(quoting) == 1 else f"{len(quoting)} work rows still quote"
    )
    return (
        f"{rows} the forgotten value: {named}; the store's rule keeps work results (they "
        "leave future context only when their own session's revision advances), so the "
        "value stays on file"
    )
