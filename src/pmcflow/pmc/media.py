"""Media files: which ones to fetch, and whether an image file really is an image."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from pathlib import Path

from PIL import Image

IMAGE_EXTENSIONS = frozenset({"jpg", "jpeg", "png", "gif", "tif", "tiff", "bmp", "webp"})
XML_EXTENSIONS = (".nxml", ".xml")


def extension(name: str) -> str:
    return name.rsplit(".", 1)[-1].lower() if "." in name else ""


class MediaFilter:
    """Decides which media names are fetched (``source.media_types``; empty = all)."""

    def __init__(self, media_types: Iterable[str] | None) -> None:
        types = {t.lower().lstrip(".") for t in (media_types or []) if t.strip()}
        self.types: frozenset[str] | None = frozenset(types) or None

    def wanted(self, name: str) -> bool:
        return self.types is None or extension(name) in self.types

    @staticmethod
    def is_image(name: str) -> bool:
        return extension(name) in IMAGE_EXTENSIONS


def image_problem(path: str | Path) -> str | None:
    """None if Pillow can open and verify the file as an image, else a short description."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as im:
                fmt = im.format
                im.verify()
        if not fmt:
            return "unknown image format"
    except Image.DecompressionBombError as e:
        return f"decompression bomb: {e}"
    except Exception as e:  # noqa: BLE001 - Pillow raises many types for broken files
        return f"{type(e).__name__}: {e}"[:300]
    return None
