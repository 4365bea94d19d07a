"""Typed, frozen settings objects: a stage's config section as the stage reads it.

Each stage declares one :class:`Settings` subclass: a frozen dataclass whose fields are the keys of
its section in ``config/schema/config.schema.yaml``, with their Python types. The schema stays the
one place for defaults, types, enums and ranges; the class holds none of them. ``from_section``
fills the section from the schema and checks it (:func:`pmcflow.config.subsection`: an unknown key
or a bad value is a :class:`~pmcflow.config.ConfigError` naming its path), then builds the object:

- a field typed as another :class:`Settings` class is built from the nested object;
- ``tuple[X, ...]`` takes a list; ``Mapping[str, Any]`` a free-form object (frozen, read-only);
- ``X | None`` passes ``None`` through; ``int``/``str``/``bool`` are checked (an integral float
  becomes an int); a ``float`` field keeps an integer as written (``30``, not ``30.0``), as
  Python's numeric tower allows, so what a stage records of its settings reads as configured.

The class and the schema must name the same keys: a schema key the class does not read, or a field
the schema does not define, is an error at build time (and so in every test that builds it). A rule
script is then ``stage(Settings.from_section(snakemake.params.<section>), snakemake.input,
snakemake.output)``; a CLI builds the same object from :func:`pmcflow.config.load_config`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from pmcflow.config import ConfigError, subsection

S = TypeVar("S", bound="Settings")


class FrozenMap(Mapping[str, Any]):
    """A read-only mapping for a free-form config object (``detector_params``): hashable by value,
    picklable, equal to the dict it was made from."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        object.__setattr__(self, "_data", {k: freeze(v) for k, v in dict(data or {}).items()})

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("FrozenMap is read-only")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    def __hash__(self) -> int:  # values are frozen (tuples, FrozenMaps, scalars): hashable
        return hash(tuple(sorted(self._data.items())))

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenMap, (thaw(self),))


def freeze(value: Any) -> Any:
    """Mappings -> :class:`FrozenMap`, lists -> tuples, recursively; scalars as they are."""
    if isinstance(value, FrozenMap):
        return value
    if isinstance(value, Mapping):
        return FrozenMap(value)
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The plain JSON-like form of a frozen value (dicts and lists), for libraries and digests."""
    if isinstance(value, Settings):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(v) for v in value]
    return value


def _convert(hint: Any, raw: Any, path: tuple[str, ...]) -> Any:
    """``raw`` (a schema-checked JSON value) as the type ``hint`` says."""
    where = ".".join(path)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if raw is None and type(None) in args:
            return None
        rest = [a for a in args if a is not type(None)]
        errors: list[str] = []
        for arg in rest:  # the first member the value fits
            try:
                return _convert(arg, raw, path)
            except (ConfigError, TypeError, ValueError) as exc:
                errors.append(str(exc))
        raise ConfigError(f"{where}: {raw!r} fits none of {hint}: {'; '.join(errors)}")
    if isinstance(hint, type) and issubclass(hint, Settings):
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{where}: expected an object, got {raw!r}")
        return hint._build(raw, path)
    if origin is tuple:
        if not isinstance(raw, list | tuple):
            raise ConfigError(f"{where}: expected a list, got {raw!r}")
        args = typing.get_args(hint)
        item = args[0] if args else Any
        return tuple(_convert(item, v, (*path, str(i))) for i, v in enumerate(raw))
    if origin in (Mapping, dict) or hint in (Mapping, dict):
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{where}: expected an object, got {raw!r}")
        return FrozenMap(raw)
    if hint is Any:
        return freeze(raw)
    if hint is bool:
        if not isinstance(raw, bool):
            raise ConfigError(f"{where}: expected true or false, got {raw!r}")
        return raw
    if hint in (int, float):
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise ConfigError(f"{where}: expected a number, got {raw!r}")
        if hint is float:  # an int is a float here (PEP 484), kept as written: records stay as configured
            return raw
        if raw != int(raw):
            raise ConfigError(f"{where}: expected an integer, got {raw!r}")
        return int(raw)
    if hint is str:
        if not isinstance(raw, str):
            raise ConfigError(f"{where}: expected a string, got {raw!r}")
        return raw
    raise TypeError(f"{where}: settings field type {hint!r} is not supported")


@dataclasses.dataclass(frozen=True)
class Settings:
    """Base of every stage's settings class (a frozen dataclass; see the module docstring)."""

    SECTION: ClassVar[tuple[str, ...]] = ()  # the section's key path in the config

    @classmethod
    def from_section(cls: type[S], value: Mapping[str, Any] | None) -> S:
        """The object for the config section ``value`` (``snakemake.params.<section>``, or the
        section of a loaded config), its defaults filled from the schema and checked there."""
        if not cls.SECTION:
            raise TypeError(f"{cls.__name__} names no config SECTION")
        if isinstance(value, Settings):
            if not isinstance(value, cls):
                raise TypeError(f"expected {cls.__name__}, got {type(value).__name__}")
            return value
        return cls._build(subsection(thaw(value), *cls.SECTION), cls.SECTION)

    @classmethod
    def from_config(cls: type[S], cfg: Mapping[str, Any] | None) -> S:
        """The object for this class's section of a whole config (a CLI's :func:`load_config`)."""
        node: Any = cfg or {}
        for key in cls.SECTION:
            node = (node or {}).get(key) if isinstance(node, Mapping) else None
        return cls.from_section(node)

    @classmethod
    def _build(cls: type[S], data: Mapping[str, Any], path: Sequence[str]) -> S:
        hints = typing.get_type_hints(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        unread = sorted(set(data) - set(names))
        if unread:
            raise ConfigError(
                f"{'.'.join(path)}: {', '.join(unread)} in the schema but not read by {cls.__name__}"
            )
        missing = [n for n in names if n not in data]
        if missing:
            raise ConfigError(
                f"{'.'.join(path)}: {cls.__name__} reads {', '.join(missing)}, which the config lacks "
                "and the schema gives no default for"
            )
        return cls(**{n: _convert(hints[n], data[n], (*path, n)) for n in names})

    def to_dict(self) -> dict[str, Any]:
        """The section as plain JSON values (for digests, records and libraries that take dicts)."""
        return {f.name: thaw(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def replace(self: S, **changes: Any) -> S:
        """A copy with ``changes`` applied: checked against the schema like the original for a class
        with a ``SECTION``; a nested class (no section of its own) is replaced as given."""
        return type(self).from_section({**self.to_dict(), **changes}) if self.SECTION else dataclasses.replace(
            self, **changes
        )
