"""What the tabs and their widgets tell the app: typed messages, posted up the DOM.

The app hands each pane what it needs (the source, the embedder) as attributes; a
pane never calls the app back. It posts one of these, and the app acts on it: asks
for a reason, writes the change, updates the top bar.
"""

from __future__ import annotations

from textual.message import Message


class RefuteRequested(Message):
    """The operator pressed ``r`` on a record: refute it (the app asks for a reason)."""

    def __init__(self, record_id: str) -> None:
        super().__init__()
        self.record_id = record_id


class ForgetRequested(Message):
    """The operator pressed ``f`` on a record: forget it (the app asks for a reason)."""

    def __init__(self, record_id: str) -> None:
        super().__init__()
        self.record_id = record_id


class RevealRequested(Message):
    """The operator pressed ``v`` on a record with masked fields: reveal one (audited)."""

    def __init__(self, record_id: str) -> None:
        super().__init__()
        self.record_id = record_id


class ForgetScopeRequested(Message):
    """The operator pressed ``F`` on a scope (an engagement, a namespace...): forget it
    whole, once its blast radius is shown."""

    def __init__(self, key: str, value: str) -> None:
        super().__init__()
        self.key = key
        self.value = value


class TiersCounted(Message):
    """Browse counted the tiers: live and hidden records per tier (the top bar's summary)."""

    def __init__(self, tiers: dict[str, tuple[int, int]]) -> None:
        super().__init__()
        self.tiers = dict(tiers)


class QuestionChosen(Message):
    """The operator pressed ``enter`` on a question of the Eval tab: show its results."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index
