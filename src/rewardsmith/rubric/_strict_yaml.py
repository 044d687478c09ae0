"""Reading YAML strictly: a key given twice in one mapping is an error, not a silent overwrite.

PyYAML keeps the last of two equal keys without a word, so a rubric with two ``correct:``
components quietly loses one. ``read_yaml`` refuses it and says on which lines the key appears.
Merge keys (``<<: *base``) still override as YAML intends: only keys written in the mapping
itself are compared.

Numbers in exponent form without a dot (``1e-6``, ``5E3``) are floats, as in YAML 1.2 and JSON:
PyYAML follows YAML 1.1 and would read ``float_tolerance: 1e-6`` as the text ``"1e-6"``.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode

__all__ = ["DuplicateKeyError", "read_yaml"]

_MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKeyError(yaml.YAMLError):
    """A mapping names the same key twice; ``line`` and ``first_line`` are 1-based."""

    def __init__(self, key: Any, line: int, first_line: int):
        self.reason = (f"duplicate key {key!r} (first given on line {first_line}); YAML would "
                       "keep only the last one: remove or rename one of them")
        super().__init__(f"line {line}: {self.reason}")
        self.key = key
        self.line = line
        self.first_line = first_line


class _UniqueKeyLoader(yaml.SafeLoader):
    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        if isinstance(node, MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, ScalarNode) or key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key, Hashable):
                    continue  # PyYAML reports unhashable keys itself
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise DuplicateKeyError(key, line, seen[key])
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


# A private copy of the resolver table: PyYAML's add_implicit_resolver would otherwise append to
# lists it shares with SafeLoader, changing every safe_load in the process.
_UniqueKeyLoader.yaml_implicit_resolvers = {
    first: list(resolvers) for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+.0123456789"))


def read_yaml(text: str) -> Any:
    """Parse one YAML document like ``yaml.safe_load``, refusing duplicate mapping keys."""
    return yaml.load(text, Loader=_UniqueKeyLoader)
