"""The Hugging Face Hub models a configuration names, and whether the local cache holds them.

Standard library only: ``rules/common.smk`` loads this file by path (the Snakemake process may have
no pmcflow install), so a run on offline compute nodes fails before any job starts when a model is
not in the cache, naming it, the config key that named it and the command that fetches it
(``pmcflow fetch-models``, :mod:`pmcflow.models`).

:func:`requested` is the one place that knows which config keys name hub assets:

====================================================  ==============================================
role (config key)                                     asset
====================================================  ==============================================
``enrich.subcaption.model``                           the subcaption VLM/LLM (Qwen2.5-VL-32B-Instruct
                                                      in production) when ``enrich.subcaption.backend``
                                                      is ``transformers`` or ``vllm`` and the model is
                                                      a hub id (``package:<name>`` and local paths are
                                                      not); only ``gguf_file`` when one is named
``enrich.summary.model``                              the summary LLM (Qwen2.5-14B-Instruct), the same
``train.model`` / ``train.preset`` /                  the encoder each training run builds (variants
``train.variants.<v>.model``                          included), see *open_clip models* below
``train.pretrained``                                  an open_clip pretrained tag of a built-in model
``evaluate.baselines.<name>.model``                   a baseline's model, see *open_clip models*
``evaluate.baselines.<name>.pretrained``              a baseline's open_clip pretrained tag
``detector.params.<backend>.init`` (+ ``init_file``)  the detector's starting weights when
                                                      ``detector.train`` is on and init is a hub id:
                                                      the whole repo (transformers) or one file
====================================================  ==============================================

*open_clip models* (what open_clip reads when it builds them): a shipped config
(``pmcflow/data/openclip/<name>``) or ``local-dir:<dir>`` names an HF text tower
(``<key>:text_cfg.hf_model_name``: config and weights, as no CLIP checkpoint brings them), its
tokenizer (``<key>:text_cfg.hf_tokenizer_name``) and, for training, the timm image tower's
pretrained weights (``<key>:vision_cfg.timm_model_name``) when the config asks for them
(``timm_model_pretrained``) or ``train.extra_args`` passes ``--pretrained-image`` (open_clip_train
only loads them with that flag; they are fetched whenever the config asks, so that adding the flag
never needs the network). ``hf-hub:<repo>`` is the repo's ``open_clip_config.json`` and CLIP
weights, plus the text tower config and tokenizer its config names (read from the cache once the
repo is there). A built-in open_clip name (``ViT-B-16``) and a pretrained tag (``openai``) or a
timm model name are resolved to hub repos by open_clip / timm themselves: such an asset is
*pending* here (``repo_id`` None) and :func:`pmcflow.models.assets` resolves it; the lock file
records what it resolved to, which is what the workflow's check reads.

Config sections that name no hub asset: ``decompose`` (it runs the detector this run trained, or a
local checkpoint), ``filter`` with its default ``timm`` backend (the modality classifier is the
shipped checkpoint or a path; its timm backbone is built with ``pretrained=False``).  With
``filter.modality.backend: openclip`` the zero-shot model ``filter.modality.openclip.model`` is an
asset like an evaluation baseline.

The cache is the one Hugging Face libraries read (``HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
``~/.cache/huggingface/hub``): ``<cache>/models--<org>--<name>/refs/<revision>`` holds the commit a
branch or tag points to, ``snapshots/<commit>/<path>`` the files. ``pmcflow fetch-models`` writes a
lock file (``<cache>/pmcflow-models.lock.json``) recording, per asset, the commit and the size and
SHA-256 of every file; :func:`missing` checks the config's assets against it and the cache (sizes,
not hashes: cheap enough for every workflow start; ``pmcflow fetch-models --check`` hashes).
"""

# No `from __future__ import annotations`: loaded by file path, this module is not in sys.modules,
# where dataclasses looks string annotations up.
import hashlib
import json
import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __name__ == "pmcflow.modelcache":
    from pmcflow import runs as _runs
else:  # loaded by file path from the workflow's tree (rules/common.smk): its runs.py beside it
    import importlib.util as _ilu

    _spec = _ilu.spec_from_file_location(f"{__name__}_runs", Path(__file__).with_name("runs.py"))
    assert _spec is not None and _spec.loader is not None
    _runs = _ilu.module_from_spec(_spec)
    _spec.loader.exec_module(_runs)

