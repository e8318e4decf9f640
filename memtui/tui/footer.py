"""The key footer: rebuilt once for the binding changes of a frame, after that frame."""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer


class KeysFooter(Footer):
    """Textual's ``Footer`` rebuilds every key it shows on each change of the bindings,
    even several in one frame; a search changes them four or five times within a
    frame or two (the query box loses focus, the results gain it, the escape key is
    shown and then hidden again), and each rebuild mounts and styles a dozen widgets.

    This one hears the first change of a frame, lets that frame be drawn (the results
    the operator waits for), and then has Textual rebuild it once, with the keys as
    they are by then; the other changes of that frame add nothing.
    """

    _change_pending = False

    def bindings_changed(self, screen: Screen) -> None:
        if self._change_pending:
            return
        self._change_pending = True
        self.call_after_refresh(self._pass_change_on, screen)

    def _pass_change_on(self, screen: Screen) -> None:
        self._change_pending = False
        super().bindings_changed(screen)
