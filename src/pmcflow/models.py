"""``pmcflow fetch-models``: put every Hugging Face Hub model a configuration names into the local
cache, lock it, and check it offline.

Production compute nodes have no internet. Run once on a node that has it::

    pmcflow fetch-models --config config/config.yaml

:func:`assets` lists what the (merged, schema-defaulted) configuration names -- the enumeration
itself is :func:`pmcflow.modelcache.requested`, standard library only so the workflow can check the
cache before a run; this module resolves what only open_clip or timm can map to a repo (a timm
image tower, an open_clip pretrained tag or built-in model) and downloads with ``huggingface_hub``
into the cache the rules read (``HF_HUB_CACHE`` / ``$HF_HOME/hub``, or ``--cache``). Each asset is
pinned to the commit its revision resolves to, only the files its loader reads are fetched
(:func:`select_files`), and every file is checked against the hub's own checksum (the LFS SHA-256,
else the git blob id) before the lock file records it.

The lock file (default ``<cache>/pmcflow-models.lock.json``) holds, per asset, the role (the config
key that named it), the repo id and type, the requested revision, the commit it resolved to, and
the size and SHA-256 of every file. ``--check`` verifies offline (``HF_HUB_OFFLINE=1``) that every
asset of the config is in the cache at its locked commit with every file's checksum, and exits 1
listing each missing or changed asset with the command that fetches it.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import fnmatch
import glob
import hashlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pmcflow import modelcache
from pmcflow.modelcache import Asset

log = logging.getLogger(__name__)

MAX_ROUNDS = 4  # fetch rounds: an hf-hub: model's config names its text tower, read once it is here
# Files no PyTorch loader reads (other frameworks, exports, original checkpoints).
TRANSFORMERS_SKIP = (
    "*.h5",
    "*.msgpack",
    "*.ot",
    "*.onnx",
    "*.onnx_data",
    "*.tflite",
    "*.gguf",
    "*.mlmodel",
    "tf_model*",
    "flax_model*",
    "rust_model*",
    "onnx/*",
    "openvino/*",
    "coreml/*",
    "original/*",
    ".gitattributes",
)
# Pickled PyTorch weights: dropped when the repo has .safetensors weights (every loader prefers them).
TORCH_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt")
# What AutoTokenizer reads (top level of the repo); config.json tells it the model type.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "*.model",
    "chat_template.jinja",
    "chat_template.json",
    "config.json",
)
TOKENIZER_CORE = ("tokenizer.json", "vocab.txt", "vocab.json", "tokenizer_config.json")
OPEN_CLIP_CONFIG = "open_clip_config.json"
OPEN_CLIP_WEIGHTS = "open_clip_pytorch_model.bin"


class ModelsError(ValueError):
    """A model cannot be fetched or checked; the message names it."""


# ----------------------------------------------------------------------------------------------
# What the configuration names
# ----------------------------------------------------------------------------------------------
def assets(
    config: Mapping[str, Any],
    *,
    cache: str | os.PathLike[str] | None = None,
    lock: Mapping[str, Any] | None = None,
) -> list[Asset]:
    """Every hub asset ``config`` names, each mapped to a repo (see :mod:`pmcflow.modelcache` for
    the roles). With ``cache``, the text towers that ``hf-hub:`` open_clip models name in their own
    config are included once those models are in the cache (at their ``lock`` commit if given)."""
    return plan(config, cache=cache, lock=lock)[0]


def plan(
    config: Mapping[str, Any],
    *,
    cache: str | os.PathLike[str] | None = None,
    lock: Mapping[str, Any] | None = None,
    memo: dict[str, list[Asset]] | None = None,
) -> tuple[list[Asset], dict[str, list[str]]]:
    """``(assets, resolved)``: the resolved assets and, per pending asset's key, the roles it
    resolved to (the lock's ``resolved`` map, which the workflow's stdlib check reads).
    ``memo`` keeps resolutions between calls (one warning per unresolvable name)."""
    reader = modelcache.CacheReader(cache, lock) if cache is not None else None
    memo = {} if memo is None else memo
    out: list[Asset] = []
    resolved: dict[str, list[str]] = {}
    for asset in modelcache.requested(config, read_json=reader):
        if not asset.pending:
            out.append(asset)
            continue
        if asset.key not in memo:
            memo[asset.key] = [replace(a, origin=asset.key) for a in resolve(asset)]
        resolved[asset.key] = [a.role for a in memo[asset.key]]
        out += memo[asset.key]
    return list(dict.fromkeys(out)), resolved


def resolve(asset: Asset) -> list[Asset]:
    """The hub assets a pending asset stands for, asking the library that owns the name."""
    resolvers: dict[str, Callable[[Asset], list[Asset]]] = {
        "timm": _resolve_timm,
        "open_clip-tag": _resolve_open_clip_tag,
        "open_clip-builtin": _resolve_open_clip_builtin,
    }
    if asset.resolver not in resolvers:
        raise ModelsError(f"{asset.role}: no resolver {asset.resolver!r}")
    try:
        return resolvers[asset.resolver](asset)
    except ImportError as e:
        raise ModelsError(
            f"{asset.label} ({asset.role}): only {e.name or asset.resolver} can map it to a hub repo, and it is "
            "not installed here (run fetch-models in the environment that trains and evaluates)"
        ) from e


def _resolve_timm(asset: Asset) -> list[Asset]:
    """A timm model name (``arch.tag``) -> the repo of its pretrained weights (``hf_hub_id``)."""
    import timm.models

    try:
        cfg = timm.models.get_pretrained_cfg(asset.source)
    except (RuntimeError, ValueError) as e:
        log.warning("%s (%s): timm does not know it (%s); nothing to fetch", asset.source, asset.role, e)
        return []
    hub = getattr(cfg, "hf_hub_id", None) if cfg is not None else None
    if not hub:
        log.warning(
            "%s (%s): timm has no hub weights for it (url: %s); not a hub asset",
            asset.source,
            asset.role,
            getattr(cfg, "url", None),
        )
        return []
    repo, _, revision = str(hub).partition("@")
    filename = getattr(cfg, "hf_hub_filename", None) or "pytorch_model.bin"
    return [
        replace(asset, repo_id=repo, revision=revision or None, files=f"weights:{filename}", resolver=None)
    ]


def _resolve_open_clip_tag(asset: Asset) -> list[Asset]:
    """``model@tag`` -> the repo open_clip downloads the tag's weights from (its ``hf_hub``)."""
    import open_clip

    model, _, tag = asset.source.rpartition("@")
    cfg = open_clip.get_pretrained_cfg(model.replace("/", "-"), tag)
    if not cfg:
        log.warning(
            "%s (%s): open_clip knows no such pretrained tag; nothing to fetch", asset.source, asset.role
        )
        return []
    hub = str(cfg.get("hf_hub") or "")
    if "file" in cfg or not hub:
        log.warning(
            "%s (%s): open_clip loads it from %s; not a hub asset", asset.source, asset.role, cfg.get("url")
        )
        return []
    # 'org/name/' (the default weights file) or 'org/name/<file>', as open_clip.download_pretrained splits it
    repo, filename = os.path.split(hub)
    return [replace(asset, repo_id=repo, files=f"weights:{filename or OPEN_CLIP_WEIGHTS}", resolver=None)]


