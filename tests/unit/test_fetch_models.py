"""``pmcflow fetch-models`` (pmcflow.models) and the workflow's model-cache check (pmcflow.modelcache).

Offline: a loopback server speaks the part of the Hugging Face Hub API that huggingface_hub's
``resolve_revision`` / ``list_repo_tree`` / ``snapshot_download`` / ``hf_hub_download`` use, serving
a tiny BERT saved here with transformers (nothing downloaded). The CLI runs in subprocesses with
``HF_ENDPOINT`` pointing at the server and ``HF_HOME`` in ``tmp_path``: huggingface_hub reads both
(and ``HF_HUB_OFFLINE``) once, at import.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
import yaml
from pmcflow_testing.workflow import copy_workflow, run_env, snakemake

from pmcflow import modelcache, models, runs
from pmcflow.config import load_config

REPO = Path(__file__).resolve().parents[2]
TINY = "pmcflow-test/tiny-bert"
# Files of the served repo that no PyTorch loader reads: fetch must leave them on the server.
DECOYS = {
    "pytorch_model.bin": b"pickled duplicate of model.safetensors" * 8,
    "tf_model.h5": b"tensorflow weights" * 8,
    "onnx/model.onnx": b"onnx export" * 8,
}
LFS_SUFFIXES = (".safetensors", ".bin", ".h5", ".onnx")
PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")
HUB_VARS = (
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_DATASETS_OFFLINE",
    *(
        f"{p}{v}"
        for p in ("", "APPTAINERENV_", "SINGULARITYENV_")
        for v in ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE")
    ),
)


# ----------------------------------------------------------------------------------------------
# A loopback hub
# ----------------------------------------------------------------------------------------------
def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class HubRepo:
    """One model repo at one commit: its files, which of them are in LFS, and bytes to serve
    instead of a file's own (a download corrupted on the way)."""

    files: dict[str, bytes]
    corrupt: dict[str, bytes] = field(default_factory=dict)

    @property
    def commit(self) -> str:
        h = hashlib.sha1()
        for path in sorted(self.files):
            h.update(path.encode() + b"\0" + hashlib.sha256(self.files[path]).digest())
        return h.hexdigest()

    def lfs(self, path: str) -> bool:
        return path.endswith(LFS_SUFFIXES)

    def etag(self, path: str) -> str:
        data = self.files[path]
        return hashlib.sha256(data).hexdigest() if self.lfs(path) else git_blob_id(data)

    def tree_entry(self, path: str) -> dict[str, Any]:
        data = self.files[path]
        entry: dict[str, Any] = {"type": "file", "path": path, "size": len(data), "oid": git_blob_id(data)}
        if self.lfs(path):
            sha = hashlib.sha256(data).hexdigest()
            pointer = (
                f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {len(data)}\n".encode()
            )
            entry.update(
                oid=git_blob_id(pointer), lfs={"oid": sha, "size": len(data), "pointerSize": len(pointer)}
            )
        return entry


