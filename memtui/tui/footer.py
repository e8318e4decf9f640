"""The key footer, rebuilt once per frame however many binding changes it hears of."""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer


class KeysFooter(Footer):
    """Textual's ``Footer`` rebuilds every key it shows on each change of the bindings,
    even several in one frame; a search changes them four or five times within a
    frame or two (the query box loses focus, the results gain it, the escape key is
    shown and then hidden again), and each rebuild mounts and styles a dozen widgets.
    This one passes the first change of a frame on after that frame's refresh and
    drops the others of the same frame: the keys it then shows are the latest."""

    _change_pending = False

    def bindings_changed(self, screen: Screen) -> None:
        if self._change_pending:
            return
        self._change_pending = True
        self.call_after_refresh(self._pass_change_on, screen)

    def _pass_change_on(self, screen: Screen) -> None:
        self._change_pending = False
        super().bindings_changed(screen)