LOCK_NAME = "pmcflow-models.lock.json"
LOCK_FORMAT = "pmcflow-models-lock/1"
FETCH_COMMAND = "pmcflow fetch-models"
DEFAULT_REVISION = "main"
# The model train uses when neither train.model nor a preset names one (pmcflow.encoders.train).
DEFAULT_TRAIN_MODEL = "tiny-vit-bpe"
# the schema's filter.modality.openclip.model default (standard library only here: no schema loader)
DEFAULT_FILTER_OPENCLIP_MODEL = "hf-hub:microsoft/BiomedCLIP-PubMedBERT_256-vit_base_patch16_224"
OPENCLIP_DIR = Path(__file__).resolve().parent / "data" / "openclip"
LLM_BACKENDS = ("transformers", "vllm")
HF_HUB_PREFIX = "hf-hub:"
LOCAL_DIR_PREFIX = "local-dir:"
# What the value of a model key can be besides a hub id (pmcflow.enrich.llm, pmcflow.encoders.train).
_NOT_HUB_PREFIXES = ("package:", "pkg:", LOCAL_DIR_PREFIX, "file:", "/", ".", "~")
# Hugging Face repo ids: [org/]name of word characters, '-' and '.', no '--' or '..' (the hub's rule).
_REPO_ID = re.compile(r"^(?:[\w.-]+/)?[\w.-]{1,96}$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_TRUE = {"1", "ON", "YES", "TRUE"}

# Files an asset needs, by name (pmcflow.models.select_files turns one into file names):
#   transformers      a model for transformers / vLLM: configs, tokenizer, processor and one weight format
#   config            config.json only (a text tower whose weights come in a CLIP checkpoint)
#   tokenizer         the tokenizer files (and config.json, which AutoTokenizer may read)
#   open_clip         open_clip_config.json and the CLIP weights (hf-hub: models)
#   timm-hub          config.json and the weights of a timm hf-hub: model
#   weights:<file>    one weights file, its .safetensors alternative when the repo has one
#   gguf:<file>       one GGUF file
#   file:<file>       exactly that file (a detector checkpoint: .pt / .pth, no format swap)
# Pending assets carry what their resolver should produce instead:
#   weights           the weights of a timm model name or an open_clip pretrained tag
#   towers:<flags>    the towers of a built-in open_clip config; flags joined by '+':
#                     text-weights | text-config, image-weights


@dataclass(frozen=True)
class Asset:
    """One hub asset a configuration needs.

    ``role`` is the config key that named it (``enrich.subcaption.model``; a key inside the model
    config it points to follows a colon: ``train.preset:text_cfg.hf_model_name``); ``source`` the
    value found there. ``repo_id`` is None while the asset is *pending*: a timm model name or an
    open_clip built-in name / pretrained tag that only the library maps to a repo (``resolver``
    says which). ``origin`` is the :attr:`key` of the pending asset a resolved one came from.
    ``revision`` is the revision the config asks for (None: the default branch).
    """

    role: str
    source: str
    repo_id: str | None
    files: str
    revision: str | None = None
    repo_type: str = "model"
    resolver: str | None = None
    origin: str | None = None
    purpose: str = ""

    @property
    def pending(self) -> bool:
        """True until a library has mapped the asset to a hub repo."""
        return self.repo_id is None

    @property
    def key(self) -> str:
        """Identity of a pending asset in the lock file's ``resolved`` map."""
        return f"{self.role}={self.resolver}:{self.source}"

    @property
    def ref(self) -> str:
        """The revision loaders ask for: the requested one, else the default branch."""
        return self.revision or DEFAULT_REVISION

    @property
    def label(self) -> str:
        """How messages name the asset: ``org/name[@revision]`` or, pending, its source."""
        if self.repo_id is None:
            return f"{self.resolver}:{self.source}"
        return self.repo_id + (f"@{self.revision}" if self.revision else "")


JsonReader = Callable[[Asset, str], dict[str, Any] | None]


# ----------------------------------------------------------------------------------------------
# What a configuration names
# ----------------------------------------------------------------------------------------------
def is_hub_id(value: Any) -> bool:
    """True when ``value`` is a hub repo id a loader would download: not a ``package:``/``pkg:``
    placeholder, not a path (absolute, relative or existing), shaped like ``[org/]name``."""
    if not isinstance(value, str) or not value:
        return False
    if value.startswith(_NOT_HUB_PREFIXES) or "--" in value or ".." in value:
        return False
    if not _REPO_ID.match(value):
        return False
    return not Path(value).exists()


def _section(config: Mapping[str, Any], *keys: str) -> Mapping[str, Any]:
    """``config[k1][k2]...`` as a mapping ({} where a level is missing or not a mapping)."""
    cur: Any = config
    for k in keys:
        cur = cur.get(k) if isinstance(cur, Mapping) else None
    return cur if isinstance(cur, Mapping) else {}


def requested(config: Mapping[str, Any], read_json: JsonReader | None = None) -> list[Asset]:
    """Every hub asset ``config`` (validated, defaults filled) names, in config order, without
    duplicates; pending ones (``repo_id`` None) still need :func:`pmcflow.models.assets`.

    ``read_json(asset, filename)`` returns a JSON file of an asset already in the cache (or None):
    it adds the text tower and tokenizer an ``hf-hub:`` open_clip model's config names.
    """
    out: list[Asset] = []
    out += _enrich_assets(config)
    out += _train_assets(config, read_json)
    out += _baseline_assets(config, read_json)
    out += _detector_assets(config)
    out += _filter_assets(config, read_json)
    return list(dict.fromkeys(out))


def _filter_assets(config: Mapping[str, Any], read_json: JsonReader | None) -> list[Asset]:
    """The zero-shot open_clip model of ``filter.modality`` when its backend is ``openclip``
    (pmcflow.filter.zeroshot); the default timm backend loads a local checkpoint only."""
    modality = _section(config, "filter", "modality")
    if modality.get("enabled", True) is False or modality.get("backend", "timm") != "openclip":
        return []
    oc = _section(modality, "openclip")
    model = oc.get("model") or DEFAULT_FILTER_OPENCLIP_MODEL
    return open_clip_assets(
        "filter.modality.openclip.model",
        str(model),
        pretrained=oc.get("pretrained"),
        pretrained_key="filter.modality.openclip.pretrained",
        image_weights=False,
        training=False,
        read_json=read_json,
    )


def _detector_assets(config: Mapping[str, Any]) -> list[Asset]:
    """The pretrained weights the detector is fine-tuned from (pmcflow.detect.init)."""
    detector = _section(config, "detector")
    backend = str(detector.get("backend") or "")
    params = _section(detector, "params", backend)
    init = params.get("init")
    if not detector.get("train", True) or not is_hub_id(init):
        return []
    if backend == "transformers":
        files = "transformers"
    elif params.get("init_file"):
        files = f"file:{params['init_file']}"
    else:
        return []  # the backend refuses a hub init without init_file, naming the key
    return [
        Asset(
            role=f"detector.params.{backend}.init",
            source=str(init),
            repo_id=str(init),
            files=files,
            revision=params.get("init_revision") or None,
            purpose=f"pretrained {backend} detector to fine-tune",
        )
    ]


def _enrich_assets(config: Mapping[str, Any]) -> list[Asset]:
    """The LLMs of the enrich stage (pmcflow.enrich.llm.make_generator)."""
    out: list[Asset] = []
    for task in ("subcaption", "summary"):
        sec = _section(config, "enrich", task)
        backend = sec.get("backend")
        model = sec.get("model")
        if backend not in LLM_BACKENDS or not is_hub_id(model):
            continue
        # vLLM loads the repo (it has no gguf_file setting); transformers loads only the GGUF file
        # when one is named, and then passes no revision (TransformersGenerator).
        gguf = sec.get("gguf_file") if backend == "transformers" else None
        out.append(
            Asset(
                role=f"enrich.{task}.model",
                source=str(model),
                repo_id=str(model),
                files=f"gguf:{gguf}" if gguf else "transformers",
                revision=None if gguf else (sec.get("revision") or None),
                purpose=f"{task} {'LLM' if task == 'summary' else 'VLM'} ({backend} backend)",
            )
        )
    return out


def _train_assets(config: Mapping[str, Any], read_json: JsonReader | None) -> list[Asset]:
    """The open_clip model of every training run (one per train.variants entry)."""
    train = _section(config, "train")
    variants = _section(train, "variants")
    out: list[Asset] = []
    for run in _runs.encoder_runs(train):
        variant = _runs.variant_of(train, run)
        settings = _runs.run_settings(train, run)
        own = _section(variants, variant) if variant is not None else {}
        preset = settings.get("preset")
        model = (
            settings.get("model") or _runs.PRESETS.get(str(preset), {}).get("model") or DEFAULT_TRAIN_MODEL
        )
        if "model" in own:
            key = f"train.variants.{variant}.model"
        elif settings.get("model") or not preset:
            key = "train.model"
        else:
            key = f"train.variants.{variant}.preset" if "preset" in own else "train.preset"
        pretrained = settings.get("pretrained")
        pretrained_key = f"train.variants.{variant}.pretrained" if "pretrained" in own else "train.pretrained"
        extra = [str(a) for a in settings.get("extra_args") or ()]
        out += open_clip_assets(
            key,
            str(model),
            pretrained=pretrained,
            pretrained_key=pretrained_key,
            image_weights="--pretrained-image" in extra,
            training=True,
            read_json=read_json,
        )
    return out


def _baseline_assets(config: Mapping[str, Any], read_json: JsonReader | None) -> list[Asset]:
    """The models of ``evaluate.baselines`` (pmcflow.encoders.evaluate.baseline_encoder)."""
    out: list[Asset] = []
    for name, spec in _section(config, "evaluate", "baselines").items():
        if not isinstance(spec, Mapping) or not spec.get("model"):
            continue
        out += open_clip_assets(
            f"evaluate.baselines.{name}.model",
            str(spec["model"]),
            pretrained=spec.get("pretrained"),
            pretrained_key=f"evaluate.baselines.{name}.pretrained",
            image_weights=False,
            training=False,
            read_json=read_json,
        )
    return out


def _shipped_config(model: str) -> Path | None:
    """The ``open_clip_config.json`` of a config shipped in ``pmcflow/data/openclip``, if ``model`` names one."""
    path = OPENCLIP_DIR / model / "open_clip_config.json"
    return path if path.is_file() else None


def open_clip_assets(
    key: str,
    model: str,
    *,
    pretrained: Any,
    pretrained_key: str,
    image_weights: bool,
    training: bool,
    read_json: JsonReader | None,
) -> list[Asset]:
    """What open_clip downloads to build ``model`` (with ``pretrained``) for training or evaluation.

    ``image_weights``: ``--pretrained-image`` is passed (training only). The rules mirror
    ``open_clip.create_model``: a model without a CLIP checkpoint loads its HF text tower's weights;
    one with a checkpoint (an ``hf-hub:`` repo, a pretrained tag) needs the tower's config only.
    """
    shipped = _shipped_config(model)
    if shipped is not None or model.startswith(LOCAL_DIR_PREFIX):
        path = shipped or Path(model[len(LOCAL_DIR_PREFIX) :]) / "open_clip_config.json"
        try:
            cfg = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []  # a missing or broken local config fails in its own stage, not here
        model_cfg = cfg.get("model_cfg", cfg)
        vision = model_cfg.get("vision_cfg") or {}
        image = training and (image_weights or bool(vision.get("timm_model_pretrained")))
        return tower_assets(key, model_cfg, text_weights=True, image_weights=image)
    if model.startswith(HF_HUB_PREFIX):
        repo = model[len(HF_HUB_PREFIX) :]
        if not is_hub_id(repo):
            return []
        asset = Asset(role=key, source=model, repo_id=repo, files="open_clip", purpose="open_clip model")
        out = [asset]
        hub_cfg = read_json(asset, "open_clip_config.json") if read_json is not None else None
        if isinstance(hub_cfg, Mapping):
            out += tower_assets(
                key, hub_cfg.get("model_cfg", hub_cfg), text_weights=False, image_weights=False
            )
        return out
    # A built-in open_clip name: only open_clip knows its config and its pretrained tags.
    out = []
    tag = (
        pretrained if isinstance(pretrained, str) and pretrained and not Path(pretrained).is_file() else None
    )
    if tag is not None:
        out.append(
            Asset(
                role=pretrained_key,
                source=f"{model}@{tag}",
                repo_id=None,
                files="weights",
                resolver="open_clip-tag",
                purpose="open_clip pretrained weights",
            )
        )
    has_checkpoint = tag is not None or (isinstance(pretrained, str) and Path(pretrained).is_file())
    flags = ["text-config" if has_checkpoint else "text-weights"]
    if training and image_weights and not has_checkpoint:
        flags.append("image-weights")
    out.append(
        Asset(
            role=key,
            source=model,
            repo_id=None,
            files="towers:" + "+".join(flags),
            resolver="open_clip-builtin",
            purpose="towers of a built-in open_clip model",
        )
    )
    return out


def tower_assets(
    key: str, model_cfg: Mapping[str, Any], *, text_weights: bool, image_weights: bool
) -> list[Asset]:
    """The hub assets of an open_clip model config's towers: the HF text model (its weights when
    ``text_weights``, else its config), its tokenizer, and the timm image tower's pretrained weights
    when ``image_weights`` (pending: timm maps the name to a repo)."""
    text = model_cfg.get("text_cfg") or {}
    vision = model_cfg.get("vision_cfg") or {}
    out: list[Asset] = []
    name = text.get("hf_model_name")
    if is_hub_id(name):
        out.append(
            Asset(
                role=f"{key}:text_cfg.hf_model_name",
                source=str(name),
                repo_id=str(name),
                files="transformers" if text_weights else "config",
                purpose="text tower" + ("" if text_weights else " (config; weights in the CLIP checkpoint)"),
            )
        )
    tok = text.get("hf_tokenizer_name")
    if is_hub_id(tok):
        out.append(
            Asset(
                role=f"{key}:text_cfg.hf_tokenizer_name",
                source=str(tok),
                repo_id=str(tok),
                files="tokenizer",
                purpose="tokenizer",
            )
        )
    timm_name = vision.get("timm_model_name")
    if isinstance(timm_name, str) and timm_name:
        role = f"{key}:vision_cfg.timm_model_name"
        if timm_name.startswith(HF_HUB_PREFIX):  # timm reads the repo's config.json even without weights
            repo = timm_name[len(HF_HUB_PREFIX) :]
            if is_hub_id(repo):
                files = "timm-hub" if image_weights else "config"
                out.append(
                    Asset(role=role, source=timm_name, repo_id=repo, files=files, purpose="image tower")
                )
        elif image_weights:
            out.append(
                Asset(
                    role=role,
                    source=timm_name,
                    repo_id=None,
                    files="weights",
                    resolver="timm",
                    purpose="image tower pretrained weights",
                )
            )
    return out


# ----------------------------------------------------------------------------------------------
# The cache and the lock file
# ----------------------------------------------------------------------------------------------
def hub_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The hub cache the jobs read. ``APPTAINERENV_`` / ``SINGULARITYENV_`` variants of the
    variables below first: Apptainer hands them to the container even under ``--cleanenv`` (the
    Slurm profile), so when set they are what the jobs see. Then as ``huggingface_hub.constants``
    computes it: ``HF_HUB_CACHE``, ``HUGGINGFACE_HUB_CACHE``, ``$HF_HOME/hub``,
    ``$XDG_CACHE_HOME/huggingface/hub``, ``~/.cache/huggingface/hub``."""
    env = os.environ if environ is None else environ

    def expand(p: str) -> Path:
        return Path(os.path.expandvars(os.path.expanduser(p)))

    for prefix in ("APPTAINERENV_", "SINGULARITYENV_", ""):
        cache = env.get(f"{prefix}HF_HUB_CACHE") or env.get(f"{prefix}HUGGINGFACE_HUB_CACHE")
        if cache:
            return expand(cache)
        if env.get(f"{prefix}HF_HOME"):
            return expand(env[f"{prefix}HF_HOME"]) / "hub"
    return expand(env.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")) / "huggingface" / "hub"


def cache_dir_for(config: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Path:
    """``paths.models`` when the config has that key and it is set, else :func:`hub_cache_dir`."""
    configured = _section(config, "paths").get("models")
    return Path(os.path.expanduser(str(configured))) if configured else hub_cache_dir(environ)


def default_lock_path(cache: str | os.PathLike[str]) -> Path:
    """``<cache>/pmcflow-models.lock.json``."""
    return Path(cache) / LOCK_NAME


def read_lock(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The lock document at ``path``; None when there is none. A file that is not a lock raises
    ValueError naming it."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ValueError(f"{p}: not a readable lock file ({e})") from None
    if (
        not isinstance(doc, dict)
        or doc.get("format") != LOCK_FORMAT
        or not isinstance(doc.get("assets"), list)
    ):
        raise ValueError(f"{p}: not a {LOCK_FORMAT} lock file")
    return doc


def storage_dir(cache: str | os.PathLike[str], repo_id: str, repo_type: str = "model") -> Path:
    """``<cache>/models--org--name`` (huggingface_hub's repo folder)."""
    return Path(cache) / "--".join([f"{repo_type}s", *repo_id.split("/")])


def cached_commit(cache: str | os.PathLike[str], repo_id: str, repo_type: str, ref: str) -> str | None:
    """The commit ``ref`` (a commit, a branch or a tag) is at in the cache; None when unknown."""
    if _COMMIT.match(ref):
        return ref
    try:
        text = (storage_dir(cache, repo_id, repo_type) / "refs" / ref).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None


def lock_entry(lock: Mapping[str, Any] | None, asset: Asset) -> dict[str, Any] | None:
    """The lock's record of a resolved ``asset`` (same role, repo and requested revision)."""
    for entry in (lock or {}).get("assets") or ():
        if (
            entry.get("role") == asset.role
            and entry.get("repo_id") == asset.repo_id
            and entry.get("repo_type", "model") == asset.repo_type
            and (entry.get("revision") or None) == (asset.revision or None)
            and entry.get("files_rule") == asset.files
        ):
            return dict(entry)
    return None


def sha256_file(path: str | os.PathLike[str], bufsize: int = 1 << 22) -> str:
    """The SHA-256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(bufsize):
            h.update(chunk)
    return h.hexdigest()


def entry_problems(
    entry: Mapping[str, Any], cache: str | os.PathLike[str], *, hashes: bool = False
) -> list[str]:
    """What is wrong in the cache with one lock entry: the revision's ref not at the locked commit,
    files missing or of another size (and, with ``hashes``, another SHA-256)."""
    repo_id, repo_type = str(entry["repo_id"]), str(entry.get("repo_type") or "model")
    commit = str(entry["commit"])
    ref = str(entry.get("revision") or DEFAULT_REVISION)
    found = cached_commit(cache, repo_id, repo_type, ref)
    if found is None:
        return [f"not in the cache (no refs/{ref} under {storage_dir(cache, repo_id, repo_type)})"]
    out: list[str] = []
    if found != commit:
        out.append(f"the cache has {ref} at commit {found}, the lock has {commit}")
    snapshot = storage_dir(cache, repo_id, repo_type) / "snapshots" / commit
    absent: list[str] = []
    changed: list[str] = []
    for path, meta in sorted((entry.get("files") or {}).items()):
        p = snapshot / path
        if not p.is_file():
            absent.append(path)
        elif p.stat().st_size != int(meta["size"]):
            changed.append(f"{path} (size {p.stat().st_size}, locked {meta['size']})")
        elif hashes and sha256_file(p) != meta["sha256"]:
            changed.append(f"{path} (sha256 differs from the lock)")
    if absent:
        out.append(f"{len(absent)} file(s) missing at commit {commit[:12]}: {', '.join(absent)}")
    if changed:
        out.append(f"{len(changed)} file(s) changed: {', '.join(changed)}")
    return out


class CacheReader:
    """``read_json`` for :func:`requested`: a JSON file of an asset as the cache holds it, at its
    locked commit when the lock has one, else where its revision's ref points."""

    def __init__(self, cache: str | os.PathLike[str], lock: Mapping[str, Any] | None = None) -> None:
        self.cache = Path(cache)
        self.lock = lock

    def __call__(self, asset: Asset, filename: str) -> dict[str, Any] | None:
        if asset.repo_id is None:
            return None
        entry = lock_entry(self.lock, asset)
        commit = (
            str(entry["commit"])
            if entry
            else cached_commit(self.cache, asset.repo_id, asset.repo_type, asset.ref)
        )
        if commit is None:
            return None
        path = storage_dir(self.cache, asset.repo_id, asset.repo_type) / "snapshots" / commit / filename
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return doc if isinstance(doc, dict) else None


# ----------------------------------------------------------------------------------------------
# The workflow's check
# ----------------------------------------------------------------------------------------------
def fetch_command(
    config_files: Iterable[str | os.PathLike[str]],
    cache: str | os.PathLike[str] | None = None,
    lock: str | os.PathLike[str] | None = None,
) -> str:
    """``pmcflow fetch-models --config A [--config B] [--cache DIR] [--lock FILE]`` as a shell line."""
    parts = [FETCH_COMMAND]
    for f in config_files:
        parts += ["--config", _relative(f)]
    if cache is not None:
        parts += ["--cache", str(cache)]
    if lock is not None:
        parts += ["--lock", str(lock)]
    return " ".join(shlex.quote(p) if i else p for i, p in enumerate(parts))


def _relative(path: str | os.PathLike[str]) -> str:
    """``path`` relative to the working directory when it lies below it (Snakemake gives absolute ones)."""
    p = Path(path)
    try:
        return str(p.relative_to(Path.cwd())) if p.is_absolute() else str(p)
    except ValueError:
        return str(p)


def message(asset: Asset, problem: str, command: str) -> str:
    """One line per asset: what, which config key, what is wrong, how to fix it."""
    return f"{asset.label} ({asset.role}): {problem}; fetch it on a node with internet: {command}"


def asset_problems(asset: Asset, cache: str | os.PathLike[str], lock: Mapping[str, Any] | None) -> list[str]:
    """Why ``asset`` (resolved or pending) cannot be loaded offline from ``cache``; [] when it can.

    A resolved asset with a lock entry must be at the locked commit with every locked file of the
    locked size; without an entry (a cache filled by other means) its revision must have a snapshot
    with files in it. A pending asset needs the lock's record of what it resolved to.
    """
    if asset.pending:
        resolved = ((lock or {}).get("resolved") or {}).get(asset.key)
        if resolved is None:
            return ["not fetched yet (the lock file has no record of it)"]
        out: list[str] = []
        for entry in (lock or {}).get("assets") or ():
            if entry.get("origin") == asset.key:
                out += [f"{entry['repo_id']}: {p}" for p in entry_problems(entry, cache)]
        return out
    assert asset.repo_id is not None
    entry = lock_entry(lock, asset)
    if entry is not None:
        return entry_problems(entry, cache)
    commit = cached_commit(cache, asset.repo_id, asset.repo_type, asset.ref)
    folder = storage_dir(cache, asset.repo_id, asset.repo_type)
    if commit is None:
        return [f"not in the cache (no refs/{asset.ref} under {folder})"]
    snapshot = folder / "snapshots" / commit
    if not snapshot.is_dir() or not any(snapshot.iterdir()):
        return [f"no files at commit {commit} under {folder}"]
    return []


def missing(
    config: Mapping[str, Any],
    cache: str | os.PathLike[str] | None = None,
    *,
    config_files: Sequence[str | os.PathLike[str]] = (),
    lock_path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """One message per hub asset of ``config`` that an offline run could not load from ``cache``
    (default :func:`cache_dir_for`), naming it, its config key and the fetch command; [] when all
    are there (and at once when the config names none: the demo)."""
    assets = requested(config)
    if not assets:
        return []
    cache_path = Path(cache) if cache is not None else cache_dir_for(config, environ)
    lock_file = Path(lock_path) if lock_path is not None else default_lock_path(cache_path)
    command = fetch_command(
        config_files or ["<your config>"], cache_path, lock_file if lock_path is not None else None
    )
    try:
        lock = read_lock(lock_file)
    except ValueError as e:
        return [f"{e}; rewrite it with: {command}"]
    reader = CacheReader(cache_path, lock)
    out: list[str] = []
    for asset in requested(config, read_json=reader):
        out += [message(asset, p, command) for p in asset_problems(asset, cache_path, lock)]
    return out


def check_enabled(deployment_methods: Iterable[Any] = (), environ: Mapping[str, str] | None = None) -> bool:
    """Whether the workflow checks the model cache before a run: ``PMCFLOW_CHECK_MODELS`` when set
    (1/true or 0/false), else when rules run in the Apptainer images, which set ``HF_HUB_OFFLINE=1``
    for every job. (``HF_HUB_OFFLINE`` in the submitting shell is no signal: the Makefile and the
    test suite set it for every plan, production configs included.)"""
    env = os.environ if environ is None else environ
    forced = env.get("PMCFLOW_CHECK_MODELS")
    if forced is not None and forced.strip():
        return forced.strip().upper() in _TRUE
    return "apptainer" in {str(m) for m in deployment_methods}