class FakeHub:
    """``/api/models/{repo}[/revision/{rev}]``, ``/api/models/{repo}/tree/{rev}`` and
    ``/{repo}/resolve/{rev}/{file}`` (GET and HEAD, with X-Repo-Commit, ETag and Content-Length)."""

    def __init__(self) -> None:
        self.repos: dict[str, HubRepo] = {}
        self.requests: list[tuple[str, str]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeHub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def downloads(self) -> list[str]:
        """Paths of the files served with GET (``<repo>/<file>``)."""
        out = []
        for method, path in self.requests:
            m = re.match(r"^/(?P<repo>[^/]+/[^/]+)/resolve/[^/]+/(?P<file>.+)$", path)
            if method == "GET" and m:
                out.append(f"{m['repo']}/{m['file']}")
        return out

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def _send(self, status: int, body: bytes, headers: dict[str, str], head: bool = False) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _json(self, doc: Any) -> None:
                self._send(200, json.dumps(doc).encode(), {"Content-Type": "application/json"})

            def _error(self, code: str, message: str, head: bool = False) -> None:
                body = json.dumps({"error": message}).encode()
                self._send(404, body, {"Content-Type": "application/json", "X-Error-Code": code}, head)

            def _route(self, head: bool) -> None:
                path = urlsplit(self.path).path
                hub.requests.append(("HEAD" if head else "GET", unquote(path)))
                if re.match(r"^/api/models/[^/]+/[^/]+$", path):  # model info at the default branch
                    path += "/revision/main"
                m = re.match(
                    r"^/api/models/(?P<repo>[^/]+/[^/]+)/(?P<kind>revision|tree)/(?P<rev>[^/]+)(?P<sub>/.*)?$",
                    path,
                )
                r = re.match(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$", path)
                match = m or r
                if match is None:
                    self._error("NotFound", f"no route {path}", head)
                    return
                repo = hub.repos.get(unquote(match["repo"]))
                if repo is None:
                    self._error("RepoNotFound", f"repository {match['repo']} not found", head)
                    return
                if unquote(match["rev"]) not in ("main", repo.commit):
                    self._error("RevisionNotFound", f"revision {match['rev']} not found", head)
                    return
                if m is not None and m["kind"] == "revision":
                    self._json(
                        {
                            "id": unquote(m["repo"]),
                            "sha": repo.commit,
                            "private": False,
                            "siblings": [{"rfilename": p} for p in sorted(repo.files)],
                        }
                    )
                elif m is not None:
                    sub = unquote(m["sub"] or "").strip("/")
                    self._json([repo.tree_entry(p) for p in sorted(repo.files) if p.startswith(sub)])
                else:
                    name = unquote(r["file"])  # type: ignore[index]
                    if name not in repo.files:
                        self._error("EntryNotFound", f"{name} not found", head)
                        return
                    body = repo.corrupt.get(name, repo.files[name])
                    headers = {
                        "Content-Type": "application/octet-stream",
                        "X-Repo-Commit": repo.commit,
                        "ETag": f'"{repo.etag(name)}"',
                        "Accept-Ranges": "bytes",
                    }
                    self._send(200, body, headers, head)

            def do_GET(self) -> None:  # noqa: N802
                self._route(head=False)

            def do_HEAD(self) -> None:  # noqa: N802
                self._route(head=True)

        return Handler


# ----------------------------------------------------------------------------------------------
# Fixtures
# ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """A tiny BERT (config, safetensors weights, tokenizer) saved with transformers, as file bytes."""
    from transformers import BertConfig, BertModel, BertTokenizer

    folder = tmp_path_factory.mktemp("tiny-bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cell", "image", "of", "figure", "##s"]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizer(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    BertModel(config).save_pretrained(folder)
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"} <= set(files)
    files["README.md"] = b"# tiny-bert\n"
    return files


@pytest.fixture
def hub(tiny_bert: dict[str, bytes]) -> Iterator[FakeHub]:
    server = FakeHub()
    server.repos[TINY] = HubRepo(files={**tiny_bert, **DECOYS})
    server.start()
    yield server
    server.stop()


@dataclass
class Setup:
    hub: FakeHub
    home: Path
    config: Path

    @property
    def cache(self) -> Path:
        return self.home / "hub"

    @property
    def lock(self) -> Path:
        return self.cache / modelcache.LOCK_NAME

    @property
    def storage(self) -> Path:
        return modelcache.storage_dir(self.cache, TINY)

    def env(self, *, offline: bool = False) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS + HUB_VARS + ("HF_ENDPOINT",)}
        env.update(
            HF_HOME=str(self.home),
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
            HF_HUB_DISABLE_PROGRESS_BARS="1",
            HF_HUB_DISABLE_TELEMETRY="1",
            PYTHONHASHSEED="0",
        )
        if offline:
            env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        else:
            env["HF_ENDPOINT"] = self.hub.url
        return env

    def cli(self, *args: str, offline: bool = False) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "pmcflow.cli", "fetch-models", "--config", str(self.config), *args]
        return subprocess.run(
            cmd, cwd=REPO, env=self.env(offline=offline), capture_output=True, text=True, timeout=300
        )

    def loaded_config(self) -> dict[str, Any]:
        return load_config([self.config])


@pytest.fixture
def setup(hub: FakeHub, tmp_path: Path) -> Setup:
    """A config naming the served repo three ways: the summary LLM (transformers backend) and the
    text tower and tokenizer of a local open_clip config used for training."""
    oc = tmp_path / "openclip-tiny"
    oc.mkdir()
    model_cfg = {
        "embed_dim": 16,
        "vision_cfg": {"image_size": 32, "layers": 1, "width": 16, "patch_size": 16},
        "text_cfg": {
            "hf_model_name": TINY,
            "hf_tokenizer_name": TINY,
            "hf_proj_type": "linear",
            "context_length": 16,
        },
    }
    (oc / "open_clip_config.json").write_text(json.dumps({"model_cfg": model_cfg}), encoding="utf-8")
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "enrich": {"summary": {"backend": "transformers", "model": TINY}},
                "train": {"run": "tiny", "model": f"local-dir:{oc}"},
            }
        ),
        encoding="utf-8",
    )
    return Setup(hub=hub, home=tmp_path / "hf", config=config)


