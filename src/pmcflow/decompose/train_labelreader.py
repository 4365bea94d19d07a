"""Train the panel-letter reader (:class:`pmcflow.decompose.labelreader.GlyphNet`), deterministically.

Data: compound figures drawn by pmcflow's own compositor (:mod:`pmcflow.synth.compose`, the shipped
DejaVu fonts, the 10 label grammars of :mod:`pmcflow.synth.labels`) from the built-in source pool.
Half of the figures use the compositor's own grammar sampling; the other half force random letters
in a random label style (``A``, ``a``, ``(a)``, ``a)``, ``(A)``, ``A.``, ``1a``, ``a-1``) so every
letter of the alphabet is seen, not only the first few.  Each figure is augmented as a whole
(rescale 0.6-1.4x, JPEG quality 35-95, Gaussian blur) before :func:`glyph_candidates` runs on it,
so the network is trained on exactly the candidates it will see at inference.  A candidate is
labelled with the character whose rendered ink box it overlaps (IoU >= 0.5; digits and punctuation
-> ``other``); candidates touching a label without matching one character are left out; every other
candidate in a panel's label zone, plus 10 % of the rest, is an ``other`` example.

    python -m pmcflow.decompose.train_labelreader --out src/pmcflow/data/labelreader

Every random choice derives from ``(seed, "labelreader", figure index)``; training uses one thread
and a seeded generator, so the same command writes the same weights.
"""

from __future__ import annotations

import argparse
import io
import json
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageFilter
from torch import nn

from pmcflow.decompose.labelreader import (
    CLASSES,
    META,
    OTHER,
    WEIGHTS,
    CandidateParams,
    GlyphNet,
    LabelReader,
    glyph_candidates,
    zone_owner,
)
from pmcflow.detect.evaluate import iou_matrix
from pmcflow.seeding import rng_for
from pmcflow.synth import labels as L
from pmcflow.synth.compose import FigureParams, compose, sample_figure
from pmcflow.synth.sources import SourcePool, builtin_pool

STYLES: tuple[str, ...] = ("{U}", "{l}", "({l})", "{l})", "({U})", "{U}.", "{d}{l}", "{l}-{d}")
ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def _forced_labels(rng: np.random.Generator, n: int) -> list[str]:
    style = STYLES[int(rng.integers(len(STYLES)))]
    letters = rng.choice(list(ALPHABET), size=n, replace=False)
    return [style.format(U=c.upper(), l=c, d=int(rng.integers(1, 4))) for c in letters]


def char_boxes(font_name: str, size: int, text: str, x: int, y: int) -> list[tuple[str, list[float]]]:
    """Ink box (x, y, w, h) of each character of ``text`` drawn with its origin at ``(x, y)``."""
    f = L.font(font_name, size)
    out = []
    for k, ch in enumerate(text):
        adv = f.getlength(text[:k])
        l_, t, r, b = f.getbbox(ch)
        if r > l_ and b > t:
            out.append((ch, [x + adv + l_, y + t, float(r - l_), float(b - t)]))
    return out


def _augment(im: Image.Image, rng: np.random.Generator) -> tuple[Image.Image, float]:
    s = float(rng.uniform(0.6, 1.4))
    out = im.resize((max(16, round(im.width * s)), max(16, round(im.height * s))), Image.Resampling.BILINEAR)
    if rng.random() < 0.3:
        out = out.filter(ImageFilter.GaussianBlur(float(rng.uniform(0.3, 1.0))))
    if rng.random() < 0.7:
        buf = io.BytesIO()
        out.save(buf, "JPEG", quality=int(rng.integers(35, 96)))
        out = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    return out, s


