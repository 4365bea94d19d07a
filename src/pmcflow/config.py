"""Configuration: load YAML, validate against ``config/schema/config.schema.yaml``, fill defaults.

Snakemake validates with ``snakemake.utils.validate`` (rules/common.smk); the CLI and the tests use
:func:`load_config`, which applies the same schema with the same default-filling semantics, so a
stage function sees the same dict whether it is called from a rule or from the command line.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from pmcflow import compute, configcheck


class ConfigError(ValueError):
    """The configuration is invalid; the message says where and why."""


def _schema_path() -> Path:
    """The schema inside the package (``pmcflow/data/config.schema.yaml``): in a checkout a link to
    ``config/schema/config.schema.yaml``, in an installed package (a container image) a copy."""
    return Path(str(resources.files("pmcflow") / "data" / "config.schema.yaml"))


def _cache_dir() -> Path:
    return Path(os.environ.get("PMCFLOW_CACHE_DIR") or Path.home() / ".cache" / "pmcflow")


def load_schema() -> dict[str, Any]:
    """The parsed schema. Every stage call needs it; parsing its ~40 kB of YAML costs ~12 ms even
    with libyaml, so a JSON copy keyed by the SHA-256 of the YAML bytes is kept in the cache
    directory (``$PMCFLOW_CACHE_DIR``, default ``~/.cache/pmcflow``; 0.2 ms to read). A different
    schema has a different key, so the copy can never be stale; where the cache cannot be written
    (a read-only home in a container) the YAML is parsed every time."""
    raw = _schema_path().read_bytes()
    cached = _cache_dir() / "schema" / f"{hashlib.sha256(raw).hexdigest()}.json"
    try:
        return json.loads(cached.read_bytes())
    except (OSError, ValueError):
        pass
    schema: dict[str, Any] = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(schema), encoding="utf-8")
        os.replace(tmp, cached)  # atomic: concurrent jobs write the same bytes
    except OSError:
        pass
    return schema


def _fill_defaults(instance: Any, schema: Mapping[str, Any]) -> Any:
    """Fill ``default`` values of object properties recursively (what snakemake's validate does)."""
    if not isinstance(instance, dict) or schema.get("type") != "object":
        return instance
    for key, sub in (schema.get("properties") or {}).items():
        if key not in instance and "default" in sub:
            instance[key] = copy.deepcopy(sub["default"])
        if key in instance:
            instance[key] = _fill_defaults(instance[key], sub)
    return instance


def _schema_errors(schema: Mapping[str, Any], instance: Any, prefix: tuple[str, ...] = ()) -> list[str]:
    """``"<key path>: <message>"`` for every schema violation, in key-path order."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    out: list[str] = []
    for e in errors:
        path = [*prefix, *map(str, e.absolute_path)]
        if e.validator == "additionalProperties" and isinstance(e.instance, dict):
            allowed = sorted(e.schema.get("properties") or {})
            for key in sorted(set(e.instance) - set(allowed)):
                hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
                out.append(f"{'.'.join([*path, str(key)])}: unknown key{hint}")
            continue
        out.append(f"{'.'.join(path) or '<root>'}: {e.message}")
    return out


def section(cfg: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``cfg[name]`` with the schema's defaults filled in and checked against the schema: the one
    place a section's defaults, types and ranges live.

    Stages that accept a partial config (library and CLI callers) read their section through this,
    so a stage never carries a second copy of a default that could disagree with the schema. An
    unknown key or a bad value raises :class:`ConfigError` naming its path (``shard.splits``).
    """
    return subsection(cfg.get(name), name)


def subsection(value: Mapping[str, Any] | None, *path: str) -> dict[str, Any]:
    """The config object at key ``path`` (``("enrich", "subcaption")``) given as ``value``, with the
    schema's defaults filled in and checked, as :func:`section` does for a top-level section."""
    node = _schema_node(*path)
    out = _fill_defaults(copy.deepcopy(dict(value or {})), node)
    msgs = _schema_errors(node, out, prefix=tuple(path))
    if msgs:
        raise ConfigError("invalid configuration: " + "; ".join(msgs))
    return out


def unset_defaults(*path: str) -> dict[str, Any]:
    """``{key: x-default}`` of the object at key ``path``: the value a stage gives a key left unset
    after its preset (``train``: the ``openpmc18m`` recipe) had its say. Written as ``x-default``
    rather than ``default`` so that loading a config does not fill it in ahead of the preset."""
    props = _schema_node(*path).get("properties") or {}
    return {key: copy.deepcopy(spec["x-default"]) for key, spec in props.items() if "x-default" in spec}


def schema_default(*path: str) -> Any:
    """The schema's ``default`` of the key at ``path`` (``("detector", "score_threshold")``): for a
    library constant that must equal a config default, so that the number is written once."""
    node = _schema_node(*path)
    if "default" not in node:
        raise ConfigError(f"{'.'.join(path)} has no default in the schema")
    return copy.deepcopy(node["default"])


def _schema_node(*path: str) -> Mapping[str, Any]:
    """The schema of the config object at key ``path``; :class:`ConfigError` if there is none."""
    node: Mapping[str, Any] = load_schema()
    for depth, key in enumerate(path):
        props = node.get("properties") or {}
        if key not in props:
            raise ConfigError(f"no config section {'.'.join(path[: depth + 1])!r} in the schema")
        node = props[key]
    return node


def deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``override`` into a copy of ``base`` (dicts recursively, everything else replaced)."""
    out = copy.deepcopy(base)
    for k, v in override.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


_EXPONENT_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def parse_value(key: str, raw: str) -> Any:
    """The value of a ``KEY=VALUE`` override: YAML (``3``, ``true``, ``[a, b]``, ``{k: v}``), and
    numbers in exponent form without a dot (``1e-4``) as floats, as YAML 1.2 reads them (PyYAML
    reads YAML 1.1, where they are strings); ``""`` for an empty value."""
    if raw == "":
        return ""
    try:
        value: Any = yaml.safe_load(raw)
    except (yaml.YAMLError, ValueError) as e:
        raise ConfigError(f"{key}: cannot read {raw!r} ({e})") from None
    if isinstance(value, str) and _EXPONENT_FLOAT.fullmatch(raw.strip()):  # unquoted only
        return float(value)
    return value


def parse_sets(pairs: Iterable[str], option: str = "--set") -> dict[str, Any]:
    """``["epochs=3", "lr=1e-4"]`` -> ``{"epochs": 3, "lr": 0.0001}``: flat keys of one config
    object (a dotted key stays one key, e.g. a pass-through ``ultralytics.save_period``), values
    read by :func:`parse_value`; the caller checks the keys against the schema."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"{option} expects KEY=VALUE, got {pair!r}")
        key, raw = pair.split("=", 1)
        out[key.strip()] = parse_value(key.strip(), raw)
    return out


def parse_override(text: str) -> dict[str, Any]:
    """``a.b.c=value`` -> ``{"a": {"b": {"c": value}}}`` with ``value`` parsed as YAML."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} is not KEY=VALUE")
    key, _, raw = text.partition("=")
    value = parse_value(key.strip(), raw)
    out: dict[str, Any] = {}
    cur = out
    parts = key.strip().split(".")
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = value
    return out


def validate(config: dict[str, Any]) -> dict[str, Any]:
    """Validate ``config`` in place (defaults filled) and return it."""
    schema = load_schema()
    configcheck.normalise(config)
    _fill_defaults(config, schema)
    msgs = _schema_errors(schema, config)
    if not msgs:  # cross-field checks need well-typed values
        msgs = configcheck.problems(config) + compute.problems(config)
    if msgs:
        raise ConfigError("invalid configuration:\n" + "\n".join(f"  {m}" for m in msgs))
    return config


def load_config(
    paths: Iterable[str | os.PathLike[str]] = (),
    overrides: Iterable[str] | Mapping[str, Any] = (),
) -> dict[str, Any]:
    """Load and merge YAML files in order, apply overrides, validate, fill defaults."""
    config: dict[str, Any] = {}
    for p in paths:
        try:
            with open(p, encoding="utf-8") as fh:
                loaded = yaml.safe_load(fh) or {}
        except OSError as e:
            raise ConfigError(f"{p}: cannot read ({e.strerror})") from None
        except (yaml.YAMLError, ValueError) as e:  # ValueError: a date YAML cannot build (2020-13-45)
            raise ConfigError(f"{p}: not valid YAML ({e})") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"{p}: top level must be a mapping")
        config = deep_merge(config, loaded)
    if isinstance(overrides, Mapping):
        config = deep_merge(config, overrides)
    else:
        for ov in overrides:
            config = deep_merge(config, parse_override(ov))
    return validate(config)


def add_config_args(parser: Any) -> None:
    """Standard ``--config FILE`` (repeatable) and ``--set KEY=VALUE`` options for subcommands."""
    parser.add_argument(
        "--config",
        "-c",
        action="append",
        default=[],
        metavar="FILE",
        help="YAML config file (repeatable; later files override earlier ones).",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="overrides",
        help="Override one key, e.g. --set source.backend=local (repeatable).",
    )


def config_from_args(args: Any) -> dict[str, Any]:
    return load_config(args.config, args.overrides)