@pytest.fixture
def fetched(setup: Setup) -> Setup:
    proc = setup.cli("--json")
    assert proc.returncode == 0, proc.stderr
    return setup


ROLES = {
    "enrich.summary.model",
    "train.model:text_cfg.hf_model_name",
    "train.model:text_cfg.hf_tokenizer_name",
}


# ----------------------------------------------------------------------------------------------
# Fetch and lock
# ----------------------------------------------------------------------------------------------
def test_fetch_writes_the_files_into_the_cache_and_a_lock_with_commit_and_checksums(setup: Setup) -> None:
    proc = setup.cli("--json")
    assert proc.returncode == 0, proc.stderr
    repo = setup.hub.repos[TINY]
    out = json.loads(proc.stdout)
    assert out["lock"] == str(setup.lock) and out["failed"] == []

    # the cache layout the loaders read: refs/main -> the commit, the files under snapshots/<commit>
    assert (setup.storage / "refs" / "main").read_text().strip() == repo.commit
    snapshot = setup.storage / "snapshots" / repo.commit
    wanted = {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"}
    assert all((snapshot / name).read_bytes() == repo.files[name] for name in wanted)
    # files no PyTorch loader reads stay on the server
    for decoy in DECOYS:
        assert not (snapshot / decoy).exists()
        assert f"{TINY}/{decoy}" not in setup.hub.downloads()

    lock = json.loads(setup.lock.read_text())
    assert lock["format"] == modelcache.LOCK_FORMAT
    entries = {e["role"]: e for e in lock["assets"]}
    assert set(entries) == ROLES
    for entry in entries.values():
        assert (entry["repo_id"], entry["repo_type"], entry["revision"], entry["commit"]) == (
            TINY,
            "model",
            None,
            repo.commit,
        )
        for name, meta in entry["files"].items():
            assert meta == {
                "sha256": hashlib.sha256(repo.files[name]).hexdigest(),
                "size": len(repo.files[name]),
            }
    # the model: weights, config, tokenizer, README; the tokenizer: its files and config.json
    assert set(entries["enrich.summary.model"]["files"]) == set(repo.files) - set(DECOYS)
    assert set(entries["train.model:text_cfg.hf_tokenizer_name"]["files"]) == {
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.txt",
    } & set(repo.files)


def test_fetched_models_load_offline_and_check_passes(fetched: Setup) -> None:
    assert fetched.cli("--check").returncode == 0
    proc = fetched.cli("--check", "--json", offline=True)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] and {a["role"] for a in report["assets"]} == ROLES
    # what transformers reads offline is exactly what was fetched
    code = (
        "from transformers import AutoConfig, AutoModel, AutoTokenizer\n"
        f"AutoConfig.from_pretrained({TINY!r}); AutoTokenizer.from_pretrained({TINY!r})\n"
        f"m = AutoModel.from_pretrained({TINY!r}); print(m.config.hidden_size)\n"
    )
    load = subprocess.run(
        [sys.executable, "-c", code],
        env=fetched.env(offline=True),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert load.returncode == 0 and load.stdout.split()[-1] == "16", load.stderr[-2000:]
    # and the workflow's stdlib check finds nothing missing
    assert modelcache.missing(fetched.loaded_config(), fetched.cache, config_files=[fetched.config]) == []


def _snapshot_file(s: Setup, name: str) -> Path:
    return s.storage / "snapshots" / s.hub.repos[TINY].commit / name


def test_check_fails_naming_the_asset_when_a_file_is_deleted(fetched: Setup) -> None:
    _snapshot_file(fetched, "model.safetensors").unlink()
    proc = fetched.cli("--check", offline=True)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    # the two assets holding the weights, not the tokenizer
    assert len(lines) == 2
    for line in lines:
        assert TINY in line and "model.safetensors" in line and "missing" in line
        assert f"pmcflow fetch-models --config {fetched.config}" in line
    assert any("(enrich.summary.model)" in line for line in lines)
    assert any("(train.model:text_cfg.hf_model_name)" in line for line in lines)
    # the workflow's check sees it too, with the command
    msgs = modelcache.missing(fetched.loaded_config(), fetched.cache, config_files=[fetched.config])
    assert len(msgs) == 2 and all(
        "model.safetensors" in m and "pmcflow fetch-models --config" in m for m in msgs
    )


def test_check_fails_when_a_file_is_altered_and_fetch_repairs_it(fetched: Setup) -> None:
    blob = _snapshot_file(fetched, "vocab.txt").resolve()
    data = blob.read_bytes()
    blob.write_bytes(data.replace(b"cell", b"cald"))  # same size: only the checksum tells
    proc = fetched.cli("--check", offline=True)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert lines and all(TINY in line and "vocab.txt" in line and "sha256" in line for line in lines)
    assert any("(train.model:text_cfg.hf_tokenizer_name)" in line for line in lines)
    # fetching again notices the file is not the hub's, downloads it again, and the check passes
    again = fetched.cli()
    assert again.returncode == 0, again.stderr
    assert "downloading it again" in again.stderr
    assert blob.read_bytes() == data
    assert fetched.cli("--check", offline=True).returncode == 0


def test_a_download_that_differs_from_the_hubs_checksum_is_refused(setup: Setup) -> None:
    repo = setup.hub.repos[TINY]
    weights = repo.files["model.safetensors"]
    repo.corrupt["model.safetensors"] = bytes(reversed(weights))  # same size, other bytes
    proc = setup.cli()
    assert proc.returncode == 1
    assert "model.safetensors" in proc.stderr and "after a fresh download" in proc.stderr
    assert "(enrich.summary.model)" in proc.stderr
    # the lock keeps only what verified: the tokenizer
    lock = json.loads(setup.lock.read_text())
    assert [e["role"] for e in lock["assets"]] == ["train.model:text_cfg.hf_tokenizer_name"]
    check = setup.cli("--check", offline=True)
    assert check.returncode == 1 and "(enrich.summary.model): not in the lock file" in check.stderr


def test_fetch_refuses_to_run_offline_and_reports_unknown_repos(setup: Setup) -> None:
    offline = setup.cli(offline=True)
    assert offline.returncode == 1 and "offline mode is on" in offline.stderr
    setup.hub.repos.clear()
    proc = setup.cli()
    assert proc.returncode == 1
    assert proc.stderr.count(f"pmcflow fetch-models: {TINY}") == 3 and "RepositoryNotFound" in proc.stderr


def test_lock_keeps_the_entries_of_another_config(fetched: Setup, tmp_path: Path) -> None:
    other = tmp_path / "other.yaml"
    other.write_text(
        yaml.safe_dump({"enrich": {"subcaption": {"backend": "vllm", "model": TINY}}}), encoding="utf-8"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pmcflow.cli", "fetch-models", "--config", str(other)],
        cwd=REPO,
        env=fetched.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    roles = {e["role"] for e in json.loads(fetched.lock.read_text())["assets"]}
    assert roles == ROLES | {"enrich.subcaption.model"}
    assert fetched.cli("--check", offline=True).returncode == 0


# ----------------------------------------------------------------------------------------------
# What the configurations name
# ----------------------------------------------------------------------------------------------
def test_production_config_names_the_qwen_models_and_the_pubmedbert_tower() -> None:
    config = load_config([REPO / "config" / "config.yaml"])
    found = {a.role: a for a in models.assets(config)}
    assert found["enrich.subcaption.model"].repo_id == "Qwen/Qwen2.5-VL-32B-Instruct"
    assert found["enrich.summary.model"].repo_id == "Qwen/Qwen2.5-14B-Instruct"
    assert found["enrich.subcaption.model"].files == found["enrich.summary.model"].files == "transformers"
    pubmedbert = "microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract-fulltext"
    text = found["train.preset:text_cfg.hf_model_name"]
    assert (text.repo_id, text.files) == (pubmedbert, "transformers")
    assert found["train.preset:text_cfg.hf_tokenizer_name"].repo_id == pubmedbert
    # the image tower's ImageNet weights, which only timm maps to a repo
    image = found["train.preset:vision_cfg.timm_model_name"]
    assert image.repo_id == "timm/vit_base_patch16_224.augreg2_in21k_ft_in1k" and image.files.startswith(
        "weights:"
    )
    assert (
        image.origin
        == "train.preset:vision_cfg.timm_model_name=timm:vit_base_patch16_224.augreg2_in21k_ft_in1k"
    )
    assert all(not a.pending for a in found.values())
    # the detector is fine-tuned from the COCO DAB-DETR, as seed 000
    detector = found["detector.params.transformers.init"]
    assert (detector.repo_id, detector.files) == ("IDEA-Research/dab-detr-resnet-50-dc5", "transformers")


def test_detector_init_names_one_file_for_ultralytics_and_nothing_when_not_training() -> None:
    base = load_config([REPO / "config" / "demo.yaml"])
    yolo = {"backend": "ultralytics", "train": True}
    yolo["params"] = {
        "ultralytics": {"init": "Ultralytics/YOLOv8", "init_file": "yolov8s.pt", "init_revision": "v1"}
    }
    config = {**base, "detector": {**base["detector"], **yolo}}
    (asset,) = modelcache.requested(config)
    assert (asset.role, asset.repo_id, asset.files, asset.revision) == (
        "detector.params.ultralytics.init",
        "Ultralytics/YOLOv8",
        "file:yolov8s.pt",
        "v1",
    )
    assert modelcache.requested({**config, "detector": {**config["detector"], "train": False}}) == []
    local = {"ultralytics": {"init": str(REPO / "README.md")}}  # a local path names no hub asset
    assert modelcache.requested({**config, "detector": {**config["detector"], "params": local}}) == []


def test_demo_config_names_no_hub_asset(tmp_path: Path) -> None:
    config = load_config([REPO / "config" / "demo.yaml"])
    assert modelcache.requested(config) == []
    assert models.assets(config) == []
    assert modelcache.missing(config, tmp_path / "empty-cache") == []


def test_baselines_and_llm_backends_name_what_their_loaders_read(tmp_path: Path) -> None:
    overrides = {
        "enrich": {
            "subcaption": {"backend": "rules", "model": "Qwen/Qwen2.5-VL-32B-Instruct"},  # no LLM: no asset
            "summary": {
                "backend": "transformers",
                "model": "org/llm-GGUF",
                "gguf_file": "q4.gguf",
                "revision": "v1",
            },
        },
        "evaluate": {
            "baselines": {
                "biomedclip": {"model": "hf-hub:microsoft/BiomedCLIP-PubMedBERT_256-vit_base_patch16_224"},
                "clip-openai": {"model": "ViT-B-16", "pretrained": "openai"},
                "shipped": {"model": "vitb16-pubmedbert"},
                "untrained": {"model": "tiny-vit-bpe", "pretrained": None},
            }
        },
        "train": {"model": "tiny-vit-minilm"},  # pkg: towers: shipped in a wheel, not the hub
    }
    config = load_config([], overrides)
    found = {a.role: a for a in models.assets(config)}
    # a GGUF file alone, and no revision (transformers passes none with gguf_file)
    assert (found["enrich.summary.model"].files, found["enrich.summary.model"].revision) == (
        "gguf:q4.gguf",
        None,
    )
    assert "enrich.subcaption.model" not in found
    assert found["evaluate.baselines.biomedclip.model"].files == "open_clip"
    tag = found["evaluate.baselines.clip-openai.pretrained"]
    assert (tag.repo_id, tag.files) == (
        "timm/vit_base_patch16_clip_224.openai",
        "weights:open_clip_pytorch_model.bin",
    )
    # evaluation never loads the timm ImageNet weights (pretrained_image is off); the text tower's are read
    assert found["evaluate.baselines.shipped.model:text_cfg.hf_model_name"].files == "transformers"
    assert "evaluate.baselines.shipped.model:vision_cfg.timm_model_name" not in found
    assert not any(r.startswith(("train.", "evaluate.baselines.untrained")) for r in found)

    # once BiomedCLIP's open_clip_config.json is in the cache, its text tower config and tokenizer follow
    cache = tmp_path / "hub"
    repo = "microsoft/BiomedCLIP-PubMedBERT_256-vit_base_patch16_224"
    commit = "a" * 40
    folder = modelcache.storage_dir(cache, repo)
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)
    (folder / "snapshots" / commit).mkdir(parents=True)
    tower = {
        "hf_model_name": "microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract",
        "hf_tokenizer_name": "x/tok",
    }
    (folder / "snapshots" / commit / "open_clip_config.json").write_text(
        json.dumps(
            {"model_cfg": {"text_cfg": tower, "vision_cfg": {"timm_model_name": "vit_base_patch16_224"}}}
        )
    )
    found = {a.role: a for a in models.assets(config, cache=cache)}
    text = found["evaluate.baselines.biomedclip.model:text_cfg.hf_model_name"]
    assert (text.repo_id, text.files) == ("microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract", "config")
    assert found["evaluate.baselines.biomedclip.model:text_cfg.hf_tokenizer_name"].repo_id == "x/tok"
    assert "evaluate.baselines.biomedclip.model:vision_cfg.timm_model_name" not in found


def test_the_preset_model_copy_matches_the_trainer() -> None:
    from pmcflow.encoders import train

    assert train.PRESETS is runs.PRESETS or train.PRESETS == runs.PRESETS
    assert modelcache.DEFAULT_TRAIN_MODEL == train.DEFAULTS["model"]


@pytest.mark.parametrize(
    ("rule", "paths", "expected"),
    [
        (
            "transformers",
            [
                "config.json",
                "generation_config.json",
                "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors",
                "model.safetensors.index.json",
                "pytorch_model.bin",
                "tokenizer.json",
                "onnx/model.onnx",
                "flax_model.msgpack",
                "preprocessor_config.json",
            ],
            [
                "config.json",
                "generation_config.json",
                "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors",
                "model.safetensors.index.json",
                "preprocessor_config.json",
                "tokenizer.json",
            ],
        ),
        (
            "transformers",
            ["config.json", "pytorch_model.bin", "vocab.txt", "tf_model.h5"],
            ["config.json", "pytorch_model.bin", "vocab.txt"],
        ),
        (
            "weights:pytorch_model.bin",
            ["config.json", "model.safetensors", "pytorch_model.bin"],
            ["model.safetensors"],
        ),
        (
            "weights:open_clip_pytorch_model.bin",
            ["open_clip_pytorch_model.bin"],
            ["open_clip_pytorch_model.bin"],
        ),
        (
            "open_clip",
            [
                "open_clip_config.json",
                "open_clip_pytorch_model.bin",
                "open_clip_model.safetensors",
                "README.md",
            ],
            ["open_clip_config.json", "open_clip_model.safetensors"],
        ),
        (
            "tokenizer",
            ["config.json", "vocab.txt", "model.safetensors", "sub/vocab.txt"],
            ["config.json", "vocab.txt"],
        ),
        ("gguf:q4.gguf", ["q4.gguf", "q8.gguf"], ["q4.gguf"]),
        ("file:yolov8s.pth", ["yolov8s.pth", "yolov8s.safetensors"], ["yolov8s.pth"]),
    ],
)
def test_select_files(rule: str, paths: list[str], expected: list[str]) -> None:
    assert models.select_files(rule, paths) == expected


@pytest.mark.parametrize(
    ("rule", "paths"),
    [
        ("transformers", ["model.safetensors"]),
        ("open_clip", ["open_clip_config.json"]),
        ("gguf:q4.gguf", ["q8.gguf"]),
        ("file:best.pt", ["last.pt"]),
    ],
)
def test_select_files_refuses_a_repo_without_what_the_loader_reads(rule: str, paths: list[str]) -> None:
    with pytest.raises(models.ModelsError):
        models.select_files(rule, paths)


# ----------------------------------------------------------------------------------------------
# The workflow's check
# ----------------------------------------------------------------------------------------------
def _stdlib_missing(config: dict[str, Any], cache: Path, config_files: list[str]) -> list[str]:
    """``missing`` as rules/common.smk runs it: the module loaded by file path, by a Python with no
    site-packages (-S), so it must need the standard library only."""
    code = (
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('_pmcflow_modelcache', {str(REPO / 'src/pmcflow/modelcache.py')!r})\n"
        "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        "args = json.load(sys.stdin)\n"
        "print(json.dumps(mod.missing(args['config'], args['cache'], config_files=args['files'])))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-S", "-c", code],
        input=json.dumps({"config": config, "cache": str(cache), "files": config_files}),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_stdlib_check_names_each_missing_asset_its_key_and_the_command(tmp_path: Path) -> None:
    config = load_config([REPO / "config" / "config.yaml"])
    cache = tmp_path / "empty-cache"
    msgs = _stdlib_missing(config, cache, ["config/config.yaml"])
    command = f"pmcflow fetch-models --config config/config.yaml --cache {cache}"
    expected = [
        ("Qwen/Qwen2.5-VL-32B-Instruct", "enrich.subcaption.model"),
        ("Qwen/Qwen2.5-14B-Instruct", "enrich.summary.model"),
        (
            "microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract-fulltext",
            "train.preset:text_cfg.hf_model_name",
        ),
        (
            "microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract-fulltext",
            "train.preset:text_cfg.hf_tokenizer_name",
        ),
        ("timm:vit_base_patch16_224.augreg2_in21k_ft_in1k", "train.preset:vision_cfg.timm_model_name"),
        ("IDEA-Research/dab-detr-resnet-50-dc5", "detector.params.transformers.init"),
    ]
    assert len(msgs) == len(expected)
    for msg, (name, role) in zip(msgs, expected, strict=True):
        assert msg.startswith(f"{name} ({role}): ") and msg.endswith(command)


def test_stdlib_check_reads_the_lock_for_what_only_a_library_resolves(fetched: Setup, tmp_path: Path) -> None:
    config = fetched.loaded_config()
    assert _stdlib_missing(config, fetched.cache, [str(fetched.config)]) == []
    # a timm image tower in the same config: pending until the lock records what it resolved to
    oc = Path(config["train"]["model"].removeprefix("local-dir:")) / "open_clip_config.json"
    cfg = json.loads(oc.read_text())
    cfg["model_cfg"]["vision_cfg"] = {"timm_model_name": "tiny_vit_x", "timm_model_pretrained": True}
    oc.write_text(json.dumps(cfg))
    msgs = _stdlib_missing(config, fetched.cache, [str(fetched.config)])
    assert len(msgs) == 1 and msgs[0].startswith(
        "timm:tiny_vit_x (train.model:vision_cfg.timm_model_name): not fetched"
    )
    lock = json.loads(fetched.lock.read_text())
    lock["resolved"]["train.model:vision_cfg.timm_model_name=timm:tiny_vit_x"] = []  # timm had no hub weights
    fetched.lock.write_text(json.dumps(lock))
    assert _stdlib_missing(config, fetched.cache, [str(fetched.config)]) == []


def test_check_enabled_by_containers_or_the_environment() -> None:
    assert modelcache.check_enabled(["apptainer"], environ={})
    assert not modelcache.check_enabled(["conda"], environ={"HF_HUB_OFFLINE": "1"})
    assert modelcache.check_enabled([], environ={"PMCFLOW_CHECK_MODELS": "1"})
    assert not modelcache.check_enabled(["apptainer"], environ={"PMCFLOW_CHECK_MODELS": "0"})


def test_hub_cache_dir_follows_huggingface_hub_and_apptainer() -> None:
    assert modelcache.hub_cache_dir({"HF_HOME": "/x/hf"}) == Path("/x/hf/hub")
    assert modelcache.hub_cache_dir({"HF_HOME": "/x/hf", "HF_HUB_CACHE": "/y"}) == Path("/y")
    assert modelcache.hub_cache_dir({"XDG_CACHE_HOME": "/c"}) == Path("/c/huggingface/hub")
    assert modelcache.hub_cache_dir({}) == Path.home() / ".cache" / "huggingface" / "hub"
    # what Apptainer hands to the jobs' containers wins: the jobs read that cache
    assert modelcache.hub_cache_dir({"HF_HUB_CACHE": "/y", "APPTAINERENV_HF_HOME": "/shared/hf"}) == Path(
        "/shared/hf/hub"
    )


def test_workflow_fails_early_offline_without_the_models(tmp_path: Path) -> None:
    work = copy_workflow(REPO, tmp_path / "wf")
    env = {k: v for k, v in run_env(work).items() if k not in HUB_VARS}
    env.update(PMCFLOW_CHECK_MODELS="1", HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "empty-hf"))
    prod = snakemake(work, ["-n", "--cores", "1", "--configfile", "config/config.yaml"], env=env, timeout=300)
    assert prod.returncode != 0
    err = prod.stdout + prod.stderr
    assert "hub models missing from the local cache" in err
    assert "Qwen/Qwen2.5-VL-32B-Instruct (enrich.subcaption.model)" in err
    assert "pmcflow fetch-models --config config/config.yaml --cache" in err
    demo = snakemake(work, ["-n", "--cores", "1", "--configfile", "config/demo.yaml"], env=env, timeout=300)
    assert demo.returncode == 0, demo.stderr[-3000:]