def figure_examples(
    i: int, seed: int, pool: SourcePool, params: CandidateParams, neg_rate: float = 0.1
) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and class indices of the candidates of training figure ``i``."""
    rng = rng_for(seed, "labelreader", i)
    w, h = int(rng.integers(300, 801)), int(rng.integers(300, 801))
    if rng.random() < 0.5:
        n = int(rng.integers(2, 10))
        spec, panels = sample_figure(rng, pool, w, h, params=FigureParams(), n_panels=n, labels=_forced_labels(rng, n))
    else:
        spec, panels = sample_figure(rng, pool, w, h, params=FigureParams())
    im, _ = compose(spec, panels)
    im, s = _augment(im, rng)
    chars: list[tuple[str, list[float]]] = []
    label_boxes: list[list[float]] = []
    for p in spec.panels:
        if p.label is not None:
            chars += [(ch, [v * s for v in b]) for ch, b in char_boxes(p.label.font, p.label.size, p.label.text, p.label.x, p.label.y)]
            label_boxes.append([v * s for v in p.label.bbox])
    panel_boxes = [[p.x * s, p.y * s, p.w * s, p.h * s] for p in spec.panels]
    cands, inputs = glyph_candidates(im, params)
    if not cands:
        return np.zeros((0, 2, 32, 32), np.float32), np.zeros(0, np.int64)
    cb = np.asarray([[c.x, c.y, c.w, c.h] for c in cands], dtype=np.float64)
    ious = iou_matrix(cb, np.asarray([b for _, b in chars])) if chars else np.zeros((len(cands), 0))
    lab = np.asarray(label_boxes, dtype=np.float64).reshape(-1, 4)
    keep, ys = [], []
    for k, c in enumerate(cands):
        if ious.shape[1] and ious[k].max() >= 0.5:
            ch = chars[int(ious[k].argmax())][0]
            keep.append(k)
            ys.append(CLASSES.index(ch.lower()) if ch.isalpha() and ch.isascii() else OTHER)
            continue
        if len(lab):
            ix = np.clip(np.minimum(c.x + c.w, lab[:, 0] + lab[:, 2]) - np.maximum(c.x, lab[:, 0]), 0, None)
            iy = np.clip(np.minimum(c.y + c.h, lab[:, 1] + lab[:, 3]) - np.maximum(c.y, lab[:, 1]), 0, None)
            if (ix * iy).max() > 0.2 * c.w * c.h:
                continue  # part of a label but not one character: ambiguous, left out
        if zone_owner(c, panel_boxes) is not None or rng.random() < neg_rate:
            keep.append(k)
            ys.append(OTHER)
    return inputs[keep], np.asarray(ys, dtype=np.int64)


def build_dataset(n_figures: int, seed: int, pool: SourcePool, params: CandidateParams, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    for i in range(start, start + n_figures):
        x, y = figure_examples(i, seed, pool, params)
        xs.append(x)
        ys.append(y)
    return np.concatenate(xs), np.concatenate(ys)


def train(
    x: np.ndarray, y: np.ndarray, *, seed: int, epochs: int, batch: int = 256, lr: float = 2e-3
) -> tuple[GlyphNet, list[dict[str, float]]]:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = GlyphNet()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    steps = epochs * ((len(x) + batch - 1) // batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(1, steps))
    counts = np.bincount(y, minlength=len(CLASSES)).astype(np.float64)
    weights = torch.tensor(np.where(counts > 0, (counts.sum() / np.maximum(counts, 1)) ** 0.5, 0.0), dtype=torch.float32)
    loss_fn = nn.CrossEntropyLoss(weight=weights / weights[weights > 0].mean())
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    history = []
    for ep in range(epochs):
        model.train()
        perm = torch.randperm(len(x), generator=gen)
        total = 0.0
        for s in range(0, len(x), batch):
            idx = perm[s : s + batch]
            opt.zero_grad()
            loss = loss_fn(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(idx)
        history.append({"epoch": ep + 1, "loss": total / len(x)})
    return model.eval(), history


@torch.no_grad()
def accuracy(model: GlyphNet, x: np.ndarray, y: np.ndarray, min_prob: float) -> dict[str, float]:
    probs = torch.cat([torch.softmax(model(torch.from_numpy(x[s : s + 2048])), 1) for s in range(0, len(x), 2048)]).numpy()
    pred = probs.argmax(1)
    conf = probs.max(1)
    letters = y != OTHER
    accepted = (pred != OTHER) & (conf >= min_prob)
    return {
        "n": int(len(y)),
        "n_letters": int(letters.sum()),
        "accuracy": float((pred == y).mean()),
        "letter_accuracy": float((pred[letters] == y[letters]).mean()) if letters.any() else 0.0,
        # at the reader's acceptance threshold: how often an accepted letter is right, how many read
        "accepted_precision": float((pred[accepted] == y[accepted]).mean()) if accepted.any() else 0.0,
        "letter_recall_at_threshold": float((accepted & (pred == y))[letters].mean()) if letters.any() else 0.0,
        "other_false_accept_rate": float(accepted[~letters].mean()) if (~letters).any() else 0.0,
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=20260501)
    ap.add_argument("--figures", type=int, default=2400, help="training figures")
    ap.add_argument("--val-figures", type=int, default=300)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--min-prob", type=float, default=0.9)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    params = CandidateParams()
    pool = builtin_pool(max_side=768)
    t0 = time.perf_counter()
    x, y = build_dataset(args.figures, args.seed, pool, params)
    xv, yv = build_dataset(args.val_figures, args.seed, pool, params, start=10_000_000)
    t_data = time.perf_counter() - t0
    model, history = train(x, y, seed=args.seed, epochs=args.epochs)
    t_train = time.perf_counter() - t0 - t_data
    val = accuracy(model, xv, yv, args.min_prob)
    train_acc = accuracy(model, x, y, args.min_prob)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, out / WEIGHTS)
    meta: dict[str, Any] = {
        "model": "GlyphNet",
        "classes": list(CLASSES),
        "input": [2, 32, 32],
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "candidate_params": params.__dict__,
        "seed": args.seed,
        "train_figures": args.figures,
        "val_figures": args.val_figures,
        "val_figure_offset": 10_000_000,
        "epochs": args.epochs,
        "min_prob": args.min_prob,
        "train_examples": int(len(y)),
        "train_class_counts": {CLASSES[k]: int(v) for k, v in sorted(Counter(y.tolist()).items())},
        "history": history,
        "train": train_acc,
        "val": val,
        "seconds_data": round(t_data, 1),
        "seconds_train": round(t_train, 1),
        "torch": torch.__version__,
        "command": "python -m pmcflow.decompose.train_labelreader "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()),
    }
    (out / META).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    reader = LabelReader.load(out)
    print(json.dumps({"sha256": reader.sha256, "val": val, "train": train_acc, "history": history[-1]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
