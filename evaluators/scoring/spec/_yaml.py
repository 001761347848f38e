"""YAML spec text to data: PyYAML's safe loader, rejecting duplicate keys, with a fast path for large specs.

Two loaders give the same data:

- The reference: `_StrictLoader`, PyYAML's pure-Python `SafeLoader` with a mapping constructor that
  rejects duplicate keys. Its errors are the ones users see (`line 4, column 5: ... duplicate key`).
- The fast path, used first: libyaml (PyYAML's C parser) composes the node tree, with the same
  resolver, so every scalar gets the tag the reference gives it; `_TreeBuilder` then turns the
  tree into data with the same rules as the reference (duplicate keys rejected among a mapping's
  own keys, merge keys expanded by `SafeConstructor.flatten_mapping`, every tag other than
  str/seq/map constructed by `SafeConstructor` itself, aliases sharing one object). On a 10,000-case
  spec the pure-Python scanner took 53 s, libyaml with `SafeConstructor` ~5 s, this ~2 s.

Whenever the fast path fails for any reason, the text is parsed again by the reference, so an
error message (its words, line and column) is always the reference's, and a document libyaml
would reject while the reference accepts still loads. The one difference found between the two
parsers (tests/evaluators/scoring/test_spec_fast_path.py tries many) is that libyaml accepts a tab after
`key:`, so a text holding a tab is left to the reference. No Python object is ever built from a tag
on either path: both only know the safe constructors.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_MERGE = "tag:yaml.org,2002:merge"


def load_yaml(text: str) -> Any:
    """The data of a YAML document, as `_StrictLoader` gives it.

    Raises:
        yaml.YAMLError: the reference loader's error (malformed YAML, a duplicate key, an unknown tag).
    """
    # libyaml takes a tab where PyYAML's scanner refuses one (`key:<TAB>1`): a text with a tab
    # anywhere goes to the reference alone, so that both never disagree on what is valid.
    if _FastLoader is not None and "\t" not in text:
        try:
            return _fast_load(text, _FastLoader)
        except Exception:  # whatever went wrong, the reference below decides, in the words it always used
            pass
    return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass


def _fast_load(text: str, loader_class: type[Any]) -> Any:
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        return None if node is None else _TreeBuilder(loader).build(node)
    finally:
        loader.dispose()


class _TreeBuilder:
    """Builds data from a composed node tree as `_StrictLoader` would, taking shortcuts for str/seq/map.

    Containers are remembered by node, so an alias yields the same object as its anchor (and a
    recursive alias a recursive container) exactly as with `SafeConstructor`.
    """

    def __init__(self, constructor: SafeConstructor) -> None:
        self._constructor = constructor
        self._built: dict[int, Any] = {}

    def build(self, node: Node) -> Any:
        tag = node.tag
        if tag == _STR and type(node) is ScalarNode:
            return node.value
        done = self._built.get(id(node))
        if done is not None:
            return done
        if tag == _MAP and type(node) is MappingNode:
            return self._mapping(node)
        if tag == _SEQ and type(node) is SequenceNode:
            items: list[Any] = []
            self._built[id(node)] = items
            items.extend([self.build(child) for child in node.value])
            return items
        # int, float, bool, null, timestamps, binary, sets, omap: PyYAML's own safe constructors.
        return self._constructor.construct_object(node, deep=True)

    def _mapping(self, node: MappingNode) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        self._built[id(node)] = out
        build = self.build
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                out.clear()
                return self._merged(node, out)
            # Plain string keys and values, nearly all of a spec, without a call each.
            key = key_node.value if key_node.tag == _STR and type(key_node) is ScalarNode else build(key_node)
            if key in out:  # an unhashable key raises TypeError: the reference names it
                raise ConstructorError(None, None, "duplicate key", key_node.start_mark)
            is_str = value_node.tag == _STR and type(value_node) is ScalarNode
            out[key] = value_node.value if is_str else build(value_node)
        return out

    def _merged(self, node: MappingNode, out: dict[Any, Any]) -> dict[Any, Any]:
        # As `_construct_mapping`: duplicates among the mapping's own keys only, then the merge
        # keys expanded (a key written here overrides a merged one; the first merged one wins).
        own = [self.build(key) for key, _ in node.value if key.tag != _MERGE]
        if len(set(own)) != len(own):  # an unhashable key raises TypeError: the reference names it
            raise ConstructorError(None, None, "duplicate key", node.start_mark)
        self._constructor.flatten_mapping(node)
        for key_node, value_node in node.value:
            out[self.build(key_node)] = self.build(value_node)
        return out


def _fast_loader_class() -> type[Any] | None:
    """The C parser (libyaml) with the reference's resolver and constructor tables; `None` without libyaml."""
    c_loader: type[Any] | None = getattr(yaml, "CSafeLoader", None)
    if c_loader is None:
        return None

    class FastLoader(c_loader):  # type: ignore[valid-type,misc]
        # The reference's tables, so that a tag resolved or constructed here is the reference's.
        yaml_constructors = _StrictLoader.yaml_constructors
        yaml_multi_constructors = _StrictLoader.yaml_multi_constructors
        yaml_implicit_resolvers = _StrictLoader.yaml_implicit_resolvers
        yaml_path_resolvers = _StrictLoader.yaml_path_resolvers

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self._by_first: dict[str, list[tuple[str, Any]]] = {}

        # `Resolver.resolve`, `descend_resolver` and `ascend_resolver` run once per node in Python
        # (a third of composing): without path resolvers (the safe loader has none) the two walks
        # do nothing, and the implicit resolvers for a first character are looked up once.
        def descend_resolver(self, current_node: Any, current_index: Any) -> None:
            if self.yaml_path_resolvers:
                super().descend_resolver(current_node, current_index)

        def ascend_resolver(self) -> None:
            if self.yaml_path_resolvers:
                super().ascend_resolver()

        def resolve(self, kind: type[Node], value: Any, implicit: tuple[bool, bool]) -> str:
            if kind is not ScalarNode or self.yaml_path_resolvers:
                return str(super().resolve(kind, value, implicit))
            if implicit[0]:
                first = value[:1]
                resolvers = self._by_first.get(first)
                if resolvers is None:
                    table = self.yaml_implicit_resolvers
                    resolvers = self._by_first[first] = table.get(first, []) + table.get(None, [])
                for tag, regexp in resolvers:
                    if regexp.match(value):
                        return tag
            return str(self.DEFAULT_SCALAR_TAG)

    return FastLoader


class _StrictLoader(yaml.SafeLoader):
    """The safe loader, rejecting duplicate mapping keys (YAML would keep the last one silently)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    # Duplicates are looked for among the mapping's own keys, before merge keys (`<<: *base`)
    # are expanded: a key written here legally overrides one merged in, and merged mappings may
    # share keys (the first wins), as YAML specifies.
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == _MERGE:
            continue
        key = loader.construct_object(key_node)
        try:
            duplicate = key in seen
        except TypeError:  # a list or mapping as a key (`? [a, b] : 1`)
            raise ConstructorError(
                "while constructing a mapping", node.start_mark, "found unhashable key", key_node.start_mark
            ) from None
        if duplicate:
            raise ConstructorError(
                "while constructing a mapping", node.start_mark, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)

_FastLoader = _fast_loader_class()
