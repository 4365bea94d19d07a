"""The paper's prompts (seed 000, Figures 7 and 8) and pmcflow's framing of the inputs around them.

The instruction text lives in ``src/pmcflow/data/prompts/*.txt``, copied verbatim from the paper.
The paper does not say how the inputs follow the instructions, so the framing below is ours; it is
part of the prompt hash. Inputs are ordered from the most shared to the least shared so that vLLM's
prefix cache reuses the longest prefix across the subfigures of one figure:

* subcaption (Fig. 7): instructions → full caption → [optional label hint] → subfigure image;
* summary (Fig. 8): instructions → full caption → context passage → subcaption.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

SUBCAPTION_FILE = "subcaption_fig7.txt"
SUMMARY_FILE = "summary_fig8.txt"

# Framing templates (pmcflow's own; versioned through the hash).
SUBCAPTION_FRAMING = "\n\nINPUT:\n\nFull caption:\n{caption}\n"
SUBCAPTION_LABEL_HINT = '\nThe subfigure is labelled "{label}" in the compound figure.\n'
SUBCAPTION_IMAGE_NOTE = "\nSubfigure image:\n"
SUMMARY_FRAMING = (
    "\n\nINPUT:\n\nFull caption:\n{caption}\n\nContext passage:\n{context}\n\nSubcaption:\n{subcaption}\n"
)


@dataclass(frozen=True)
class Prompt:
    """Instruction text plus the framing template; ``sha256`` identifies both together."""

    name: str
    instructions: str
    framing: str
    sha256: str
    file_sha256: str


def _read(name: str) -> bytes:
    return (resources.files("pmcflow") / "data" / "prompts" / name).read_bytes()


@cache
def load_prompt(kind: str) -> Prompt:
    """``kind`` is ``"subcaption"`` (Figure 7) or ``"summary"`` (Figure 8)."""
    if kind == "subcaption":
        fname, framing = SUBCAPTION_FILE, SUBCAPTION_FRAMING + SUBCAPTION_LABEL_HINT + SUBCAPTION_IMAGE_NOTE
    elif kind == "summary":
        fname, framing = SUMMARY_FILE, SUMMARY_FRAMING
    else:
        raise ValueError(f"unknown prompt kind {kind!r} (subcaption | summary)")
    raw = _read(fname)
    file_sha = hashlib.sha256(raw).hexdigest()
    combined = hashlib.sha256(raw + b"\x00" + framing.encode("utf-8")).hexdigest()
    return Prompt(kind, raw.decode("utf-8").rstrip("\n"), framing, combined, file_sha)


def subcaption_text(caption: str, label: str | None = None, *, with_image: bool = True) -> str:
    """The user message text for one subfigure (the image, if any, follows it)."""
    p = load_prompt("subcaption")
    text = p.instructions + SUBCAPTION_FRAMING.format(caption=caption)
    if label:
        text += SUBCAPTION_LABEL_HINT.format(label=label)
    if with_image:
        text += SUBCAPTION_IMAGE_NOTE
    return text


def summary_text(subcaption: str, caption: str, context: str) -> str:
    p = load_prompt("summary")
    return p.instructions + SUMMARY_FRAMING.format(caption=caption, context=context, subcaption=subcaption)


def qwen_chatml(user_text: str, *, image: bool, system: str = "You are a helpful assistant.") -> str:
    """A Qwen2/Qwen2.5(-VL) ChatML prompt with the image placeholder *after* the text.

    This is the format Qwen's chat template produces; writing it here keeps the prefix order
    under our control (text first, so subfigures of one figure share the cached prefix).
    """
    vision = "<|vision_start|><|image_pad|><|vision_end|>" if image else ""
    return (
        f"<|im_start|>system\n{system}<|im_end|>\n"
        f"<|im_start|>user\n{user_text}{vision}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