def _resolve_open_clip_builtin(asset: Asset) -> list[Asset]:
    """A built-in open_clip model name -> the HF text tower and tokenizer its config names (and the
    timm image weights with ``--pretrained-image``)."""
    import open_clip

    cfg = open_clip.get_model_config(asset.source.replace("/", "-"))
    if cfg is None:
        log.warning("%s (%s): not an open_clip model name; nothing to fetch", asset.source, asset.role)
        return []
    flags = set(asset.files.partition(":")[2].split("+"))
    towers = modelcache.tower_assets(
        asset.role, cfg, text_weights="text-weights" in flags, image_weights="image-weights" in flags
    )
    out: list[Asset] = []
    for tower in towers:
        out += resolve(tower) if tower.pending else [tower]
    return out


# ----------------------------------------------------------------------------------------------
# Which files of a repo
# ----------------------------------------------------------------------------------------------
def _matches(path: str, patterns: Iterable[str]) -> bool:
    """Whether ``path`` matches one of the glob ``patterns``."""
    return any(fnmatch.fnmatchcase(path, p) for p in patterns)


def safetensors_alternative(filename: str) -> str | None:
    """The ``.safetensors`` file timm and open_clip look for before ``filename``."""
    if filename == "pytorch_model.bin":
        return "model.safetensors"
    if filename == OPEN_CLIP_WEIGHTS:
        return "open_clip_model.safetensors"
    if filename.endswith((".bin", ".pth")):
        return filename[:-4] + ".safetensors"
    return None


