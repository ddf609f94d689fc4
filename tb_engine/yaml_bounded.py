"""YAML from imported files, parsed safely and with alias expansion bounded.

Safe loading never runs code, but anchors and aliases can still make a few hundred bytes expand
into millions of nodes (the "billion laughs" alias bomb: each level refers to the previous one
nine times). ``load_yaml`` composes the document, counts the nodes its aliases would add once
expanded (each shared node counted once per reference) and refuses the document past
``MAX_ALIAS_NODES`` with a ``yaml.MarkedYAMLError`` whose mark is the anchor's line, so every
caller's existing YAML error handling names file and line.
"""

from __future__ import annotations

from typing import Any

import yaml

# libyaml's loader is ~10x faster on large files; same results as SafeLoader.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Nodes that aliases may add to a document. Real suites use a handful of aliases of small mappings.
MAX_ALIAS_NODES = 10_000


class AliasExpansionError(yaml.MarkedYAMLError):
    """Aliases in the document would expand past MAX_ALIAS_NODES nodes."""


def load_yaml(text: str, *, max_alias_nodes: int = MAX_ALIAS_NODES) -> Any:
    """The document in `text` (safe: plain data only), refusing alias expansion past the bound."""
    if "&" not in text:  # no anchor, so no alias: the plain fast path
        return yaml.load(text, Loader=_Loader)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_aliases(node, max_alias_nodes)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_aliases(root: yaml.Node, limit: int) -> None:
    sizes: dict[int, int] = {}  # id(node) -> its expanded node count
    seen: set[int] = set()
    added = 0

    def children(node: yaml.Node) -> list[yaml.Node]:
        if isinstance(node, yaml.SequenceNode):
            return list(node.value)
        if isinstance(node, yaml.MappingNode):
            return [part for pair in node.value for part in pair]
        return []

    def size(node: yaml.Node) -> int:
        # Iterative post-order (deep documents must not hit Python's recursion limit).
        stack: list[tuple[yaml.Node, bool]] = [(node, False)]
        while stack:
            current, done = stack.pop()
            key = id(current)
            if key in sizes:
                continue
            if done:
                sizes[key] = 1 + sum(sizes[id(child)] for child in children(current))
                if sizes[key] > limit:
                    _refuse(current, limit)
            else:
                stack.append((current, True))
                stack.extend((child, False) for child in children(current) if id(child) not in sizes)
        return sizes[id(node)]

    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:  # a second reference to the same node: an alias
            added += size(node)
            if added > limit:
                _refuse(node, limit)
            continue
        seen.add(id(node))
        stack.extend(children(node))


def _refuse(node: yaml.Node, limit: int) -> None:
    raise AliasExpansionError(
        problem=f"aliases expand to more than {limit} nodes (alias bomb?); anchor here",
        problem_mark=node.start_mark,
    )
