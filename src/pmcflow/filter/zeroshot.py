"""Zero-shot modality classification with an open_clip model (``filter.modality.backend: openclip``).

Each class is described by one or more text prompts (``filter.modality.openclip.prompts``; the
built-in :data:`DEFAULT_PROMPTS` when none are given).  As CLIP does, the prompts of a class are
encoded, L2-normalised, averaged and normalised again into one class embedding; an image's class
probabilities are the softmax over classes of ``logit_scale * cos(image, class)``.

The model is any open_clip model: a built-in name with a ``pretrained`` tag (``ViT-B-16`` +
``openai``), an ``hf-hub:`` id (weights and config from the Hugging Face cache, see ``pmcflow
fetch-models``), a config shipped in ``pmcflow/data/openclip`` (``tiny-vit-bpe``) or a
``local-dir:`` path, optionally with a ``checkpoint`` file (an encoder this workflow trained).
Loading goes through :class:`pmcflow.encoders.evaluate.Encoder`, the loader the evaluation stage
uses, so everything runs offline once the weights are local.  A model given no weights at all is
initialised from ``seed`` (random, deterministic: for tests of the mechanics only).
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from pmcflow.filter.checks import OpenClipSettings

DEFAULT_PROMPTS: dict[str, tuple[str, ...]] = {
    "radiology": (
        "a CT scan",
        "an X-ray radiograph",
        "an MRI scan",
        "an ultrasound image",
        "a nuclear medicine scan",
    ),
    "histopathology": (
        "a histopathology slide stained with hematoxylin and eosin",
        "an immunohistochemistry image of a tissue section",
        "a microscopic image of a tissue biopsy",
    ),
    "microscopy": (
        "a fluorescence microscopy image of cells",
        "a light micrograph of cells",
        "an electron micrograph",
    ),
    "retina": (
        "a retinal fundus photograph",
        "a fluorescein angiogram of the retina",
    ),
    "plot": (
        "a bar chart",
        "a line graph of data",
        "a scatter plot",
        "a box plot",
    ),
    "other": (
        "a photograph",
        "a schematic diagram",
        "a chemical structure",
        "a page of text",
        "a gel electrophoresis image",
        "a photograph of laboratory equipment",
    ),
}


class ZeroShotError(ValueError):
    """A bad zero-shot setting: a class without prompts, a local config with a pretrained tag, ..."""


def resolve_prompts(
    prompts: Mapping[str, Sequence[str]] | Sequence[tuple[str, Sequence[str]]] | None,
    classes: Sequence[str] | None = None,
) -> dict[str, list[str]]:
    """The prompts of each class to score, in order; raises :class:`ZeroShotError` for a class
    without prompts (listed in ``classes`` but not in ``prompts``, or with an empty list)."""
    items = list(prompts.items()) if isinstance(prompts, Mapping) else list(prompts or ())
    source = (
        {str(c): [str(t) for t in ([p] if isinstance(p, str) else p)] for c, p in items}
        if items
        else {c: list(p) for c, p in DEFAULT_PROMPTS.items()}
    )
    names = [str(c) for c in classes] if classes else list(source)
    missing = [c for c in names if not source.get(c)]
    if missing:
        where = (
            "filter.modality.openclip.prompts"
            if items
            else "the built-in prompts (pmcflow.filter.zeroshot.DEFAULT_PROMPTS)"
        )
        raise ZeroShotError(
            f"no prompts for class(es) {missing} in {where}; add filter.modality.openclip.prompts.<class>: "
            f"[...] (classes with prompts: {sorted(c for c in source if source[c])})"
        )
    if len(names) < 2:
        raise ZeroShotError(f"zero-shot classification needs at least two classes, have {names}")
    empty = [(c, t) for c in names for t in source[c] if not t.strip()]
    if empty:
        raise ZeroShotError(f"empty prompt for class {empty[0][0]!r}")
    return {c: source[c] for c in names}


def backend_name(settings: OpenClipSettings) -> str:
    """``openclip:<model>[@<pretrained>|@random-init(seed=N)][+<checkpoint file name>]`` (the
    ``modality_backend`` value)."""
    name = f"openclip:{settings.model}"
    hub = settings.model.startswith("hf-hub:")
    if settings.pretrained:
        name += f"@{Path(settings.pretrained).name if Path(settings.pretrained).is_file() else settings.pretrained}"
    elif not hub and not settings.checkpoint:
        name += f"@random-init(seed={settings.seed})"
    if settings.checkpoint:
        name += f"+{Path(settings.checkpoint).name}"
    return name


class ZeroShotClassifier:
    """An open_clip model and the class embeddings of its prompts."""

    def __init__(self, settings: OpenClipSettings) -> None:
        from pmcflow.encoders import model as MD

        self.settings = settings
        self.prompts = resolve_prompts(settings.prompts, settings.classes)
        self.classes = list(self.prompts)
        self.name = backend_name(settings)
        if settings.checkpoint and not Path(settings.checkpoint).is_file():
            raise ZeroShotError(f"filter.modality.openclip.checkpoint: {settings.checkpoint} not found")
        self._tmp = tempfile.TemporaryDirectory(prefix="pmcflow-zeroshot-")
        model_id = MD.prepare_model_dir(settings.model, Path(self._tmp.name) / "model")
        pretrained = settings.pretrained
        if model_id.startswith(MD.LOCAL_DIR) and pretrained is not None and not Path(pretrained).is_file():
            raise ZeroShotError(
                f"filter.modality.openclip: {settings.model} is a local config, so pretrained must be a "
                f"checkpoint file, not {pretrained!r}"
            )
        self.encoder = MD.Encoder(
            model_id, settings.checkpoint, settings.device, pretrained=pretrained, init_seed=settings.seed
        )
        self.logit_scale = min(100.0, float(self.encoder.model.logit_scale.detach().exp()))
        self.text_features = self._class_embeddings()

    def _class_embeddings(self) -> np.ndarray:
        rows = []
        for c in self.classes:
            emb = self.encoder.texts(self.prompts[c], batch_size=64).astype(np.float64)
            emb /= np.linalg.norm(emb, axis=1, keepdims=True).clip(1e-12)
            mean = emb.mean(axis=0)
            rows.append(mean / max(1e-12, float(np.linalg.norm(mean))))
        return np.stack(rows)

    def probabilities(
        self, inputs: Sequence[str | os.PathLike[str] | Image.Image], batch_size: int = 64
    ) -> np.ndarray:
        """``(n, classes)`` softmax probabilities (rows sum to 1), in input order."""
        from pmcflow.detect.images import load_image

        images = [im if isinstance(im, Image.Image) else load_image(im) for im in inputs]
        rgb = [im if im.mode == "RGB" else im.convert("RGB") for im in images]
        if not rgb:
            return np.zeros((0, len(self.classes)))
        feats = self.encoder.images(rgb, max(1, batch_size)).astype(np.float64)
        feats /= np.linalg.norm(feats, axis=1, keepdims=True).clip(1e-12)
        logits = self.logit_scale * feats @ self.text_features.T
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        return p / p.sum(axis=1, keepdims=True)

    def predict(
        self, inputs: Sequence[str | os.PathLike[str] | Image.Image], batch_size: int = 64
    ) -> list[tuple[str, float]]:
        """``(label, probability)`` per image, like :func:`pmcflow.filter.modality.predict_modality`."""
        probs = self.probabilities(inputs, batch_size)
        idx = probs.argmax(axis=1) if len(probs) else np.zeros(0, dtype=int)
        return [(self.classes[int(i)], round(float(probs[k, i]), 6)) for k, i in enumerate(idx)]


@functools.lru_cache(maxsize=2)
def load_zeroshot(settings: OpenClipSettings) -> ZeroShotClassifier:
    """A cached :class:`ZeroShotClassifier` for ``settings`` (one model load per process)."""
    return ZeroShotClassifier(settings)
