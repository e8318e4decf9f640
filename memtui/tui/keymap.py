"""The operator's keymap file: binding ids mapped to the keys that should run them.

An optional TOML file (``Config.keymap_path``, docs/keymap.md) of ``id = "key"`` or
``id = ["key", "key"]`` lines. It is read and checked before the app starts, and
applied with Textual's ``App.set_keymap``; anything wrong with it is one
``KeymapError`` line that names the file, so the app never opens with keys other
than the ones asked for.
"""

from __future__ import annotations

import importlib
import pkgutil
import tomllib
import unicodedata
from collections.abc import Collection
from pathlib import Path

from textual.binding import Binding
from textual.keys import KEY_NAME_REPLACEMENTS, KEY_TO_UNICODE_NAME, Keys

from memtui.config import ConfigError

MODIFIERS = ("ctrl", "shift", "alt", "meta", "super", "hyper")
NAMED_KEYS = frozenset(
    {key.value for key in Keys if "+" not in key.value and not key.value.startswith("<")}
    | set(KEY_TO_UNICODE_NAME)
    | set(KEY_NAME_REPLACEMENTS.values())
)


class KeymapError(ConfigError):
    """The keymap file cannot be used; the message says where and why, in one line."""


def key_problem(key: str) -> str | None:
    """What is wrong with one key as Textual names keys (``ctrl+r``, ``f5``, ``x``), if anything."""
    if not key:
        return "an empty key"
    *modifiers, base = key.split("+")
    for modifier in modifiers:
        if modifier not in MODIFIERS:
            return f"{key!r}: {modifier!r} is not a modifier ({', '.join(MODIFIERS)})"
    if len(base) == 1 and base.isprintable() and not base.isspace():
        return None
    if base in NAMED_KEYS:
        return None
    try:
        unicodedata.lookup(base.replace("_", " ").upper())
    except KeyError:
        where = f"{key!r}: " if modifiers else ""
        return f"{where}{base!r} is not a key name (such as x, f5, enter, question_mark)"
    return None


def parse_keymap(
    text: str, where: str = "keymap.toml", known: Collection[str] | None = None
) -> dict[str, str]:
    """The keymap ``text`` holds, as ``App.set_keymap`` takes it; raises ``KeymapError``.

    ``known``: the binding ids there are (an id not among them is an error, so a typo
    never goes unnoticed); None checks only the file's form and its key names.
    """
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise KeymapError(f"keymap {where}: not valid TOML: {exc}") from None
    keymap: dict[str, str] = {}
    for binding_id, value in table.items():
        if isinstance(value, str):
            keys = [key.strip() for key in value.split(",")]
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            keys = [key.strip() for key in value]
        else:
            raise KeymapError(
                f"keymap {where}: {binding_id}: give a key or a list of keys "
                '(such as "ctrl+r" or ["f5", "ctrl+r"])'
            )
        if known is not None and binding_id not in known:
            raise KeymapError(
                f"keymap {where}: no binding has the id {binding_id!r} "
                "(docs/keymap.md lists the ids)"
            )
        for key in keys:
            problem = key_problem(key)
            if problem:
                raise KeymapError(f"keymap {where}: {binding_id}: {problem}")
        keymap[binding_id] = ",".join(keys)
    return keymap


def declared_binding_ids() -> frozenset[str]:
    """The id of every binding a class of the app's modules declares."""
    import memtui.tui

    ids: set[str] = set()
    for info in pkgutil.walk_packages(memtui.tui.__path__, "memtui.tui."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__:
                for binding in value.__dict__.get("BINDINGS", ()):
                    if isinstance(binding, Binding) and binding.id:
                        ids.add(binding.id)
    return frozenset(ids)


def load_keymap(path: Path) -> dict[str, str]:
    """The keymap of the file at ``path``; empty when there is no file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError:
        raise KeymapError(f"keymap {path}: not UTF-8 text") from None
    except OSError as exc:
        raise KeymapError(f"keymap {path}: cannot be read: {exc.strerror or exc}") from None
    return parse_keymap(text, str(path), declared_binding_ids())
