"""Reading printed panel letters ("A", "(b)", "C.") on a compound figure.

Two steps:

1. **Candidates** (:func:`glyph_candidates`): connected components of the dark (luminance below
   ``dark``) and of the bright (above ``bright``) pixels whose size and shape fit a printed glyph.
   Each becomes a 2 x 32 x 32 input: the component's own mask, and the polarity-normalised grey
   window around it (the glyph bright on dark), both centred on the component and scaled so its
   longer side fills 3/4 of the window.
2. **Classification** (:class:`GlyphNet`): a tiny CNN over 27 classes, ``a``..``z`` (upper and
   lower case folded) and ``other`` (digits, punctuation, image structure, axis text...).

:meth:`LabelReader.read` keeps, for each subfigure box, the most probable confident letter found in
the box's *label zones*: near one of its four corners inside the box, or just above / left of its
top-left corner outside every box.  Figure-level consistency (unique letters, caption letters) is
applied by :func:`pmcflow.decompose.order.assign_labels`.

The weights ship in ``pmcflow/data/labelreader/`` (``glyphnet.pt`` + ``glyphnet.json``, with
``MODEL_CARD.md``); :mod:`pmcflow.decompose.train_labelreader` re-creates them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from scipy import ndimage
from torch import nn

CLASSES: tuple[str, ...] = tuple("abcdefghijklmnopqrstuvwxyz") + ("other",)
OTHER = len(CLASSES) - 1
INPUT = 32
SHIPPED_DIR = Path(__file__).resolve().parents[1] / "data" / "labelreader"
WEIGHTS = "glyphnet.pt"
META = "glyphnet.json"


@dataclass(frozen=True)
class CandidateParams:
    dark: int = 96  # luminance below this is "dark" ink
    bright: int = 160  # luminance above this is "bright" ink
    min_h: int = 6  # glyph height in pixels
    max_h_frac: float = 0.1  # ... at most this fraction of the shorter image side
    max_h_px: int = 24  # ... or this many pixels, whichever is larger
    min_aspect: float = 0.12  # width / height
    max_aspect: float = 1.6
    min_fill: float = 0.12  # ink pixels / bbox area
    max_fill: float = 0.95
    max_candidates: int = 4000  # per image; the largest-contrast ones are kept beyond this


@dataclass(frozen=True)
class Candidate:
    """A glyph-like component: its box (x, y, w, h) in image pixels and polarity."""

    x: int
    y: int
    w: int
    h: int
    bright: bool

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2


def luminance(rgb: np.ndarray) -> np.ndarray:
    a = rgb.astype(np.float32)
    return 0.299 * a[..., 0] + 0.587 * a[..., 1] + 0.114 * a[..., 2]


def glyph_candidates(
    image: Image.Image | np.ndarray,
    params: CandidateParams = CandidateParams(),
    want: Callable[[Candidate], bool] | None = None,
) -> tuple[list[Candidate], np.ndarray]:
    """Glyph-like components of ``image`` and their network inputs ``(n, 2, 32, 32)`` float32.

    ``want`` filters candidates before their inputs are built (e.g. only those in a label zone).
    """
    rgb = np.asarray(image.convert("RGB") if isinstance(image, Image.Image) else image)
    grey = luminance(rgb)
    H, W = grey.shape
    max_h = max(params.max_h_px, int(params.max_h_frac * min(H, W)))
    eight = np.ones((3, 3), dtype=bool)
    cands: list[Candidate] = []
    inputs: list[np.ndarray] = []
    for bright, mask in ((False, grey < params.dark), (True, grey > params.bright)):
        labels, _ = ndimage.label(mask, structure=eight)
        for idx, sl in enumerate(ndimage.find_objects(labels), start=1):
            if sl is None:
                continue
            ys, xs = sl
            h, w = ys.stop - ys.start, xs.stop - xs.start
            if not params.min_h <= h <= max_h or not params.min_aspect <= w / h <= params.max_aspect:
                continue
            comp = labels[sl] == idx
            fill = float(comp.mean())
            if not params.min_fill <= fill <= params.max_fill:
                continue
            c = Candidate(int(xs.start), int(ys.start), int(w), int(h), bright)
            if want is not None and not want(c):
                continue
            cands.append(c)
            inputs.append(_window(grey, labels, idx, c))
            if len(cands) >= params.max_candidates:
                break
    if not inputs:
        return [], np.zeros((0, 2, INPUT, INPUT), dtype=np.float32)
    return cands, np.stack(inputs).astype(np.float32)


def _window(grey: np.ndarray, labels: np.ndarray, idx: int, c: Candidate) -> np.ndarray:
    """The 2-channel input of one candidate (mask, normalised grey), 32 x 32."""
    side = max(c.w, c.h) * 4 / 3
    x0 = c.cx - side / 2
    y0 = c.cy - side / 2
    H, W = grey.shape
    # Integer window (padded with edge values outside the image), then resized.
    ix0, iy0 = int(np.floor(x0)), int(np.floor(y0))
    n = max(1, int(np.ceil(side)))
    ys = np.clip(np.arange(iy0, iy0 + n), 0, H - 1)
    xs = np.clip(np.arange(ix0, ix0 + n), 0, W - 1)
    g = grey[np.ix_(ys, xs)]
    m = (labels[np.ix_(ys, xs)] == idx).astype(np.float32)
    inside = ((np.arange(iy0, iy0 + n) >= 0) & (np.arange(iy0, iy0 + n) < H))[:, None] & (
        (np.arange(ix0, ix0 + n) >= 0) & (np.arange(ix0, ix0 + n) < W)
    )[None, :]
    m = m * inside
    g = g / 255.0 if c.bright else 1.0 - g / 255.0
    gi = Image.fromarray((g * 255).astype(np.uint8), "L").resize((INPUT, INPUT), Image.Resampling.BILINEAR)
    mi = Image.fromarray((m * 255).astype(np.uint8), "L").resize((INPUT, INPUT), Image.Resampling.BILINEAR)
    return np.stack([np.asarray(mi, dtype=np.float32) / 255.0, np.asarray(gi, dtype=np.float32) / 255.0])


class GlyphNet(nn.Module):
    """Three 3x3 conv blocks (16, 32, 64 channels) and a 128-unit head: ~0.2 M parameters."""

    def __init__(self, n_classes: int = len(CLASSES)) -> None:
        super().__init__()

        def block(i: int, o: int) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(), nn.MaxPool2d(2))

        self.features = nn.Sequential(block(2, 16), block(16, 32), block(32, 64))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(64 * 4 * 4, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, n_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


# ----------------------------------------------------------------------------------------------
# Box zones
# ----------------------------------------------------------------------------------------------
def _inside(c: Candidate, b: Sequence[float]) -> bool:
    return b[0] <= c.cx < b[0] + b[2] and b[1] <= c.cy < b[1] + b[3]


def zone_owner(c: Candidate, boxes: Sequence[Sequence[float]], zone_frac: float = 0.2) -> int | None:
    """The box whose label zone holds candidate ``c``, or None.

    Inside a box: the glyph must lie within ``max(3 glyph heights, zone_frac * shorter box side)``
    of one of the box's corners (both axes).  Outside every box: just above or left of a box's
    top-left corner, at most that far away; the nearest such box wins.
    """
    for i, b in enumerate(boxes):
        if _inside(c, b):
            z = max(3.0 * c.h, zone_frac * min(b[2], b[3]))
            dx = min(abs(c.x - b[0]), abs(b[0] + b[2] - (c.x + c.w)))
            dy = min(abs(c.y - b[1]), abs(b[1] + b[3] - (c.y + c.h)))
            return i if dx <= z and dy <= z else None
    best: tuple[float, int] | None = None
    for i, b in enumerate(boxes):
        z = max(3.0 * c.h, zone_frac * min(b[2], b[3]))
        above = 0 <= b[1] - (c.y + c.h) <= z and b[0] - z <= c.x <= b[0] + 0.25 * b[2]
        left = 0 <= b[0] - (c.x + c.w) <= z and b[1] - z <= c.y <= b[1] + 0.25 * b[3]
        if above or left:
            d = float(np.hypot(c.cx - b[0], c.cy - b[1]))
            if best is None or d < best[0]:
                best = (d, i)
    return None if best is None else best[1]


# ----------------------------------------------------------------------------------------------
# The reader
# ----------------------------------------------------------------------------------------------
class LabelReader:
    """Trained :class:`GlyphNet` + candidate extraction + box zones."""

    def __init__(
        self,
        model: GlyphNet,
        sha256: str,
        min_prob: float = 0.9,
        params: CandidateParams = CandidateParams(),
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model.eval()
        self.sha256 = sha256
        self.min_prob = min_prob
        self.params = params
        self.meta = dict(meta or {})

    @classmethod
    def load(cls, directory: str | Path, min_prob: float = 0.9) -> LabelReader:
        d = Path(directory)
        weights = d / WEIGHTS
        meta = json.loads((d / META).read_text(encoding="utf-8")) if (d / META).is_file() else {}
        model = GlyphNet()
        state = torch.load(weights, map_location="cpu", weights_only=True)
        model.load_state_dict({k: v.float() for k, v in state.items()})
        sha = hashlib.sha256(weights.read_bytes()).hexdigest()
        params = CandidateParams(**meta.get("candidate_params", {}))
        return cls(model, sha, min_prob=min_prob, params=params, meta=meta)

    @classmethod
    def shipped(cls, min_prob: float = 0.9) -> LabelReader | None:
        """The packaged reader, or None when the package ships no weights."""
        if not (SHIPPED_DIR / WEIGHTS).is_file():
            return None
        return cls.load(SHIPPED_DIR, min_prob=min_prob)

    @torch.no_grad()
    def classify(self, inputs: np.ndarray, batch: int = 1024) -> np.ndarray:
        """Class probabilities ``(n, 27)`` for candidate inputs."""
        if len(inputs) == 0:
            return np.zeros((0, len(CLASSES)), dtype=np.float32)
        out = []
        for s in range(0, len(inputs), batch):
            logits = self.model(torch.from_numpy(inputs[s : s + batch]))
            out.append(torch.softmax(logits, dim=1).numpy())
        return np.concatenate(out)

    def read(self, image: Image.Image, boxes: Sequence[Sequence[float]]) -> dict[int, tuple[str, float]]:
        """``{box index: (letter, probability)}`` for boxes where a confident letter was found."""
        if not boxes:
            return {}
        cands, inputs = glyph_candidates(image, self.params, want=lambda c: zone_owner(c, boxes) is not None)
        if not cands:
            return {}
        owners = [zone_owner(c, boxes) for c in cands]
        probs = self.classify(inputs)
        best: dict[int, tuple[str, float]] = {}
        for k, p in enumerate(probs):
            cls_ = int(np.argmax(p))
            prob = float(p[cls_])
            if cls_ == OTHER or prob < self.min_prob:
                continue
            owner = owners[k]
            assert owner is not None
            if owner not in best or prob > best[owner][1]:
                best[owner] = (CLASSES[cls_], prob)
        return best
