"""The command palette (ctrl+p): memtui's commands, following the current tab and selection."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.app import App
from textual.command import DiscoveryHit, Hit, Hits, Provider

from memtui.core.secrets import secret_paths
from memtui.tui.format import record_label, refutable, scope_label
from memtui.tui.help import key_label

if TYPE_CHECKING:
    from memtui.tui.app import MemtuiApp


Command = tuple[str, Callable[[], object], str]
"""A palette entry: its name, what it runs, its help text."""

NAMED_ABOVE = {"refute", "forget", "reveal", "forget_scope", "show_hidden", "hide_hidden"}
"""Actions of keys that ``MemtuiCommands.commands`` names itself (with the record or scope)."""


class MemtuiCommands(Provider):
    """Switch tabs, search, refute, forget, toggle hidden records, verify the audit, quit,
    and every other key the footer shows where focus is (the what-if weights on Search)."""

    @property
    def memtui(self) -> MemtuiApp:
        return cast("MemtuiApp", self.app)

    def commands(self) -> list[Command]:
        """Every command, in the palette's order: tabs, the selection's, the app's, keys."""
        return [
            *self.tab_commands(),
            *self.selection_commands(),
            *self.app_commands(),
            *self.key_commands(),
        ]

    def tab_commands(self) -> list[Command]:
        app = self.memtui
        return [
            (
                "Browse tab",
                partial(app.action_switch_tab, "browse"),
                "Tiers, scopes and records (1)",
            ),
            ("Search tab", partial(app.action_switch_tab, "search"), "Results and breakdowns (2)"),
            ("Lanes tab", partial(app.action_switch_tab, "lanes"), "Priors, tactics, history (3)"),
            ("Audit tab", partial(app.action_switch_tab, "audit"), "The audit log (4)"),
            (
                "Eval tab",
                partial(app.action_switch_tab, "eval"),
                "Labelled questions: precision, recall, MRR (5)",
            ),
            ("Search", app.action_search, "Focus the query box (/)"),
        ]

    def selection_commands(self) -> list[Command]:
        """What can be done to the highlighted record or scope, named after it."""
        app = self.memtui
        items: list[Command] = []
        record_id = app.current_record_id()
        if record_id is not None and app.offers("refute") and refutable(app.current_record()):
            items.append(
                (
                    f"Refute tactic {record_label(record_id)}",
                    partial(app.request_refute, record_id),
                    "Mark the highlighted tactic refuted (asks for a reason; r)",
                )
            )
        if record_id is not None and app.offers("forget"):
            items.append(
                (
                    f"Forget record {record_label(record_id)}",
                    partial(app.request_forget, record_id),
                    "Erase the highlighted record for good (asks for a reason; f)",
                )
            )
        current = app.browse.table.current if app.active_tab == "browse" else None
        if current is not None and secret_paths(current.metadata):
            items.append(
                (
                    f"Reveal a masked field of record #{current.id}",
                    partial(app.request_reveal, current.id),
                    "Show one secret-named metadata value (asks for a reason; audited; v)",
                )
            )
        tree = app.browse.tree
        node = tree.cursor_node if app.active_tab == "browse" else None
        if node is not None and node.data is not None and tree.forgettable(node.data):
            items.append(
                (
                    f"Forget the highlighted {scope_label(node.data.kind)}",
                    partial(app.request_forget_scope, node.data.kind, str(node.data.value)),
                    "Erase every record of it (shows the blast radius first; F)",
                )
            )
        return items

    def app_commands(self) -> list[Command]:
        app = self.memtui
        items: list[Command] = []
        if app.moved is not None:
            items.append(
                (
                    "Reopen the store",
                    app.action_reopen,
                    "Open the store at its path again: its file was replaced or deleted (o)",
                )
            )
        hidden = app.browse.show_hidden
        items += [
            (
                "Hide refuted and expired records"
                if hidden
                else "Show refuted and expired records",
                app.action_toggle_hidden,
                "Toggle hidden records in Browse (t)",
            ),
            (
                "Verify the audit chain",
                app.action_verify_audit,
                "Re-check every audit hash (v on the Audit tab)",
            ),
            (
                "Refresh",
                app.action_refresh,
                "Re-read every tab and re-run the search (F5 or ctrl+r)",
            ),
            ("Theme", app.action_change_theme, "Change the colour theme"),
            ("Help: keys", app.action_help, "Every key memtui answers to (?)"),
            ("Quit", app.exit, "Leave memtui (q)"),
        ]
        return items

    def key_commands(self) -> list[Command]:
        """The keys the footer shows where focus is that the commands above do not name
        (Search's weights, more results and stop; Run search; Breakdown; the full text),
        each run as if pressed, named by what it does and its key."""
        items: list[Command] = []
        for active in self.screen.active_bindings.values():
            binding = active.binding
            action = binding.action.split("(", 1)[0]
            if isinstance(active.node, App) or not (active.enabled and binding.show):
                continue
            if action in NAMED_ABOVE or not binding.description:
                continue
            items.append(
                (
                    binding.tooltip or binding.description,
                    partial(self.app.run_action, binding.action, active.node),
                    f"{binding.description} ({key_label(binding)})",
                )
            )
        return items

    async def discover(self) -> Hits:
        for name, runnable, help_text in self.commands():
            yield DiscoveryHit(name, runnable, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, runnable, help_text in self.commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), runnable, help=help_text)
