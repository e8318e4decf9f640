"""The key footer: updated once for the binding changes of a frame, after that frame,
in place (a rebuild only when its layout changes)."""

from __future__ import annotations

from typing import NamedTuple

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey


class KeySpec(NamedTuple):
    """What one key of the footer shows: the arguments Textual's ``Footer`` gives it."""

    key: str
    display: str
    description: str
    action: str
    disabled: bool
    tooltip: str


class KeysFooter(Footer):
    """Textual's ``Footer`` rebuilds every key it shows on each change of the bindings,
    even several in one frame, and even when the keys it shows stay the same; a search
    changes them four or five times within a frame or two (the query box loses focus,
    the results gain it, the escape key is shown and then hidden again), and each
    rebuild mounts and styles a dozen widgets (a fifth of a second of CPU for a focus
    change, as much as the rest of the frame).

    This one hears the first change of a frame, lets that frame be drawn (the results
    the operator waits for), and then compares the keys as they are by then with the
    keys it shows: the same keys cost nothing, other keys are written into the widgets
    already there (some added or removed at the end). Textual rebuilds it only the first
    time and when the bindings use groups (which this app does not).
    """

    _change_pending = False
    _rebuilding = False
    _shown: tuple[list[KeySpec], KeySpec | None] | None = None
    """The keys of the last rebuild or update (None: none yet, or grouped bindings)."""

    def bindings_changed(self, screen: Screen) -> None:
        if self._change_pending:
            return
        self._change_pending = True
        self.call_after_refresh(self._pass_change_on, screen)

    def _pass_change_on(self, screen: Screen) -> None:
        self._change_pending = False
        ready = screen.app.app_focus and self.is_attached and screen is self.screen
        if self._rebuilding or not ready:
            super().bindings_changed(screen)  # Textual's own checks, and its rebuild
            return
        shown = self._keys_for(screen)
        if shown is not None and shown == self._shown:
            return
        if shown is not None and self._shown is not None and self._update_keys(*shown):
            self._shown = shown
            return
        self._rebuilding = True
        super().bindings_changed(screen)

    def compose(self) -> ComposeResult:
        # Read at the moment Textual's compose reads the bindings, for the next change.
        self._shown = self._keys_for(self.screen) if self._bindings_ready else None
        yield from super().compose()

    async def recompose(self) -> None:
        try:
            await super().recompose()
        finally:
            self._rebuilding = False

    def _keys_for(self, screen: Screen) -> tuple[list[KeySpec], KeySpec | None] | None:
        """The keys ``Footer.compose`` would show (the first binding of each action, and
        the command palette's); None when a binding has a group (Textual lays those out)."""
        app = self.app
        active = screen.active_bindings
        keys: dict[str, KeySpec] = {}
        for _, binding, enabled, tooltip in active.values():
            if not binding.show:
                continue
            if binding.group is not None:
                return None
            if binding.action not in keys:
                keys[binding.action] = KeySpec(
                    binding.key,
                    app.get_key_display(binding),
                    binding.description,
                    binding.action,
                    not enabled,
                    tooltip,
                )
        palette = None
        if self.show_command_palette and app.ENABLE_COMMAND_PALETTE:
            found = active.get(app.COMMAND_PALETTE_BINDING)
            if found is not None:
                _, binding, enabled, _ = found
                palette = KeySpec(
                    binding.key,
                    app.get_key_display(binding),
                    binding.description,
                    binding.action,
                    not enabled,
                    binding.tooltip or binding.description,
                )
        return list(keys.values()), palette

    def _update_keys(self, keys: list[KeySpec], palette: KeySpec | None) -> bool:
        """Write ``keys`` into the key widgets there are, adding or removing some at the
        end; False (rebuild instead) when the widgets are not the plain keys it made."""
        children = [w for w in self.children if not w._pruning]
        widgets = [w for w in children if not w.has_class("-command-palette")]
        palette_widgets = [w for w in children if w.has_class("-command-palette")]
        if not all(type(w) is FooterKey and not w.has_class("-grouped") for w in children):
            return False
        if len(palette_widgets) != (palette is not None):
            return False
        for widget, spec in zip(widgets, keys, strict=False):
            _write_key(widget, spec)
        if palette is not None:
            _write_key(palette_widgets[0], palette)
        for widget in widgets[len(keys) :]:
            widget.remove()
        with self._context():  # data_bind binds to the active message pump: this footer
            added = [
                FooterKey(
                    spec.key,
                    spec.display,
                    spec.description,
                    spec.action,
                    disabled=spec.disabled,
                    tooltip=spec.tooltip,
                ).data_bind(compact=Footer.compact)
                for spec in keys[len(widgets) :]
            ]
        if added:
            self.mount_all(added, before=palette_widgets[0] if palette_widgets else None)
        return True


def _write_key(widget: FooterKey, spec: KeySpec) -> None:
    """One key widget shows ``spec`` (redrawn, and laid out again, only if it changed)."""
    if (
        widget.key,
        widget.key_display,
        widget.description,
        widget.action,
        widget._disabled,
        widget.tooltip or "",
    ) == tuple(spec):
        return
    widget.key, widget.key_display, widget.description, widget.action = spec[:4]
    widget._disabled = spec.disabled
    widget.set_class(spec.disabled, "-disabled")
    widget.tooltip = spec.tooltip or None
    widget.refresh(layout=True)
