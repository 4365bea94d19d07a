"""Loading figure images defensively: every file either becomes an 8-bit RGB image or an ImageError.

Real PMC figures include CMYK JPEGs, 16-bit greyscale TIFF/PNG, palette images with transparency,
animated GIFs, truncated downloads and the occasional decompression bomb.  Detectors only ever see
what :func:`load_image` returns, and a batch never dies on one file: callers catch
:class:`ImageError` per image (see :func:`pmcflow.detect.base.run_detection`).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
from PIL import Image, ImageFile, UnidentifiedImageError

from pmcflow.errors import RejectionError

# Refuse images larger than this many pixels (a 10k x 10k figure is far beyond any real PMC figure).
DEFAULT_MAX_PIXELS = 100_000_000

# Never silently decode half an image.
ImageFile.LOAD_TRUNCATED_IMAGES = False


class ImageError(RejectionError, ValueError):
    """A figure file that cannot be used (:class:`pmcflow.errors.RejectionError`: ``reason`` is a
    short machine-readable code); its message names the file."""

    def __init__(self, path: str, reason: str, detail: str) -> None:
        super().__init__(reason, detail)
        self.args = (f"{path}: {reason}: {detail}",)
        self.path = path


def _to_rgb(img: Image.Image) -> Image.Image:
    """Convert any Pillow mode to 8-bit RGB, compositing transparency onto white."""
    mode = img.mode
    if mode == "RGB":
        return img
    if mode in {"I;16", "I;16B", "I;16L", "I;16N", "I", "F"}:
        # High bit depth: stretch the used range to 0..255 instead of clipping at 255.
        arr = np.asarray(img, dtype=np.float64)
        lo, hi = float(np.nanmin(arr)), float(np.nanmax(arr))
        scaled = np.zeros_like(arr) if hi <= lo else (arr - lo) * (255.0 / (hi - lo))
        grey = np.nan_to_num(scaled).clip(0, 255).astype(np.uint8)
        return Image.fromarray(np.stack([grey] * 3, axis=-1), "RGB")
    if mode == "P":
        img = img.convert("RGBA") if "transparency" in img.info else img.convert("RGB")
        mode = img.mode
    if mode in {"RGBA", "LA", "PA", "RGBa", "La"}:
        rgba = img.convert("RGBA")
        bg = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(bg, rgba).convert("RGB")
    # L, 1, CMYK, YCbCr, LAB, HSV: Pillow's conversions are correct for these.
    return img.convert("RGB")


def load_image(path: str | os.PathLike[str], max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    """Open ``path`` and return a fully decoded 8-bit RGB image (first frame of animations).

    Raises :class:`ImageError` with reason ``missing``, ``unreadable`` (not an image / corrupt),
    ``truncated``, ``too_large`` (decompression bomb) or ``empty``.
    """
    p = str(path)
    if not Path(p).is_file():
        raise ImageError(p, "missing", "no such file")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(p) as img:
                w, h = img.size
                if w <= 0 or h <= 0:
                    raise ImageError(p, "empty", f"image size {w}x{h}")
                if w * h > max_pixels:
                    raise ImageError(p, "too_large", f"{w}x{h} pixels exceeds the limit of {max_pixels}")
                if getattr(img, "n_frames", 1) > 1:
                    img.seek(0)
                img.load()
                out = _to_rgb(img)
                if out is img:
                    out = img.copy()
    except ImageError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageError(p, "too_large", str(exc)) from exc
    except UnidentifiedImageError as exc:
        raise ImageError(p, "unreadable", "not a recognised image format") from exc
    except OSError as exc:
        msg = str(exc)
        reason = (
            "truncated" if "truncated" in msg.lower() or "broken data stream" in msg.lower() else "unreadable"
        )
        raise ImageError(p, reason, msg) from exc
    except (ValueError, SyntaxError, EOFError, MemoryError) as exc:
        raise ImageError(p, "unreadable", f"{type(exc).__name__}: {exc}") from exc
    return out
