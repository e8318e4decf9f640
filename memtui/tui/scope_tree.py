"""The Browse tab's tree: tiers, and under each the values of the source's scope keys.

The nodes come from the source's ``facets`` (live, and with hidden records), at most
``TREE_VALUES`` values per key and tier; a source that nests its scopes (LangGraph
namespaces) has each value under its nearest listed parent.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.events import Resize
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from memtui.render import safe_text
from memtui.sources.base import MemorySource, TierFacet
from memtui.tui.base import offers
from memtui.tui.format import fit, scope_label
from memtui.tui.messages import ForgetScopeRequested

TREE_VALUES = 200
"""Values listed per scope key and tier (the largest); the rest behind one "… N more" leaf."""

TIER = "tier"
MORE = "…"
"""``ScopeNode.kind`` of the leaf that stands for the values not listed."""


@dataclass(frozen=True)
class ScopeNode:
    """What a tree node stands for: a tier, or one scope value within a tier.

    ``kind`` is ``"tier"``, the scope key (``profile_hash``, ``engagement``, a foreign
    source's ``namespace``...) or ``MORE`` (then ``value`` is the key and ``live`` the
    number of its values not listed). ``parent`` is the listed value of the same key
    it nests under (a LangGraph namespace under its parent namespace), ``depth`` how
    many such parents it has; a value that hangs from its tier has neither.
    """

    kind: str
    tier: str
    value: Any
    live: int
    hidden: int
    parent: Any = None
    depth: int = 0

    @property
    def filters(self) -> dict[str, Any]:
        if self.kind in (TIER, MORE):
            return {"tier": self.tier}
        return {"tier": self.tier, self.kind: self.value}

    @property
    def label(self) -> str:
        return scope_label(self.kind)

    def title(self) -> Text:
        out = safe_text(self.tier, limit=40, style="bold")
        if self.kind not in (TIER, MORE):
            out.append(" › ", style="dim")
            out.append_text(safe_text(self.label, limit=40, style="dim"))
            out.append(" ", style="dim")
            out.append_text(fit(self.value, 80))
        return out


def forget_noun(source: MemorySource) -> str:
    """What F forgets in this source: its one scope key's name, else ``scope``."""
    keys = source.forget_scope_keys
    return scope_label(keys[0]) if len(keys) == 1 else "scope"