def _one_weights_file(filename: str, paths: set[str], what: str) -> str:
    for candidate in (safetensors_alternative(filename), filename):
        if candidate and candidate in paths:
            return candidate
    raise ModelsError(f"{what}: the repo has no {filename} (nor its .safetensors alternative)")


def select_files(rule: str, paths: Iterable[str]) -> list[str]:
    """The files of a repo (``paths``) an asset needs, by its ``files`` rule (see
    :mod:`pmcflow.modelcache`); raises :class:`ModelsError` when the repo lacks what the loader reads."""
    available = set(paths)
    kind, _, arg = rule.partition(":")
    if kind == "transformers":
        keep = {p for p in available if not _matches(p, TRANSFORMERS_SKIP)}
        if any(p.endswith(".safetensors") for p in keep):
            keep = {p for p in keep if not _matches(p, TORCH_WEIGHTS)}
        if "config.json" not in keep:
            raise ModelsError("no config.json: not a transformers model")
        return sorted(keep)
    if kind == "config":
        if "config.json" not in available:
            raise ModelsError("no config.json")
        return ["config.json"]
    if kind == "tokenizer":
        keep = {p for p in available if "/" not in p and _matches(p, TOKENIZER_FILES)}
        if not keep & set(TOKENIZER_CORE) and not any(p.endswith(".model") for p in keep):
            raise ModelsError(f"no tokenizer files ({', '.join(TOKENIZER_CORE)}, *.model)")
        return sorted(keep)
    if kind == "open_clip":
        if OPEN_CLIP_CONFIG not in available:
            raise ModelsError(f"no {OPEN_CLIP_CONFIG}: not an open_clip model")
        return sorted({OPEN_CLIP_CONFIG, _one_weights_file(OPEN_CLIP_WEIGHTS, available, "CLIP weights")})
    if kind == "timm-hub":
        if "config.json" not in available:
            raise ModelsError("no config.json: not a timm model")
        return sorted({"config.json", _one_weights_file("pytorch_model.bin", available, "weights")})
    if kind == "weights" and arg:
        return [_one_weights_file(arg, available, "weights")]
    if kind == "file" and arg:
        if arg not in available:
            raise ModelsError(f"no {arg}")
        return [arg]
    if kind == "gguf" and arg:
        if arg not in available:
            raise ModelsError(f"no {arg}")
        return [arg]
    raise ModelsError(f"unknown files rule {rule!r}")


# ----------------------------------------------------------------------------------------------
# Fetching
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Digest:
    """A file's size, SHA-256 and (for files git stores itself) git blob id."""

    size: int
    sha256: str
    git_sha1: str | None


def file_digest(path: Path, *, git: bool, bufsize: int = 1 << 22) -> Digest:
    """One read of ``path``: its SHA-256 and, with ``git``, its git blob id (what the hub lists as
    the ``oid`` of a file that is not in LFS)."""
    size = path.stat().st_size
    sha = hashlib.sha256()
    blob = hashlib.sha1(f"blob {size}\0".encode()) if git else None
    with open(path, "rb") as fh:
        while chunk := fh.read(bufsize):
            sha.update(chunk)
            if blob is not None:
                blob.update(chunk)
    return Digest(size, sha.hexdigest(), blob.hexdigest() if blob is not None else None)


