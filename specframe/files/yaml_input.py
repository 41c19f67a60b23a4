"""Safe YAML for user files and ``--set`` values: bounded aliases, no duplicate keys, errors with lines.

:func:`parse_yaml` composes the document first and checks the node graph before building Python objects:

* a key repeated in one mapping is an error naming both lines (YAML would keep the last one silently);
* aliases may share nodes, but the document expanded in full may hold at most :data:`MAX_NODES` nodes and
  nest at most :data:`MAX_DEPTH` levels (a few hundred bytes of nested aliases, a "billion laughs", would
  otherwise expand to gigabytes downstream); recursive aliases are refused;
* scalars with lone UTF-16 surrogates (``"\\ud800"``) are refused.

Only then is the node graph constructed with PyYAML's safe constructor (plain data, never Python objects).

Example::

    data, node = parse_yaml(text, source="pipeline.yaml")   # ConfigError on any of the above
"""

from __future__ import annotations

from typing import Any

import yaml

from specframe.errors import ConfigError
from specframe.files.read import SURROGATE, ErrorClass

#: Most nodes a YAML document may expand to (aliases counted at every use).
MAX_NODES = 100_000
#: Deepest nesting of mappings and sequences.
MAX_DEPTH = 64

_MERGE_TAG = "tag:yaml.org,2002:merge"


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _check_mapping_keys(node: yaml.MappingNode, source: str, error: ErrorClass) -> None:
    seen: dict[tuple[str, str], int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
            continue
        key = (key_node.tag, key_node.value)
        if key in seen:
            raise error(f"duplicate key '{key_node.value}' (lines {seen[key]} and {_line(key_node)})",
                        where=f"{source}:{_line(key_node)}",
                        hint="remove one of them; YAML would silently keep only the last")
        seen[key] = _line(key_node)


def check_node_graph(root: yaml.Node, *, source: str, error: ErrorClass = ConfigError) -> None:
    """Apply the checks of the module docstring to a composed document."""
    size: dict[int, int] = {}  # id(node) -> nodes in its full expansion
    depth_of: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:
            active.discard(key)
            children = _children(node)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth_of[key] = 1 + max((depth_of[id(c)] for c in children), default=0)
            if size[key] > MAX_NODES or depth_of[key] > MAX_DEPTH:
                raise error(f"the YAML document expands to more than {MAX_NODES} values or {MAX_DEPTH} levels "
                            "(through nested aliases or deep nesting)", where=f"{source}:{_line(node)}",
                            hint="write the values out; aliases may repeat small sections only")
            continue
        if key in size:
            continue
        if key in active:
            raise error("recursive alias: a section contains itself", where=f"{source}:{_line(node)}",
                        hint="remove the alias that refers to its own anchor")
        if depth > MAX_DEPTH:
            raise error(f"the YAML document nests more than {MAX_DEPTH} levels", where=f"{source}:{_line(node)}",
                        hint="flatten the structure")
        if isinstance(node, yaml.ScalarNode):
            if SURROGATE.search(node.value):
                raise error("a string holds a lone UTF-16 surrogate (such as \\ud800), which is not a character",
                            where=f"{source}:{_line(node)}", hint="write the character itself")
            size[key], depth_of[key] = 1, 0
            continue
        if isinstance(node, yaml.MappingNode):
            _check_mapping_keys(node, source, error)
        active.add(key)
        stack.append((node, depth, True))
        stack.extend((child, depth + 1, False) for child in _children(node))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _yaml_error(exc: yaml.YAMLError, source: str, error: ErrorClass) -> Exception:
    mark = getattr(exc, "problem_mark", None)
    where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    exc_out = error(f"malformed YAML: {problem}", where=where, hint="check indentation and quoting around this line")
    exc_out.yaml_syntax = True  # type: ignore[attr-defined]  # a syntax error, not a limit (see is_yaml_syntax_error)
    return exc_out


def is_yaml_syntax_error(exc: BaseException) -> bool:
    """Whether ``exc`` reports text that is not YAML at all (an override may then be a plain string), as opposed
    to YAML refused for a limit or a duplicate key."""
    return bool(getattr(exc, "yaml_syntax", False))


def parse_yaml(text: str, *, source: str, error: ErrorClass = ConfigError) -> tuple[Any, yaml.Node | None]:
    """The constructed document and its node graph (None for an empty document); see the module docstring."""
    try:
        loader = yaml.SafeLoader(text)  # checks the characters at once
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source, error) from None
    try:
        try:
            node = loader.get_single_node()
        except yaml.YAMLError as exc:
            raise _yaml_error(exc, source, error) from None
        except RecursionError:
            raise error(f"the YAML document nests more than {MAX_DEPTH} levels", where=source,
                        hint="flatten the structure") from None
        if node is None:
            return None, None
        check_node_graph(node, source=source, error=error)
        try:
            data = loader.construct_document(node)
        except yaml.YAMLError as exc:
            raise _yaml_error(exc, source, error) from None
        except (ValueError, TypeError, OverflowError) as exc:
            raise error(f"a value cannot be read: {exc}", where=source,
                        hint="check explicit tags (!!int, !!float, ...) and their values") from None
        return data, node
    finally:
        loader.dispose()
