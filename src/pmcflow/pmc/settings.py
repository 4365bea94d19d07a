"""What listing and acquisition read of the config, typed and frozen (:mod:`pmcflow.settings`):
``source``, ``select``, ``http`` and ``chunking``. Defaults, enums and ranges live in the schema."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pmcflow.settings import Settings

if TYPE_CHECKING:
    from pmcflow.pmc.http import HttpSettings


@dataclass(frozen=True)
class CloudSettings(Settings):
    """``source.cloud``: the 2026 PMC Cloud layout."""

    base_url: str
    listing: str
    inventory_manifest: str
    pmcids: tuple[str, ...]
    pmcids_file: str
    versions: str


@dataclass(frozen=True)
class FtpSettings(Settings):
    """``source.ftp``: the legacy FTP layout (packages and their limits)."""

    base_url: str
    file_list: str
    max_member_mb: float
    max_package_mb: float
    max_members: int


@dataclass(frozen=True)
class LocalSettings(Settings):
    """``source.local``: a local mirror of either layout."""

    root: str
    layout: str


@dataclass(frozen=True)
class SourceSettings(Settings):
    """``source``."""

    SECTION: ClassVar[tuple[str, ...]] = ("source",)

    backend: str
    snapshot: str
    cloud: CloudSettings
    ftp: FtpSettings
    local: LocalSettings
    media_types: tuple[str, ...]
    verify_images: bool


@dataclass(frozen=True)
class SelectSettings(Settings):
    """``select``: which listed articles are acquired (:class:`pmcflow.pmc.select.Selection`)."""

    SECTION: ClassVar[tuple[str, ...]] = ("select",)

    licenses: tuple[str, ...]
    include_retracted: bool
    date_from: str
    date_to: str
    max_articles: int


@dataclass(frozen=True)
class ChunkingSettings(Settings):
    """``chunking``."""

    SECTION: ClassVar[tuple[str, ...]] = ("chunking",)

    pmcid_span: int


@dataclass(frozen=True)
class PmcSettings:
    """The sections the listing and acquisition stages read, each typed and frozen."""

    source: SourceSettings
    select: SelectSettings
    http: HttpSettings  # imported lazily below: pmcflow.pmc.http imports requests
    chunking: ChunkingSettings

    @classmethod
    def from_sections(
        cls,
        source: Mapping[str, Any] | None = None,
        select: Mapping[str, Any] | None = None,
        http: Mapping[str, Any] | None = None,
        chunking: Mapping[str, Any] | None = None,
    ) -> PmcSettings:
        """From the sections as a rule's params pass them (each filled from the schema, checked)."""
        from pmcflow.pmc.http import HttpSettings

        return cls(
            SourceSettings.from_section(source),
            SelectSettings.from_section(select),
            HttpSettings.from_section(http),
            ChunkingSettings.from_section(chunking),
        )

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> PmcSettings:
        """From a whole config (a CLI's :func:`pmcflow.config.load_config`)."""
        c = cfg or {}
        return cls.from_sections(c.get("source"), c.get("select"), c.get("http"), c.get("chunking"))