def _hub_mismatch(entry: Any, digest: Digest) -> str | None:
    """Why ``digest`` is not the file the hub lists in ``entry`` (a ``RepoFile``); None if it is."""
    lfs = getattr(entry, "lfs", None)
    if lfs is not None:
        if digest.sha256 != str(lfs.sha256).lower():
            return f"sha256 {digest.sha256[:12]}, the hub has {str(lfs.sha256)[:12]}"
    elif getattr(entry, "blob_id", None) and digest.git_sha1 != str(entry.blob_id).lower():
        return f"git blob {str(digest.git_sha1)[:12]}, the hub has {str(entry.blob_id)[:12]}"
    size = getattr(entry, "size", None)
    if size is not None and int(size) != digest.size:
        return f"{digest.size} bytes, the hub has {size}"
    return None


class _Digests:
    """File digests by path, size and mtime: a file shared by two assets is hashed once."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, int, int, bool], Digest] = {}

    def __call__(self, path: Path, *, git: bool) -> Digest:
        st = path.stat()
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns, git)
        if key not in self._seen:
            self._seen[key] = file_digest(path, git=git)
        return self._seen[key]


def fetch_asset(api: Any, asset: Asset, cache: Path, digests: _Digests) -> dict[str, Any]:
    """Download one resolved asset into ``cache`` pinned to the commit its revision resolves to,
    verify every file against the hub's checksums and return its lock entry."""
    from huggingface_hub import hf_hub_download, snapshot_download
    from huggingface_hub.hf_api import RepoFile

    assert asset.repo_id is not None
    revision = api.resolve_revision(
        asset.repo_id, repo_type=asset.repo_type, revision=asset.revision, cache_dir=cache
    )
    commit = str(revision.resolved)
    tree = {
        f.path: f
        for f in api.list_repo_tree(asset.repo_id, repo_type=asset.repo_type, revision=commit, recursive=True)
        if isinstance(f, RepoFile)
    }
    names = select_files(asset.files, tree)
    folder = Path(
        snapshot_download(
            asset.repo_id,
            repo_type=asset.repo_type,
            revision=revision,
            cache_dir=cache,
            allow_patterns=[glob.escape(n) for n in names],
        )
    )
    files: dict[str, dict[str, Any]] = {}
    for name in names:
        git = getattr(tree[name], "lfs", None) is None
        path = folder / name
        problem = _hub_mismatch(tree[name], digests(path, git=git)) if path.is_file() else "not downloaded"
        if problem is not None:  # a file changed in the cache since an earlier fetch: download it again
            log.warning("%s: %s: %s; downloading it again", asset.repo_id, name, problem)
            hf_hub_download(
                asset.repo_id,
                name,
                repo_type=asset.repo_type,
                revision=commit,
                cache_dir=cache,
                force_download=True,
            )
            problem = _hub_mismatch(tree[name], digests(path, git=git))
            if problem is not None:
                raise ModelsError(f"{name}: {problem} after a fresh download")
        digest = digests(path, git=git)
        files[name] = {"size": digest.size, "sha256": digest.sha256}
    return {
        "role": asset.role,
        "source": asset.source,
        "purpose": asset.purpose,
        "repo_id": asset.repo_id,
        "repo_type": asset.repo_type,
        "revision": asset.revision,
        "commit": commit,
        "files_rule": asset.files,
        "origin": asset.origin,
        "fetched": _now(),
        "files": files,
    }


def _now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _entry_key(entry: Mapping[str, Any]) -> tuple[Any, ...]:
    """What identifies a lock entry: one role, repo, requested revision and files rule."""
    return (
        entry["role"],
        entry.get("repo_type"),
        entry["repo_id"],
        entry.get("revision"),
        entry.get("files_rule"),
    )