class ScopeTree(Tree[ScopeNode]):
    """Tiers, and under each the values of the source's facet keys, with record counts."""

    BINDINGS = [
        Binding(
            "F",
            "forget_scope",
            "Forget scope",
            tooltip="On a scope (an engagement, a namespace...): forget all its records "
            "(blast radius first)",
            id="browse.tree.forget_scope",
        ),
    ]

    def __init__(self, source: MemorySource, **kwargs: Any) -> None:
        super().__init__("memory", **kwargs)
        self.source = source
        self.show_root = False
        self.auto_expand = False
        self.guide_depth = 3
        self.show_keys = False
        """Prefix each value with its key (a foreign source with several facet keys)."""

    def name_the_scope(self, noun: str) -> None:
        """Label F by what it forgets here: ``Forget engagement``, ``Forget namespace``."""
        bindings = self._bindings.key_to_bindings
        for key, listed in bindings.items():
            bindings[key] = [
                replace(b, description=f"Forget {noun}") if b.action == "forget_scope" else b
                for b in listed
            ]

    def forgettable(self, data: ScopeNode | None) -> bool:
        """Whether a node is a scope ``forget_scope`` erases whole (an engagement...)."""
        return data is not None and data.kind in self.source.forget_scope_keys

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "forget_scope":
            # Elsewhere F is not offered; pressed there, the pane says what to pick.
            node = self.cursor_node
            return offers(self.source, "forget_scope") and self.forgettable(
                node.data if node else None
            )
        return True

    def action_forget_scope(self) -> None:
        node = self.cursor_node
        if node is None or not self.forgettable(node.data):
            return
        data = node.data
        assert data is not None
        self.post_message(ForgetScopeRequested(data.kind, str(data.value)))

    def label_for(self, data: ScopeNode) -> Text:
        width = max(self.scrollable_content_region.width, 20)
        if data.kind == MORE:
            more = Text(f"… {data.live:,} more ", style="dim")
            more.append_text(safe_text(scope_label(str(data.value)), limit=40, style="dim"))
            more.append(" (search to filter)", style="dim")
            return more
        count = Text(f" {data.live:,}", style="bold" if data.kind == TIER else "")
        if data.hidden:
            suffix = " hidden" if data.kind == TIER else ""
            count.append(f" +{data.hidden:,}{suffix}", style="dim")
        if data.kind == TIER:
            label = fit(data.tier, max(width - count.cell_len - 2, 12))
            label.stylize("bold")
            label.append_text(count)
            return label
        prefix = Text()
        if self.show_keys:
            prefix = fit(data.label, 16)
            prefix.append(" ")
            prefix.stylize("dim")
        room = width - self.guide_depth * (1 + data.depth) - 1 - count.cell_len - prefix.cell_len
        shown = str(data.value)
        if data.parent is not None and shown.startswith(f"{data.parent}."):
            shown = "…" + shown[len(str(data.parent)) :]  # the rest of the name, under its parent
        label = fit(shown, max(room, 8))
        if data.kind == "profile_hash":
            label.stylize("italic")
        prefix.append_text(label)
        prefix.append_text(count)
        return prefix

    def populate(self, nodes: list[tuple[ScopeNode, list[ScopeNode]]]) -> None:
        self.clear()
        for tier_node, children in nodes:
            branch = self.root.add(self.label_for(tier_node), data=tier_node, expand=True)
            parents = {(c.kind, c.parent) for c in children if c.parent is not None}
            placed: dict[tuple[str, Any], TreeNode[ScopeNode]] = {}
            # Parents first (fewer parents above them), each level in the listed order.
            for child in sorted(children, key=lambda c: c.depth):
                under = placed.get((child.kind, child.parent), branch)
                label = self.label_for(child)
                if (child.kind, child.value) in parents:
                    placed[(child.kind, child.value)] = under.add(label, data=child, expand=True)
                else:
                    under.add_leaf(label, data=child)

    def scope_nodes(self, tier_node: TreeNode[ScopeNode]) -> list[TreeNode[ScopeNode]]:
        """Every node under a tier's node, nested ones included, top to bottom."""
        out: list[TreeNode[ScopeNode]] = []
        for child in tier_node.children:
            out.append(child)
            out.extend(self.scope_nodes(child))
        return out

    def update_counts(self, nodes: list[tuple[ScopeNode, list[ScopeNode]]]) -> bool:
        """New counts in place when the same tiers and scopes are listed (cursor and
        scroll stay); False when the shape changed and the tree must be rebuilt."""

        def key(data: ScopeNode) -> tuple[str, str, str]:
            return (data.kind, repr(data.value), repr(data.parent))

        shape = [(t.tier, sorted(key(c) for c in children)) for t, children in nodes]
        current = [
            (
                t.data.tier if t.data else None,
                sorted(key(c.data) for c in self.scope_nodes(t) if c.data is not None),
            )
            for t in self.root.children
        ]
        if shape != current:
            return False
        for (tier_data, children), tier_node in zip(nodes, self.root.children, strict=True):
            if tier_node.data != tier_data:
                tier_node.data = tier_data
                tier_node.set_label(self.label_for(tier_data))
            by_key = {key(c.data): c for c in self.scope_nodes(tier_node) if c.data is not None}
            for data in children:
                child = by_key[key(data)]
                if child.data != data:
                    child.data = data
                    child.set_label(self.label_for(data))
        return True

    def relabel(self) -> None:
        def walk(node: TreeNode[ScopeNode]) -> None:
            for child in node.children:
                if child.data is not None:
                    child.set_label(self.label_for(child.data))
                walk(child)

        walk(self.root)

    def find(self, kind: str, tier: str, value: Any) -> TreeNode[ScopeNode] | None:
        """The node of ``value`` of scope key ``kind`` (or its label: ``profile``) in
        ``tier``; the tier's node when that value is not listed; None for no such tier."""
        for tier_node in self.root.children:
            if tier_node.data is None or tier_node.data.tier != tier:
                continue
            if kind == TIER:
                return tier_node
            for child in self.scope_nodes(tier_node):
                data = child.data
                if (
                    data is not None
                    and data.kind not in (TIER, MORE)
                    and kind in (data.kind, data.label)
                    and data.value == value
                ):
                    return child
            return tier_node
        return None

    def on_resize(self, event: Resize) -> None:
        self.relabel()