def test_zero_shot_filter_model_is_listed_only_for_the_openclip_backend() -> None:
    hub = "hf-hub:microsoft/BiomedCLIP-PubMedBERT_256-vit_base_patch16_224"
    zero_shot = {"filter": {"modality": {"backend": "openclip", "openclip": {"model": hub}}}}
    found = {a.role: a for a in models.assets(load_config([], zero_shot))}
    asset = found["filter.modality.openclip.model"]
    assert (asset.repo_id, asset.files) == ("microsoft/BiomedCLIP-PubMedBERT_256-vit_base_patch16_224", "open_clip")
    # the default backend (a local timm checkpoint), a disabled filter and a shipped config name no hub asset
    for overrides in (
        {"filter": {"modality": {"openclip": {"model": hub}}}},
        {"filter": {"modality": {"enabled": False, "backend": "openclip", "openclip": {"model": hub}}}},
        {"filter": {"modality": {"backend": "openclip", "openclip": {"model": "tiny-vit-bpe"}}}},
    ):
        roles = {a.role for a in models.assets(load_config([], overrides))}
        assert not any(r.startswith("filter.") for r in roles), overrides
    # a built-in open_clip name with a pretrained tag: the tag's weights, resolved like a baseline's
    tagged = {"filter": {"modality": {"backend": "openclip", "openclip": {"model": "ViT-B-16", "pretrained": "openai"}}}}
    found = {a.role: a for a in models.assets(load_config([], tagged))}
    assert found["filter.modality.openclip.pretrained"].repo_id == "timm/vit_base_patch16_clip_224.openai"
