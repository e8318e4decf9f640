"""Confirmation dialogs for refute and forget, and the blast-radius dialog for a scope.

Every dialog shows exactly what will happen, asks for a reason (focused first), and
has Cancel as the safe default: ``enter`` in a text box moves on and never confirms,
``escape`` cancels from anywhere, and only the action button confirms. The dialog
returns the reason; the mutation itself runs in the caller, after the dialog closed.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Input, Label, Select, Static

from memtui.render import escape_controls, one_line, safe_text
from memtui.sources.base import SourceRecord
from memtui.tui.format import plural, record_label, scope_value

PREVIEW_CHARS = 240
SCOPE_LABELS = {"tool_name": "tool", "run_id": "run", "url_pattern": "url"}
COMPACT_BELOW_HEIGHT = 32

WHAT_HAPPENS = {
    "refute": (
        "This cannot be undone. The tactic stays on file marked refuted: it leaves reads and "
        "search, its grade returns to hypothesis, its confidence to 0, and new successes on "
        "it are refused."
    ),
}


class ConfirmDialog(ModalScreen[str | None]):
    """Base: reason first, then Cancel, then the action button; escape cancels."""

    BINDINGS = [
        Binding(
            "escape",
            "cancel",
            "Cancel",
            tooltip="Close without changing anything",
            id="dialog.cancel",
        )
    ]

    ACTION_LABEL = "Confirm"

    reason = ""
    """A reason kept from an earlier try that could not be saved (the database was busy)."""

    def reason_input(self) -> Input:
        return Input(self.reason, placeholder="why?", id="reason")

    def on_mount(self) -> None:
        if self.app.size.height < COMPACT_BELOW_HEIGHT:
            # Short terminal: borderless inputs and buttons keep the whole dialog on screen.
            for widget in self.query("Input, Button"):
                widget.compact = True  # type: ignore[attr-defined]
            self.add_class("-compact")
        self.query_one("#reason", Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#cancel")
    def _cancel(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(None)

    @on(Button.Pressed, "#confirm")
    def _confirm(self, event: Button.Pressed) -> None:
        event.stop()
        reason = self.query_one("#reason", Input).value.strip()
        if not self.ready():
            return
        if not reason:
            self.notify(
                "A reason is required: say why, it goes into the audit log.",
                title="No reason given",
                severity="warning",
            )
            self.query_one("#reason", Input).focus()
            return
        self.dismiss(reason)

    def ready(self) -> bool:
        return True

    @on(Input.Submitted)
    def _next_field(self, event: Input.Submitted) -> None:
        # Enter in a text box moves on; it never confirms.
        event.stop()
        self.focus_next()

    def buttons(self) -> ComposeResult:
        with Horizontal(classes="dialog-buttons"):
            yield Button("Cancel", id="cancel", variant="primary")
            yield Button(self.ACTION_LABEL, id="confirm", variant="error")

    def compose_footer(self) -> ComposeResult:
        yield Footer()


class ConfirmRecordAction(ConfirmDialog):
    """Refute or forget one record."""

    SUMMARY_SCOPE_KEYS = 3
    """At most this many scope values in the summary line (the rest are in the detail)."""

    def __init__(
        self,
        action: str,
        record: SourceRecord,
        *,
        reason: str = "",
        rule: str = "",
        removes: int = 1,
    ) -> None:
        super().__init__(classes=f"dialog-{action}")
        self.reason = reason
        self.verb = action
        self.record = record
        self.rule = rule
        self.removes = removes
        self.ACTION_LABEL = "Forget" if action == "forget" else "Refute"

    def what_happens(self) -> Text:
        """The consequence, in the store's own words for a forget (its ``forget_preview``)."""
        if self.verb != "forget":
            return Text(WHAT_HAPPENS[self.verb])
        out = Text("This cannot be undone. ")
        out.append_text(safe_text(self.rule or "The record is erased by the store's own rule."))
        if self.removes > 1:
            out.append(f" Removes {plural(self.removes, 'record')}.", style="bold")
        return out

    def compose(self) -> ComposeResult:
        record = self.record
        noun = "record" if self.verb == "forget" else "tactic"
        with Vertical(classes="dialog") as box:
            box.border_title = f"{self.ACTION_LABEL} {noun} {record_label(record.id)}?"
            summary = Text()
            summary.append_text(safe_text(record_label(record.id), limit=80, style="bold"))
            summary.append("  tier ", style="dim")
            summary.append_text(one_line(record.tier, 20))
            summary.append("  type ", style="dim")
            summary.append_text(one_line(record.record_type, 30))
            shown = [
                key
                for key, value in record.scope.items()
                if value not in (None, "", [], ()) and key != "profile_hash"
            ]
            for key in shown[: self.SUMMARY_SCOPE_KEYS]:
                summary.append(f"  {SCOPE_LABELS.get(key, key)} ", style="dim")
                summary.append_text(one_line(scope_value(record, key), 40))
            yield Static(summary, classes="dialog-summary")
            yield Static(
                safe_text(record.content, limit=PREVIEW_CHARS, keep_lines=True),
                classes="dialog-preview",
            )
            yield Static(self.what_happens(), classes="dialog-warning")
            yield Label("Reason (written to the audit log)")
            yield self.reason_input()
            yield from self.buttons()
        yield from self.compose_footer()


