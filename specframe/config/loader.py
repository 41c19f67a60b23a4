"""Reading pipeline files: YAML with ``extends:``, ``${VAR}`` expansion, ``--set a.b=c`` overrides, and
error messages that name the file and line of the offending value.

Merge rules: a child file's mapping is merged key by key into its base; a stage section whose ``type``
changes is *replaced*, not merged (the old component's fields would not fit the new one). The same holds
for overrides: ``--set tree_builder.type=chain`` drops the previous builder's other fields.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import yaml

from specframe.config.pipeline import STAGE_FIELDS
from specframe.errors import ConfigError
from specframe.files import MiB, parse_yaml, read_text
from specframe.files.read import check_strings
from specframe.files.yaml_input import is_yaml_syntax_error

Provenance = dict[tuple[str, ...], str]
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _node_lines(node: yaml.Node, path: tuple[str, ...], where: str, out: Provenance) -> None:
    """Record ``file:line`` for every mapping key path under ``node``."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = (*path, str(key_node.value))
            out[key] = f"{where}:{key_node.start_mark.line + 1}"
            _node_lines(value_node, key, where, out)


#: Largest pipeline file accepted (real ones are a few hundred bytes).
MAX_PIPELINE_BYTES = MiB


def read_yaml(path: Path) -> tuple[dict[str, Any], Provenance]:
    """Parse one YAML mapping and map each key path to ``file:line``."""
    text = read_text(path, what="pipeline file", max_bytes=MAX_PIPELINE_BYTES,
                     hint="check the path; relative paths in `extends:` are resolved against the file that "
                          "contains them")
    data, node = parse_yaml(text, source=str(path))
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"a pipeline file must be a YAML mapping, found {_yaml_kind(data)}", where=str(path),
                          hint="write `key: value` lines, e.g. `drafter: {type: ngram}`")
    lines: Provenance = {}
    if node is not None:
        _node_lines(node, (), str(path), lines)
    return data, lines


def _yaml_kind(value: Any) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}.get(
        type(value), type(value).__name__)


def _merge(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in child.items():
        old = out.get(key)
        if isinstance(old, dict) and isinstance(value, dict):
            if key in STAGE_FIELDS and "type" in value and value.get("type") != old.get("type"):
                out[key] = copy.deepcopy(value)
            else:
                out[key] = _merge(old, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


#: Most ``extends:`` loads behind one pipeline file (a file extended twice counts twice).
MAX_EXTENDS_LOADS = 64


def load_file(path: str | Path, _stack: tuple[Path, ...] = (),
              _loads: list[int] | None = None) -> tuple[dict[str, Any], Provenance]:
    """Load a pipeline file and, recursively, the files it ``extends:`` (at most :data:`MAX_EXTENDS_LOADS`)."""
    path = Path(path)
    resolved = path.resolve()
    if resolved in _stack:
        chain = " -> ".join(str(p) for p in (*_stack, resolved))
        raise ConfigError(f"`extends:` cycle: {chain}", hint="remove one of the `extends:` lines in this chain")
    loads = [0] if _loads is None else _loads
    loads[0] += 1
    if loads[0] > MAX_EXTENDS_LOADS:
        raise ConfigError(f"`extends:` loads more than {MAX_EXTENDS_LOADS} files behind {_stack[0]}",
                          where=str(path), hint="a base file extended from several places is loaded each time; "
                                                "simplify the `extends:` graph")
    data, lines = read_yaml(path)
    parents = data.pop("extends", None)
    if parents is None:
        return data, lines
    if isinstance(parents, str):
        parents = [parents]
    if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
        raise ConfigError("`extends:` must be a file path or a list of file paths",
                          where=lines.get(("extends",), str(path)))
    merged: dict[str, Any] = {}
    provenance: Provenance = {}
    for parent in parents:
        parent_path = (path.parent / parent) if not Path(parent).is_absolute() else Path(parent)
        if not parent_path.exists():
            raise ConfigError(f"`extends:` names a missing file: {parent_path}",
                              where=lines.get(("extends",), str(path)),
                              hint="paths are relative to the file that contains `extends:`")
        pdata, plines = load_file(parent_path, (*_stack, resolved), loads)
        merged = _merge(merged, pdata)
        provenance.update(plines)
    provenance.update(lines)
    return _merge(merged, data), provenance


def apply_override(data: dict[str, Any], override: str, provenance: Provenance, *,
                   origin: str | None = None) -> dict[str, Any]:
    """Apply one ``a.b.c=value`` override; the value is parsed as YAML (numbers, lists, booleans).

    ``origin`` names where the override comes from in messages and provenance (default ``--set a.b.c=value``;
    a sweep point says ``--sweep ...`` or the file's ``sweep:`` line)."""
    check_strings(override, where=origin or f"--set {override!r}")  # repr: the override may not print as is
    label = origin or f"--set {override}"
    if "=" not in override:
        raise ConfigError(f"override '{override}' is not of the form key.path=value",
                          hint="example: --set tree_builder.width=8")
    dotted, raw = override.split("=", 1)
    keys = [k for k in dotted.strip().split(".") if k]
    if not keys:
        raise ConfigError(f"override '{override}' has an empty key path")
    try:
        value = parse_yaml(raw, source=label)[0] if raw.strip() else ""
    except ConfigError as exc:
        if not is_yaml_syntax_error(exc):
            raise
        value = raw
    out = copy.deepcopy(data)
    node = out
    for i, key in enumerate(keys[:-1]):
        child = node.get(key)
        if child is None:
            child = node[key] = {}
        if not isinstance(child, dict):
            prefix = ".".join(keys[: i + 1])
            raise ConfigError(f"{label}: '{prefix}' is a value ({child!r}), not a section",
                              hint=f"set '{prefix}' itself, e.g. --set {prefix}=...")
        node = child
    leaf = keys[-1]
    if len(keys) == 2 and keys[0] in STAGE_FIELDS and leaf == "type" and node.get("type") != value:
        node.clear()
    node[leaf] = value
    provenance[tuple(keys)] = label
    return out


def expand_env(value: Any) -> Any:
    """Replace ``${VAR}`` and ``${VAR:-default}`` in strings with environment values.

    Unset variables without a default stay as written here; validation then refuses them, naming the field
    (:func:`specframe.config.validate.check_variables`), exactly as running the pipeline would.
    """
    if isinstance(value, str):
        def sub(m: re.Match[str]) -> str:
            if m.group(1) in os.environ:
                return os.environ[m.group(1)]
            return m.group(2) if m.group(2) is not None else m.group(0)

        return _VAR.sub(sub, value)
    if isinstance(value, dict):
        return {k: expand_env(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_env(v) for v in value]
    return value


def unresolved_variables(value: Any, path: str = "") -> list[tuple[str, str]]:
    """``(field path, VAR)`` for every ``${VAR}`` left unexpanded in a config dump."""
    found: list[tuple[str, str]] = []
    if isinstance(value, str):
        found.extend((path, m.group(1)) for m in _VAR.finditer(value))
    elif isinstance(value, dict):
        for k, v in value.items():
            found.extend(unresolved_variables(v, f"{path}.{k}" if path else str(k)))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found.extend(unresolved_variables(v, f"{path}[{i}]"))
    return found


def config_hash(config_dump: dict[str, Any]) -> str:
    """Stable short hash of a resolved config (the ``name`` field excluded)."""
    body = {k: v for k, v in config_dump.items() if k != "name"}
    text = json.dumps(body, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]