def scope_nodes(
    source: MemorySource,
    live: list[TierFacet],
    every: list[TierFacet],
    show_hidden: bool,
    limit: int | None = None,
) -> list[tuple[ScopeNode, list[ScopeNode]]]:
    """The tree's nodes from the live facets and those with hidden records included.

    Each tier lists, per facet key, its values with live records (and, when hidden
    records are shown, those with hidden ones only); at most ``limit`` (``TREE_VALUES``)
    values per key, the largest, in the source's order, then one ``MORE`` leaf counting the rest.
    """
    limit = TREE_VALUES if limit is None else limit
    live_by = {f.tier: f for f in live}
    every_by = {f.tier: f for f in every}
    tiers = list(source.tiers)
    for facet in [*every, *live]:
        if facet.tier not in tiers:
            tiers.append(facet.tier)
    nodes: list[tuple[ScopeNode, list[ScopeNode]]] = []
    for tier in tiers:
        live_facet, every_facet = live_by.get(tier), every_by.get(tier)
        live_count = live_facet.count if live_facet else 0
        total = every_facet.count if every_facet else live_count
        children: list[ScopeNode] = []
        for key in source.facet_keys:
            live_values = live_facet.scopes.get(key, {}) if live_facet else {}
            all_values = dict(every_facet.scopes.get(key, {}) if every_facet else {})
            for value, count in live_values.items():
                all_values.setdefault(value, count)
            entries: list[ScopeNode] = []
            for value, value_total in all_values.items():
                count = live_values.get(value, 0)
                if count or show_hidden:
                    entries.append(ScopeNode(key, tier, value, count, max(value_total - count, 0)))
            if len(entries) > limit:
                ranked = sorted(
                    range(len(entries)),
                    key=lambda i: -(entries[i].live + (entries[i].hidden if show_hidden else 0)),
                )
                keep = set(ranked[:limit])
                children += [n for i, n in enumerate(entries) if i in keep]
                children.append(ScopeNode(MORE, tier, key, len(entries) - limit, 0))
            else:
                children += entries
        nodes.append(
            (
                ScopeNode(TIER, tier, tier, live_count, max(total - live_count, 0)),
                _nested(source, children),
            )
        )
    return nodes


def _nested(source: Any, children: list[ScopeNode]) -> list[ScopeNode]:
    """``children`` with each value's nearest listed parent (``source.scope_parent``,
    then its parent's, ...) and its depth; the same list for a flat source."""
    listed = {(c.kind, c.value) for c in children if c.kind not in (TIER, MORE)}

    def parent_of(kind: str, value: Any) -> Any:
        seen = {value}
        parent = source.scope_parent(kind, value)
        while parent is not None and (kind, parent) not in listed and parent not in seen:
            seen.add(parent)
            parent = source.scope_parent(kind, parent)
        return None if parent is None or (kind, parent) not in listed else parent

    parents = {
        (c.kind, c.value): parent_of(c.kind, c.value)
        for c in children
        if c.kind not in (TIER, MORE)
    }

    def depth_of(kind: str, value: Any) -> int:
        depth, parent, seen = 0, parents.get((kind, value)), {value}
        while parent is not None and parent not in seen:
            seen.add(parent)
            depth += 1
            parent = parents.get((kind, parent))
        return depth

    out = []
    for child in children:
        parent = parents.get((child.kind, child.value))
        if parent is not None:
            child = replace(child, parent=parent, depth=depth_of(child.kind, child.value))
        out.append(child)
    return out