class ForgetEngagementDialog(ConfirmDialog):
    """Forget every record of one scope (an engagement, a namespace, a mem0 user...):
    blast radius first, then type its name."""

    def __init__(
        self,
        engagement: str,
        radius: dict[str, dict[str, int]],
        *,
        reason: str = "",
        key: str = "engagement",
        rule: str,
    ) -> None:
        super().__init__(classes="dialog-forget")
        self.reason = reason
        self.engagement = engagement
        """The scope's value (an engagement's name for a memtui database)."""
        self.key = key
        self.noun = SCOPE_LABELS.get(key, key)
        self.rule = rule
        """What the erasure does, in the store's words (``forget_scope_rule``)."""
        self.radius = radius
        self.total = sum(n for types in radius.values() for n in types.values())
        self.ACTION_LABEL = f"Forget {self.noun}"

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as box:
            box.border_title = f"Forget a whole {self.noun}?"
            title = safe_text(f"{self.noun} ", limit=40, style="dim")
            title.append_text(one_line(self.engagement, 80))
            title.append(f"  {plural(self.total, 'record')} will be erased", style="bold")
            yield Static(title, classes="dialog-summary")
            table = Table(box=None, show_header=True, header_style="bold", pad_edge=False)
            table.add_column("tier")
            table.add_column("type")
            table.add_column("records", justify="right")
            for tier, types in self.radius.items():
                for record_type, count in types.items():
                    table.add_row(one_line(tier, 20), one_line(record_type, 30), str(count))
            yield Static(table, classes="dialog-preview", id="blast-radius")
            yield Static(
                Text("This cannot be undone. ").append_text(safe_text(self.rule)),
                classes="dialog-warning",
            )
            yield Label("Reason (written to the audit log)")
            yield self.reason_input()
            what = "engagement name" if self.key == "engagement" else self.noun
            name = safe_text(f"Type the {what} to enable the button: ")
            name.append_text(one_line(self.engagement, 80))
            yield Label(name)
            yield Input(placeholder=f"the {what}, exactly", id="confirm-name")
            yield from self.buttons()
        yield from self.compose_footer()

    def on_mount(self) -> None:
        self.query_one("#confirm", Button).disabled = True
        super().on_mount()

    def matches(self, typed: str) -> bool:
        """The name as stored, or as shown: a name with control characters in it (an ESC
        cannot be typed into a text box) is confirmed by typing its visible escapes."""
        return typed in (self.engagement, escape_controls(self.engagement))

    def ready(self) -> bool:
        return self.matches(self.query_one("#confirm-name", Input).value)

    @on(Input.Changed, "#confirm-name")
    def _name_typed(self, event: Input.Changed) -> None:
        self.query_one("#confirm", Button).disabled = not self.matches(event.value)


class RevealDialog(ConfirmDialog):
    """Reveal one masked metadata field: which one, and why (the audit log names both)."""

    ACTION_LABEL = "Reveal"

    def __init__(self, record: SourceRecord, fields: list[str], *, reason: str = "") -> None:
        super().__init__(classes="dialog-reveal")
        self.reason = reason
        self.record = record
        self.fields = fields
        self.field = fields[0]

    def compose(self) -> ComposeResult:
        record = self.record
        with Vertical(classes="dialog") as box:
            box.border_title = f"Reveal a masked field of record {record_label(record.id)}?"
            summary = Text()
            summary.append_text(safe_text(record_label(record.id), limit=80, style="bold"))
            summary.append("  tier ", style="dim")
            summary.append_text(one_line(record.tier, 20))
            summary.append("  type ", style="dim")
            summary.append_text(one_line(record.record_type, 30))
            yield Static(summary, classes="dialog-summary")
            yield Label("Field")
            if len(self.fields) > 1:
                yield Select(
                    [(one_line(f, 80), f) for f in self.fields],
                    value=self.field,
                    allow_blank=False,
                    id="field",
                    type_to_search=False,
                )
            else:
                yield Static(one_line(self.field, 80), id="field-name")
            yield Static(
                Text(
                    "The value is shown in the detail pane for this session. The audit log "
                    "records who revealed which field of which record, and why; never the value."
                ),
                classes="dialog-warning",
            )
            yield Label("Reason (written to the audit log)")
            yield self.reason_input()
            yield from self.buttons()
        yield from self.compose_footer()

    @on(Select.Changed, "#field")
    def _field_chosen(self, event: Select.Changed) -> None:
        event.stop()
        if isinstance(event.value, str):
            self.field = event.value