def merge_lock(
    old: Mapping[str, Any] | None,
    entries: Sequence[Mapping[str, Any]],
    resolved: Mapping[str, list[str]],
    cache: Path,
) -> dict[str, Any]:
    """The lock document: ``entries`` replacing the old ones of the same role, repo, revision and
    files rule; other old entries (another config's assets in the same cache) are kept."""
    from huggingface_hub import __version__ as hub_version
    from huggingface_hub import constants

    new_keys = {_entry_key(e) for e in entries}
    kept = [dict(e) for e in (old or {}).get("assets") or () if _entry_key(e) not in new_keys]
    merged = sorted(
        [*kept, *map(dict, entries)], key=lambda e: (e["role"], e["repo_id"], str(e.get("revision")))
    )
    return {
        "format": modelcache.LOCK_FORMAT,
        "updated": _now(),
        "cache": str(cache),
        "endpoint": constants.ENDPOINT,
        "huggingface_hub": hub_version,
        "assets": merged,
        "resolved": dict(sorted({**((old or {}).get("resolved") or {}), **resolved}.items())),
    }


def write_lock(path: Path, doc: Mapping[str, Any]) -> None:
    """Write the lock atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


@dataclass
class FetchResult:
    """What :func:`fetch` did: the lock written, this config's entries, and the assets that failed."""

    lock: dict[str, Any]
    entries: list[dict[str, Any]]
    failed: list[tuple[Asset, str]]


def fetch(
    config: Mapping[str, Any],
    cache: str | os.PathLike[str],
    lock_path: str | os.PathLike[str],
    *,
    config_files: Sequence[str] = (),
) -> FetchResult:
    """Download every hub asset of ``config`` into ``cache`` and write the lock file at
    ``lock_path`` (merged with an existing one). An asset that fails is reported in the result and
    the others are still fetched; the lock records those that succeeded."""
    from huggingface_hub import HfApi, constants

    if constants.HF_HUB_OFFLINE:
        raise ModelsError(
            "offline mode is on (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set): unset it to fetch models"
        )
    cache_path = Path(cache).expanduser().resolve()
    api = HfApi()
    digests = _Digests()
    memo: dict[str, list[Asset]] = {}
    done: dict[Asset, dict[str, Any]] = {}
    failed: dict[Asset, str] = {}
    resolved: dict[str, list[str]] = {}
    for _ in range(MAX_ROUNDS):
        wanted, res = plan(config, cache=cache_path, memo=memo)
        resolved.update(res)
        todo = [a for a in wanted if a not in done and a not in failed]
        if not todo:
            break
        for asset in todo:
            log.info("fetching %s (%s)", asset.label, asset.role)
            try:
                entry = fetch_asset(api, asset, cache_path, digests)
            except Exception as e:  # one repo's failure (not found, gated, network) must not stop the others
                failed[asset] = f"{type(e).__name__}: {e}"
                log.error("%s (%s): %s", asset.label, asset.role, failed[asset])
                continue
            entry["config_files"] = [str(f) for f in config_files]
            done[asset] = entry
            size = sum(f["size"] for f in entry["files"].values())
            log.info(
                "  %s at %s: %d file(s), %.2f GB",
                asset.repo_id,
                entry["commit"][:12],
                len(entry["files"]),
                size / 1e9,
            )
    try:
        old = modelcache.read_lock(lock_path)
    except ValueError as e:
        log.warning("%s; writing a new one", e)
        old = None
    doc = merge_lock(old, list(done.values()), resolved, cache_path)
    if done or resolved or old is not None:  # a config that names no hub model leaves no lock behind
        write_lock(Path(lock_path), doc)
    return FetchResult(doc, list(done.values()), list(failed.items()))


