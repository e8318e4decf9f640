"""Every key binding memtui declares has an id (a keymap file rebinds keys by id)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

from textual.binding import Binding

import memtui.tui

BINDING_ID = re.compile(r"[a-z][a-z_-]*(\.[a-z][a-z_]*)*")
"""Lower case; a widget's dotted by where it is: ``search.run``, ``browse.records.forget``
(the app's own keys are plain: ``help``, ``tab-lanes``)."""


def declared_bindings() -> list[tuple[str, Binding]]:
    """(class name, binding) for each binding a class in memtui's app modules declares
    itself (not the ones it inherits from Textual's widgets)."""
    found = []
    for info in pkgutil.iter_modules(memtui.tui.__path__):
        module = importlib.import_module(f"memtui.tui.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__:
                continue
            for binding in cls.__dict__.get("BINDINGS", []):
                found.append((cls.__name__, binding))
    return found


def test_every_binding_has_an_id():
    bindings = declared_bindings()
    assert len(bindings) >= 30
    for owner, binding in bindings:
        assert isinstance(binding, Binding), (owner, binding)
        assert binding.id is not None, (owner, binding.key, binding.action)
        assert BINDING_ID.fullmatch(binding.id), (owner, binding.id)
        if owner != "MemtuiApp":  # named after the widget that owns it
            assert "." in binding.id, (owner, binding.id)


def test_binding_ids_are_unique():
    ids = [binding.id for _, binding in declared_bindings()]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


def test_the_app_binding_ids_name_what_they_do():
    """A few ids the keymap documentation names, spelled as it spells them."""
    ids = {binding.id for _, binding in declared_bindings()}
    for expected in (
        "tab-browse",
        "tab-search",
        "quit",
        "help",
        "search.run",
        "search.stop",
        "browse.records.forget",
        "browse.tree.forget_scope",
        "audit.verify",
    ):
        assert expected in ids, expected
