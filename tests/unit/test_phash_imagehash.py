"""pmcflow's pHash is imagehash's: the same hex string on real images, any mode, ties included.

imagehash is the reference implementation, a test-only dependency (pinned in requirements/); it is
imported unconditionally so that a missing reference fails the suite instead of skipping it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import imagehash
import numpy as np
import pytest
import skimage.data
from PIL import Image

from pmcflow.filter.phash import hamming, hex_to_uint64, phash_hex, phash_int

REPO = Path(__file__).resolve().parents[2]
# Real figures: the demo corpus's figure images (tracked in git) and the shipped example panels.
REAL_GLOBS = ("demo/corpus/pmc-cloud/**/*.jpg", "src/pmcflow/data/panels/*.jpg")
SKIMAGE = (
    "astronaut", "brick", "camera", "cell", "chelsea", "checkerboard", "clock", "coffee", "coins",
    "colorwheel", "grass", "gravel", "horse", "hubble_deep_field", "immunohistochemistry", "logo",
    "microaneurysms", "moon", "page", "retina", "rocket", "text",
)


def _open(path: Path) -> Image.Image:
    with Image.open(path) as im:
        im.load()
        return im.copy()


def _real_images() -> list[tuple[str, Image.Image]]:
    out = [(str(p.relative_to(REPO)), _open(p)) for g in REAL_GLOBS for p in sorted(REPO.glob(g))]
    out += [(f"skimage.{name}", Image.fromarray(getattr(skimage.data, name)())) for name in SKIMAGE]
    return out


REAL = _real_images()


def _variants(seed: int) -> Iterator[tuple[str, Image.Image]]:
    """Crops, rescales and mode changes of the real images: the shapes and modes crops come in."""
    rng = np.random.default_rng(seed)
    for k in range(400):
        name, im = REAL[int(rng.integers(len(REAL)))]
        w, h = im.size
        cw, ch = int(rng.integers(1, w + 1)), int(rng.integers(1, h + 1))
        x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        crop = im.crop((x, y, x + cw, y + ch))
        if k % 3 == 0:
            f = rng.uniform(0.2, 2.0)
            crop = crop.resize((max(1, round(cw * f)), max(1, round(ch * f))), Image.Resampling.BILINEAR)
        yield f"{name}[crop {k}]", crop
    for name, im in REAL[::7]:
        for mode in ("L", "RGBA", "P", "LA", "1", "CMYK", "I", "I;16", "F"):
            yield f"{name}[{mode}]", im.convert(mode)


def _ties(seed: int) -> Iterator[tuple[str, Image.Image]]:
    """Images whose DCT coefficients tie in exact arithmetic (flat, mirrored, two-level, tiny):
    their bits come from floating-point round-off, which must be imagehash's too."""
    rng = np.random.default_rng(seed)
    for v in range(0, 256, 15):
        yield f"flat L {v}", Image.new("L", (int(rng.integers(1, 300)), int(rng.integers(1, 300))), v)
        yield f"flat RGB {v}", Image.new("RGB", (int(rng.integers(1, 300)), int(rng.integers(1, 300))), (v, 255 - v, v // 2))
    for k in range(120):
        a = rng.integers(0, 256, (int(rng.integers(1, 48)), int(rng.integers(1, 48))), dtype=np.uint8)
        if k % 2:
            a = np.concatenate([a, a[:, ::-1]], axis=1)
        if k % 3 == 0:
            a = np.concatenate([a, a[::-1]], axis=0)
        if k % 5 == 0:
            a = (a > 127).astype(np.uint8) * 255
        yield f"synthetic {k} {a.shape}", Image.fromarray(a)
    for s in (1, 2, 8, 31, 32, 33, 64):
        yield f"checker {s}", Image.fromarray((np.indices((s, s)).sum(0) % 2 * 255).astype(np.uint8))
        yield f"ramp {s}", Image.fromarray(np.tile((np.arange(s) * 255 // max(s - 1, 1)).astype(np.uint8), (s, 1)))


def _mismatches(cases: Iterator[tuple[str, Image.Image]]) -> tuple[int, list[str]]:
    n, bad = 0, []
    for name, im in cases:
        n += 1
        ours, ref = phash_hex(im), str(imagehash.phash(im, hash_size=8, highfreq_factor=4))
        if ours != ref:
            bad.append(f"{name} {im.mode} {im.size}: pmcflow {ours} imagehash {ref}")
    return n, bad


def test_reference_images_are_there() -> None:
    # the corpus must not silently shrink to nothing (the demo corpus has 122 figure images)
    assert sum(1 for name, _ in REAL if name.startswith("demo/")) >= 100
    assert sum(1 for name, _ in REAL if name.startswith("skimage.")) == len(SKIMAGE)


CASES = {"real": lambda: iter(REAL), "variants": lambda: _variants(3), "ties": lambda: _ties(5)}


@pytest.mark.parametrize("label", sorted(CASES))
def test_phash_equals_imagehash(label: str) -> None:
    n, bad = _mismatches(CASES[label]())
    assert n > 50
    assert not bad, f"{len(bad)}/{n} {label} images hash differently from imagehash:\n" + "\n".join(bad[:20])


def test_int_and_distance_agree_with_imagehash() -> None:
    """The integer the dedup search uses, its hex form and its Hamming distance are imagehash's."""
    ims = [im for _, im in REAL[:40]]
    refs = [imagehash.phash(im) for im in ims]
    ours = [phash_hex(im) for im in ims]
    assert [phash_int(im) for im in ims] == [int(h, 16) for h in ours]
    assert hex_to_uint64(ours).tolist() == [int(str(r), 16) for r in refs]
    for k, ref in enumerate(refs):
        assert imagehash.hex_to_hash(ours[k]) == ref
        assert (imagehash.hex_to_hash(ours[k]).hash == ref.hash).all()
    dists = [(hamming(ours[i], ours[j]), refs[i] - refs[j]) for i in range(len(ims)) for j in range(i + 1, len(ims))]
    assert all(a == b for a, b in dists)
    assert len({a for a, _ in dists}) > 5  # the distances are not all one value