# ----------------------------------------------------------------------------------------------
# Checking
# ----------------------------------------------------------------------------------------------
def check(
    config: Mapping[str, Any],
    cache: str | os.PathLike[str],
    lock_path: str | os.PathLike[str],
) -> list[dict[str, Any]]:
    """Per asset of ``config``: its lock entry's commit and the problems found in ``cache`` (files
    hashed). Reads only local files: run it with ``HF_HUB_OFFLINE=1``."""
    lock = modelcache.read_lock(lock_path)
    wanted, _ = plan(config, cache=cache, lock=lock)
    rows: list[dict[str, Any]] = []
    for asset in wanted:
        entry = modelcache.lock_entry(lock, asset)
        if entry is None:
            problems = [
                "not in the lock file" + ("" if lock is not None else f" (there is none at {lock_path})")
            ]
        else:
            problems = modelcache.entry_problems(entry, cache, hashes=True)
        rows.append(
            {
                "role": asset.role,
                "repo_id": asset.repo_id,
                "repo_type": asset.repo_type,
                "revision": asset.revision,
                "commit": entry["commit"] if entry else None,
                "files": len(entry["files"]) if entry else 0,
                "bytes": sum(int(f["size"]) for f in entry["files"].values()) if entry else 0,
                "problems": problems,
                "asset": asset,
            }
        )
    return rows


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------
def cli(argv: Sequence[str] | None = None) -> int:
    """``pmcflow fetch-models --config FILE [--config FILE2 ...] [--cache DIR] [--lock FILE]
    [--check] [--json]``."""
    from pmcflow.config import add_config_args

    ap = argparse.ArgumentParser(
        prog="pmcflow fetch-models",
        description=(
            "Download every Hugging Face Hub model the config names into the local cache and write a "
            "lock file (commit and SHA-256 of every file); with --check, verify offline that the "
            "cache holds them at the locked commits."
        ),
    )
    add_config_args(ap)
    ap.add_argument(
        "--cache",
        type=Path,
        default=None,
        metavar="DIR",
        help="hub cache folder (default: paths.models if the config has it, else HF_HUB_CACHE or $HF_HOME/hub)",
    )
    ap.add_argument(
        "--lock",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"lock file (default: <cache>/{modelcache.LOCK_NAME})",
    )
    ap.add_argument(
        "--check", action="store_true", help="verify offline instead of fetching; exit 1 on a problem"
    )
    ap.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    args = ap.parse_args(argv)
    if not args.config:
        ap.error("at least one --config FILE is required")
    if args.check:  # before any hub library is imported: nothing may reach the network
        os.environ["HF_HUB_OFFLINE"] = "1"
    from pmcflow.config import config_from_args

    config = config_from_args(args)
    cache = (args.cache or modelcache.cache_dir_for(config)).expanduser().resolve()
    lock_path = args.lock or modelcache.default_lock_path(cache)
    command = modelcache.fetch_command(args.config, cache, args.lock)
    if args.check:
        return _cli_check(config, cache, lock_path, command, as_json=args.json)
    result = fetch(config, cache, lock_path, config_files=list(args.config))
    if args.json:
        out = {
            "lock": str(lock_path),
            "cache": str(cache),
            "assets": result.entries,
            "failed": [{"role": a.role, "repo_id": a.repo_id, "error": err} for a, err in result.failed],
        }
        print(json.dumps(out, indent=2, sort_keys=True))
    elif not result.entries and not result.failed:
        print("the config names no hub model: nothing to fetch")
    else:
        n_files = sum(len(e["files"]) for e in result.entries)
        size = sum(f["size"] for e in result.entries for f in e["files"].values())
        print(f"fetched {len(result.entries)} asset(s), {n_files} file(s), {size / 1e9:.2f} GB into {cache}")
        print(f"lock: {lock_path}")
    for asset, err in result.failed:
        print(f"pmcflow fetch-models: {asset.label} ({asset.role}): {err}", file=sys.stderr)
    return 1 if result.failed else 0


def _cli_check(
    config: Mapping[str, Any], cache: Path, lock_path: Path, command: str, *, as_json: bool
) -> int:
    """``--check``: print the verification (text or JSON); 1 when an asset has a problem."""
    rows = check(config, cache, lock_path)
    bad = [r for r in rows if r["problems"]]
    if as_json:
        out = {
            "ok": not bad,
            "cache": str(cache),
            "lock": str(lock_path),
            "command": command,
            "assets": [{k: v for k, v in r.items() if k != "asset"} for r in rows],
        }
        print(json.dumps(out, indent=2, sort_keys=True))
    elif not bad:
        n_files = sum(r["files"] for r in rows)
        print(f"ok: {len(rows)} asset(s), {n_files} file(s) verified in {cache} against {lock_path}")
    for r in bad:
        for problem in r["problems"]:
            print(
                f"pmcflow fetch-models: {modelcache.message(r['asset'], problem, command)}", file=sys.stderr
            )
    return 1 if bad else 0
