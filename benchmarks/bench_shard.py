"""Benchmark sharding against a plain copy of the same bytes and against webdataset's own tar writer.

A pool of distinct, realistic subfigure crops is built once and deterministically from images that
are available offline (scikit-image's photographs, micrographs, fundus and textures, and seeded
matplotlib charts), each a random crop, resized to 300-900 px wide and written as PNG (lossless, as
decompose writes by default) or baseline JPEG (``decompose.crop_format: source``), rescaled until its
file is 20-300 KB: the size range of real PMC subfigure crops.  Its DATASET table carries the
columns and text lengths decompose / enrich / filter write, ``crop_sha256`` included.  Then, in the
same process and the same run (``os.sync()`` before each step, the order rotated between repeats,
the best of the repeats by CPU time kept per step):

* ``copy``              every crop file read and appended to one output file, fsynced: the I/O floor;
* ``copy + 2 x sha256`` the same plus the two sha256 passes the stage must make (each crop against
                        the hash decompose recorded; the output, as the manifest's tar hash);
* ``shard[header]``     :func:`pmcflow.shard.shard_dataset` as configured by default: header
                        identification plus the sha256 decompose recorded (no decoding);
* ``shard[decode]``     the same with ``verify_images: decode`` (every image fully decoded);
* ``shard[wds-writer]`` ``shard[header]`` with the tars written by ``webdataset.TarWriter`` (the peer:
                        same samples, same temporary file + fsync + rename, same sha256 and size
                        accounting) instead of :class:`pmcflow.shard.AtomicTarWriter`;
* ``shard[...] @ REF``  with ``--ref REF``: ``pmcflow.shard`` as it was at git REF (``git show``);
* the fixed cost of a run (0 rows), the per-image cost of each piece (identify, decode, hash, json,
  the tar writer before / now / webdataset's) and a cProfile of shard[header];
* ``loader``            samples/s through ``open_clip_train.data.get_wds_dataset`` (decode + the tiny
                        model's train transform + tokenizer, ``workers=0``) over the train shards.

CPU time (``time.process_time``: all threads of the process) and wall time are both recorded (the
machine is shared); MB are 10^6 bytes of crop files.

    .venv/bin/python benchmarks/bench_shard.py --ref 0b211e5             # as recorded (~4 min)
    .venv/bin/python benchmarks/bench_shard.py --n-images 300 --repeats 1 --no-loader --out /tmp/b
    .venv/bin/python benchmarks/bench_shard.py --pool /tmp/pool   # keep the pool, reuse it next time

Writes ``shard.json`` and ``shard.md`` to ``--out`` (default ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import os
import platform
import pstats
import shutil
import sys
import tempfile
import time
from argparse import Namespace
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from pmcflow import schema as S  # noqa: E402
from pmcflow import shard as SH  # noqa: E402
from pmcflow.tables import temp_sibling, write_table  # noqa: E402

KB = 1000
MIN_BYTES, MAX_BYTES = 20 * KB, 300 * KB


# ----------------------------------------------------------------------------------------------
# The pool: distinct crops of realistic size, and their DATASET rows
# ----------------------------------------------------------------------------------------------
def _sources() -> list[np.ndarray]:
    import skimage.data as d

    rgb = ["astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "retina", "immunohistochemistry"]
    grey = ["camera", "cell", "moon", "coins", "page", "text", "brick", "grass", "gravel", "clock"]
    out = [getattr(d, n)() for n in rgb + grey]
    out.append(np.asarray(Image.fromarray(d.logo()).convert("RGB")))
    return out


def _charts(n: int, seed: int) -> list[np.ndarray]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = []
    for k in range(n):
        rng = np.random.default_rng([seed, 100_000 + k])
        fig, ax = plt.subplots(figsize=(6, 4.5), dpi=100)
        kind = k % 4
        if kind == 0:
            for c in range(3):
                ax.plot(np.arange(24), rng.normal(size=24).cumsum(), marker="o", ms=3, label=f"group {c}")
            ax.legend(fontsize=7)
        elif kind == 1:
            ax.bar(np.arange(8), rng.gamma(2.0, size=8), yerr=rng.uniform(0.1, 0.5, 8), color=f"C{k % 10}")
        elif kind == 2:
            ax.scatter(
                rng.normal(size=300), rng.normal(size=300), s=6, c=rng.uniform(size=300), cmap="viridis"
            )
        else:
            ax.imshow(rng.normal(size=(24, 24)).cumsum(0), cmap="magma")
        ax.set_xlabel("time (h)")
        ax.set_ylabel("signal (a.u.)")
        ax.set_title(f"Condition {k}")
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        plt.close(fig)
        buf.seek(0)
        out.append(np.asarray(Image.open(buf).convert("RGB")))
    return out


def _encode(im: Image.Image, fmt: str, quality: int) -> bytes:
    buf = io.BytesIO()
    if fmt == "png":  # as pmcflow.decompose.stage.encode_crop writes them
        im.save(buf, "PNG", compress_level=6, optimize=False)
    else:
        im.save(buf, "JPEG", quality=quality, optimize=False, progressive=False, subsampling=0)
    return buf.getvalue()


def _crop_bytes(rng: np.random.Generator, src: np.ndarray) -> tuple[bytes, str, int, int]:
    """One crop of ``src``: random window, 300-900 px wide, PNG or JPEG, rescaled into 20-300 KB."""
    h, w = src.shape[:2]
    fw = rng.uniform(0.3, 1.0)
    cw = max(24, int(w * fw))
    ch = max(24, min(h, int(cw * rng.uniform(0.6, 1.5))))
    y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
    window = Image.fromarray(src[y : y + ch, x : x + cw])
    fmt = "png" if rng.uniform() < 0.55 else "jpg"
    quality = int(rng.integers(85, 96))
    width = float(np.exp(rng.uniform(np.log(300), np.log(900))))
    for _ in range(6):
        size = (max(16, int(width)), max(16, int(width * ch / cw)))
        im = window.resize(size, Image.Resampling.BILINEAR)
        data = _encode(im, fmt, quality)
        if len(data) > MAX_BYTES:
            width *= 0.92 * (MAX_BYTES / len(data)) ** 0.5
        elif len(data) < MIN_BYTES:
            width *= 1.08 * (MIN_BYTES / len(data)) ** 0.5
        else:
            break
    return data, fmt, im.width, im.height


_WORDS = (
    "cells tissue section staining expression protein signal control treated mice patients tumour "
    "retina vessel lesion fluorescence micrograph scale bar arrows indicate quantification mean error "
    "bars significant difference group time response dose imaging analysis sample representative "
    "images showing increased decreased levels marker nuclei cytoplasm membrane region area"
).split()


def _sentence(rng: np.random.Generator, n_words: int) -> str:
    words = [_WORDS[int(i)] for i in rng.integers(0, len(_WORDS), n_words)]
    return (" ".join(words)).capitalize() + "."


def build_pool(root: Path, n_images: int, seed: int = 1) -> dict[str, Any]:
    """Write ``root/crops/*`` and ``root/dataset.parquet``; returns the pool's description."""
    (root / "crops").mkdir(parents=True, exist_ok=True)
    sources = _sources() + _charts(48, seed)
    rows: list[dict[str, Any]] = []
    hashes: set[str] = set()
    sizes: list[int] = []
    formats: list[str] = []
    art, fig, sub, n_sub = 0, 0, 0, 0
    for i in range(n_images):
        rng = np.random.default_rng([seed, i])
        data, fmt, width, height = _crop_bytes(rng, sources[i % len(sources)])
        sha = hashlib.sha256(data).hexdigest()
        assert sha not in hashes, f"crop {i} repeats an earlier one"
        hashes.add(sha)
        sizes.append(len(data))
        formats.append(fmt)
        rel = f"crops/{i:05d}.{fmt}"
        (root / rel).write_bytes(data)
        if sub >= n_sub:  # next figure (2-6 panels); an article has 1-3 figures
            fig, sub, n_sub = fig + 1, 0, int(rng.integers(2, 7))
            if fig > int(rng.integers(1, 4)):
                art, fig = art + 1, 1
        pmcid = f"PMC{7000000 + art}"
        article_uid, figure_uid = f"{pmcid}.1", f"{pmcid}.1/F{fig}"
        caption = " ".join(_sentence(rng, int(rng.integers(10, 25))) for _ in range(4))
        rows.append(
            {
                "subfigure_uid": f"{figure_uid}/s{sub}",
                "figure_uid": figure_uid,
                "article_uid": article_uid,
                "pmcid": pmcid,
                "version": 1,
                "chunk": "c0700",
                "graphic_index": 0,
                "subfigure_index": sub,
                "image_path": f"acquire/c0700/{pmcid}/fig{fig}.jpg",
                "image_width": 2 * width,
                "image_height": 2 * height,
                "bbox": [float(width), 0.0, float(width), float(height)],
                "score": 0.93,
                "is_single_panel": False,
                "panel_label": chr(97 + sub),
                "label_source": "detected-label",
                "detector": "yolo:subfigure-yolov8s",
                "detector_checkpoint_sha256": hashlib.sha256(b"checkpoint").hexdigest(),
                "crop_path": rel,
                "crop_format": "png" if fmt == "png" else "jpeg-q95",
                "crop_width": width,
                "crop_height": height,
                "crop_sha256": sha,
                "doi": f"10.1234/journal.{art:07d}",
                "pmid": str(30000000 + art),
                "license_code": "CC BY" if art % 4 else "CC0",
                "is_retracted": False,
                "figure_label": f"Figure {fig}",
                "caption": caption,
                "subcaption": f"({chr(97 + sub)}) {_sentence(rng, int(rng.integers(8, 20)))}",
                "shared_text": _sentence(rng, int(rng.integers(8, 16))),
                "subcaption_source": "rules",
                "subcaption_model": "rules",
                "summary": " ".join(_sentence(rng, int(rng.integers(10, 20))) for _ in range(2)),
                "summary_source": "extractive",
                "mention_uids": [f"{article_uid}/m{k}" for k in range(int(rng.integers(0, 4)))],
                "modality": ("microscopy", "chart", "radiology", "photograph")[i % 4],
                "modality_score": 0.91,
                "phash": f"{int(rng.integers(0, 2**63)):016x}",
            }
        )
        sub += 1
    write_table(rows, S.DATASET, root / "dataset.parquet")
    s = np.array(sizes) / KB
    return {
        "n_images": n_images,
        "image_mb": round(sum(sizes) / 1e6, 3),
        "n_png": formats.count("png"),
        "n_jpg": formats.count("jpg"),
        "kb_mean": round(float(s.mean()), 1),
        "kb_median": round(float(np.median(s)), 1),
        "kb_p5": round(float(np.percentile(s, 5)), 1),
        "kb_p95": round(float(np.percentile(s, 95)), 1),
        "kb_min": round(float(s.min()), 1),
        "kb_max": round(float(s.max()), 1),
        "n_articles": art + 1,
    }


# ----------------------------------------------------------------------------------------------
# The peer: webdataset's TarWriter doing the AtomicTarWriter's job
# ----------------------------------------------------------------------------------------------
class _HashingFile:
    """A write-only file that hashes what passes through it (so the peer need not re-read its tar)."""

    def __init__(self, fh: Any) -> None:
        self.fh, self.sha, self.size = fh, hashlib.sha256(), 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.fh.write(data)

    def flush(self) -> None:
        self.fh.flush()


class WdsTarWriter:
    """:class:`pmcflow.shard.AtomicTarWriter`'s interface on ``webdataset.TarWriter``.

    Fixed mtime, uname/gname "", mode 0644 and GNU format for determinism; a hidden temporary file
    fsynced and renamed for atomicity; sha256 and size of the bytes written.  webdataset orders a
    sample's members by extension (``json`` before ``png``), which is as deterministic.
    """

    def __init__(self, path: Path, mtime: int = 0) -> None:
        import webdataset as wds

        self.path = path
        self.tmp = temp_sibling(path)
        self._fh = open(self.tmp, "wb")  # noqa: SIM115 - closed in commit/abort
        self._out = _HashingFile(self._fh)
        self._tw = wds.TarWriter(
            self._out, user="", group="", mode=0o644, mtime=mtime, encoder=False, format="GNU_FORMAT"
        )
        self.count = 0
        self.members_bytes = 0

    def add_sample(self, key: str, members: Sequence[tuple[str, bytes]]) -> None:
        self._tw.write({"__key__": key, **dict(members)})
        self.members_bytes += sum(SH.tar_member_size(len(data)) for _, data in members)
        self.count += 1

    def commit(self) -> tuple[str, int]:
        self._tw.close()
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        os.replace(self.tmp, self.path)
        return self._out.sha.hexdigest(), self._out.size

    def abort(self) -> None:
        self._fh.close()
        self.tmp.unlink(missing_ok=True)


# ----------------------------------------------------------------------------------------------
# Runs
# ----------------------------------------------------------------------------------------------
def _clock() -> tuple[float, float]:
    return time.process_time(), time.perf_counter()


def _since(t: tuple[float, float]) -> tuple[float, float]:
    return time.process_time() - t[0], time.perf_counter() - t[1]


CFG = {"splits": {"train": 0.9, "val": 0.05, "test": 0.05}, "max_samples_per_shard": 500}


def run_copy(crops: Sequence[Path], dst_path: Path) -> dict[str, Any]:
    with open(dst_path, "wb") as dst:
        for p in crops:
            with open(p, "rb") as src:
                shutil.copyfileobj(src, dst)
        dst.flush()
        os.fsync(dst.fileno())
    return {}


def run_copy_hashed(crops: Sequence[Path], dst_path: Path) -> dict[str, Any]:
    """The copy plus the two sha256 passes the stage cannot avoid: each crop against the hash
    decompose recorded, and the tar for the manifest (hashed as it is written)."""
    out_sha = hashlib.sha256()
    with open(dst_path, "wb") as dst:
        for p in crops:
            with open(p, "rb", buffering=0) as src:
                data = src.read()
            hashlib.sha256(data).hexdigest()
            out_sha.update(data)
            dst.write(data)
        dst.flush()
        os.fsync(dst.fileno())
    out_sha.hexdigest()
    return {}


def load_ref(ref: str, work: Path) -> Any:
    """``pmcflow.shard`` as it was at git ``ref`` (read with ``git show``), as a separate module."""
    import importlib.util
    import subprocess

    code = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{ref}:src/pmcflow/shard.py"], check=True, capture_output=True
    ).stdout
    path = work / "shard_at_ref.py"
    path.write_bytes(code)
    spec = importlib.util.spec_from_file_location("shard_at_ref", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["shard_at_ref"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def run_shard(
    pool: Path, out: Path, verify: str, writer: type | None = None, module: Any = SH
) -> dict[str, Any]:
    real = module.AtomicTarWriter
    if writer is not None:
        module.AtomicTarWriter = writer
    try:
        m = module.shard_dataset({**CFG, "verify_images": verify}, 7, [str(pool / "dataset.parquet")], str(out),
                                 base_dir=str(pool))  # fmt: skip
    finally:
        module.AtomicTarWriter = real
    counts = json.loads((out / "counts.json").read_text())
    return {
        "n_samples": m["n_samples"],
        "n_images_decoded": counts["extra"].get("n_images_decoded"),
        "tar_mb": round(sum(s["size"] for sp in m["splits"].values() for s in sp["shards"]) / 1e6, 3),
        "n_shards": sum(sp["n_shards"] for sp in m["splits"].values()),
    }


class TarfileTarWriter:
    """The writer pmcflow.shard used before (reproduced for comparison): ``tarfile`` in GNU format,
    one ``TarInfo`` per member, the sha256 computed by reading the finished file back."""

    def __init__(self, path: Path, mtime: int = 0) -> None:
        import tarfile

        self.path, self.mtime, self.tmp = path, int(mtime), temp_sibling(path)
        self._fh = open(self.tmp, "wb")  # noqa: SIM115 - closed in commit/abort
        self._tar = tarfile.open(fileobj=self._fh, mode="w", format=tarfile.GNU_FORMAT)
        self.count = 0
        self.members_bytes = 0

    def add_sample(self, key: str, members: Sequence[tuple[str, bytes]]) -> None:
        import tarfile

        for ext, data in members:
            info = tarfile.TarInfo(f"{key}.{ext}")
            info.size, info.mtime, info.mode, info.uid, info.gid = len(data), self.mtime, 0o644, 0, 0
            info.uname = info.gname = ""
            self._tar.addfile(info, io.BytesIO(data))
            self.members_bytes += SH.tar_member_size(len(data))
        self.count += 1

    def commit(self) -> tuple[str, int]:
        from pmcflow.tables import file_sha256

        self._tar.close()
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        digest, size = file_sha256(self.tmp), self.tmp.stat().st_size
        os.replace(self.tmp, self.path)
        return digest, size

    def abort(self) -> None:
        self._fh.close()
        self.tmp.unlink(missing_ok=True)


def _best(fn: Callable[[], Any], repeats: int) -> tuple[float, float, Any]:
    best: tuple[float, float, Any] | None = None
    for _ in range(repeats):
        os.sync()
        t = _clock()
        out = fn()
        cpu, wall = _since(t)
        if best is None or cpu < best[0]:
            best = (cpu, wall, out)
    assert best is not None
    return best


def components(pool: Path, work: Path, repeats: int) -> dict[str, Any]:
    """Per-image CPU cost of the pieces the stage was made of and is made of now, on the same pool."""
    import pyarrow.parquet as pq

    rows = pq.read_table(pool / "dataset.parquet").to_pylist()
    datas = [(pool / r["crop_path"]).read_bytes() for r in rows]
    n = len(datas)
    metas, meta_dicts = [], []
    for r, data in zip(rows, datas, strict=True):
        key = SH.sample_key(r["subfigure_uid"])
        payload = SH.prepare_image(data, verify="header")
        meta = {**r, "key": key, "split": "train", "text": r["subcaption"], "image_ext": payload.ext,
                "image_sha256": r["crop_sha256"], "shard": "train-000000.tar"}  # fmt: skip
        meta_dicts.append(meta)
        metas.append((key, payload.ext, data, SH._dump_meta(meta), r["subcaption"].encode()))

    def per_image(fn: Callable[[], Any]) -> dict[str, Any]:
        cpu, _wall, _ = _best(fn, repeats)
        return {"cpu_s": round(cpu, 4), "us_per_image": round(1e6 * cpu / n, 1)}

    def pillow_open() -> None:
        for d in datas:
            with Image.open(io.BytesIO(d)) as img:
                _ = img.format, img.size

    def pillow_decode() -> None:
        for d in datas:
            with Image.open(io.BytesIO(d)) as img:
                img.load()

    def writer(cls: type, name: str) -> Callable[[], str]:
        def run() -> str:
            w = cls(work / name)
            for key, ext, data, meta, text in metas:
                w.add_sample(key, ((ext, data), ("json", meta), ("txt", text)))
            return w.commit()

        return run

    out: dict[str, Any] = {
        "identify: PIL.Image.open (header only)": per_image(pillow_open),
        "identify: pmcflow.shard.sniff_image": per_image(lambda: [SH.sniff_image(d) for d in datas]),
        "decode: PIL.Image.open + load": per_image(pillow_decode),
        "sha256 of the crop (one pass)": per_image(lambda: [hashlib.sha256(d).hexdigest() for d in datas]),
        "sample json (json.dumps, sorted keys)": per_image(lambda: [SH._dump_meta(m) for m in meta_dicts]),
    }
    shas = {}
    for label, cls in (
        ("tar writer: tarfile + re-read sha256 (before)", TarfileTarWriter),
        ("tar writer: pmcflow.shard.AtomicTarWriter (now)", SH.AtomicTarWriter),
        ("tar writer: webdataset.TarWriter (peer)", WdsTarWriter),
    ):
        cpu, wall, sha = _best(writer(cls, "w.tar"), repeats)
        shas[label] = sha
        out[label] = {
            "cpu_s": round(cpu, 4),
            "wall_s": round(wall, 4),
            "us_per_image": round(1e6 * cpu / n, 1),
        }
    labels = list(shas)
    out["tar bytes: before == now"] = shas[labels[0]] == shas[labels[1]]
    out["tar bytes: webdataset == now"] = shas[labels[2]] == shas[labels[1]]
    out["tar size: webdataset == now (the same size accounting holds)"] = (
        shas[labels[2]][1] == shas[labels[1]][1]
    )
    return out


def bench(
    n_images: int, repeats: int, loader: bool, profile_top: int, ref: str | None, pool_dir: Path | None = None
) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-shard-"))
    try:
        if pool_dir is not None and (pool_dir / "pool.json").exists():  # a pool built earlier
            pool = json.loads((pool_dir / "pool.json").read_text())
            assert pool["n_images"] == n_images, f"{pool_dir} holds {pool['n_images']} images"
            shutil.copytree(pool_dir, work / "pool")
        else:
            t = time.perf_counter()
            pool = build_pool(work / "pool", n_images)
            pool["build_s"] = round(time.perf_counter() - t, 1)
            if pool_dir is not None:
                shutil.copytree(work / "pool", pool_dir, dirs_exist_ok=True)
                (pool_dir / "pool.json").write_text(json.dumps(pool))
        crops = sorted((work / "pool" / "crops").iterdir())
        mb, n = pool["image_mb"], pool["n_images"]
        steps: dict[str, Callable[[int], dict[str, Any]]] = {
            "copy": lambda r: run_copy(crops, work / f"copy-{r}.bin"),
            "copy + 2 x sha256": lambda r: run_copy_hashed(crops, work / f"copyh-{r}.bin"),
            "shard[header]": lambda r: run_shard(work / "pool", work / f"s-header-{r}", "header"),
            "shard[decode]": lambda r: run_shard(work / "pool", work / f"s-decode-{r}", "decode"),
            "shard[wds-writer]": lambda r: run_shard(
                work / "pool", work / f"s-wds-{r}", "header", WdsTarWriter
            ),
        }
        if ref:
            old = load_ref(ref, work)
            steps[f"shard[header] @ {ref}"] = lambda r: run_shard(
                work / "pool", work / f"s-rh-{r}", "header", module=old
            )
            steps[f"shard[decode] @ {ref}"] = lambda r: run_shard(
                work / "pool", work / f"s-rd-{r}", "decode", module=old
            )
        names = list(steps)
        # Untimed warm-up: imports (webdataset pulls in torch), Pillow's plugins, the page cache.
        import webdataset  # noqa: F401

        run_copy(crops, work / "copy-warm.bin")
        run_shard(work / "pool", work / "s-warm", "header")
        shutil.rmtree(work / "s-warm")
        # What a run costs whatever its size: config and schema, Parquet, manifest, card, fsyncs.
        empty = work / "empty"
        empty.mkdir()
        write_table([], S.DATASET, empty / "dataset.parquet")
        cpu, wall, _ = _best(
            lambda: run_shard(empty, work / f"s-empty-{time.perf_counter_ns()}", "header"), repeats
        )
        fixed = {"cpu_s": round(cpu, 4), "wall_s": round(wall, 4)}
        runs: dict[str, dict[str, Any]] = {}
        all_runs: dict[str, list[list[float]]] = {k: [] for k in names}
        for r in range(repeats):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                os.sync()  # no step waits for the previous step's writeback
                t = _clock()
                extra = steps[name](r)
                cpu, wall = _since(t)
                all_runs[name].append([round(cpu, 4), round(wall, 4)])
                if name not in runs or cpu < runs[name]["cpu_s"]:
                    runs[name] = {"cpu_s": round(cpu, 4), "wall_s": round(wall, 4), **extra}
            for p in [*work.glob("s-*"), *work.glob("copy*.bin")]:  # the last repeat's shards stay
                if r < repeats - 1 or p.suffix == ".bin":
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
        copy = runs["copy"]
        for name in names:
            row = runs[name]
            row.update(
                {
                    "mb_per_cpu_s": round(mb / row["cpu_s"], 1),
                    "mb_per_wall_s": round(mb / row["wall_s"], 1),
                    "images_per_cpu_s": round(n / row["cpu_s"], 1),
                    "pct_of_copy_cpu": round(100 * copy["cpu_s"] / row["cpu_s"], 1),
                    "pct_of_copy_wall": round(100 * copy["wall_s"] / row["wall_s"], 1),
                    "all_cpu_wall_s": all_runs[name],
                }
            )
        out: dict[str, Any] = {"pool": pool, "config": CFG, "runs": {k: runs[k] for k in names}}
        out["fixed_cost_header_0_rows"] = fixed
        header = runs["shard[header]"]
        marginal = header["cpu_s"] - fixed["cpu_s"]
        out["header_per_image_cpu_us_without_fixed_cost"] = round(1e6 * marginal / n, 1)
        out["header_pct_of_copy_cpu_without_fixed_cost"] = round(100 * copy["cpu_s"] / marginal, 1)
        a = sorted((work / f"s-header-{repeats - 1}").glob("*/*.tar"))
        b = sorted((work / f"s-decode-{repeats - 1}").glob("*/*.tar"))
        out["header_and_decode_tars_identical"] = [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
        out["components"] = components(work / "pool", work, repeats)
        if profile_top:
            out["profile_header"] = profile(work / "pool", work / "s-profile", profile_top)
        if loader:
            out["loader"] = loader_bench(work / f"s-header-{repeats - 1}", n_epochs=1)
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def profile(pool: Path, out: Path, top: int) -> list[dict[str, Any]]:
    """cProfile (CPU time) of one shard[header] run, config resolution left out (its pure-Python YAML
    parsing, which the profiler slows most, would crowd the table): the functions with most own time."""
    os.sync()
    prof = cProfile.Profile(time.process_time)
    # What shard_dataset does after ShardSettings.from_section: read the table, write the samples, finish.
    names = ("read_dataset", "_write_samples", "_finish")
    real = {name: getattr(SH, name) for name in names}

    def profiled(fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kw: Any) -> Any:
            prof.enable()
            try:
                return fn(*args, **kw)
            finally:
                prof.disable()

        return run

    for name in names:
        setattr(SH, name, profiled(real[name]))
    try:
        run_shard(pool, out, "header")
    finally:
        for name in names:
            setattr(SH, name, real[name])
    stats = pstats.Stats(prof)
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = []
    for (file, line, func), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{Path(file).name}:{line}" if line else file
        rows.append({"function": f"{func} ({where})", "calls": ncalls, "own_s": tottime, "cum_s": cumtime})
    rows.sort(key=lambda r: -r["own_s"])
    return [
        {
            **r,
            "own_s": round(r["own_s"], 4),
            "cum_s": round(r["cum_s"], 4),
            "own_pct": round(100 * r["own_s"] / total, 1),
        }
        for r in rows[:top]
    ]


def loader_bench(shards: Path, n_epochs: int) -> dict[str, Any]:
    import open_clip
    from open_clip_train.data import get_wds_dataset

    from pmcflow.encoders.train import prepare_model_dir

    manifest = json.loads((shards / "manifest.json").read_text())
    model_id = prepare_model_dir("tiny-vit-bpe", shards.parent / "model")
    _, preprocess_train, _ = open_clip.create_model_and_transforms(model_id, pretrained=None)
    tokenizer = open_clip.get_tokenizer(model_id)
    args = Namespace(
        train_data=manifest["splits"]["train"]["urls"],
        train_num_samples=None,
        dataset_resampled=False,
        train_data_upsampling_factors=None,
        seed=0,
        batch_size=32,
        workers=0,
        world_size=1,
    )
    out: dict[str, Any] = {"batch_size": 32, "workers": 0, "transform": "tiny-vit-bpe train (64 px)"}
    best: tuple[float, float, int] | None = None
    for epoch in range(n_epochs):
        data = get_wds_dataset(args, preprocess_train, is_train=True, epoch=epoch, tokenizer=tokenizer)
        t = _clock()
        seen = sum(images.shape[0] for images, _ in data.dataloader)
        cpu, wall = _since(t)
        if best is None or cpu < best[0]:
            best = (cpu, wall, seen)
    assert best is not None
    out.update(
        {
            "samples": best[2],
            "cpu_s": round(best[0], 4),
            "wall_s": round(best[1], 4),
            "samples_per_cpu_s": round(best[2] / best[0], 1),
            "samples_per_wall_s": round(best[2] / best[1], 1),
        }
    )
    return out


def summary(res: dict[str, Any]) -> list[str]:
    """What the numbers say, computed from them (so it cannot go stale)."""
    runs, comp = res["runs"], res.get("components") or {}
    h, floor, wds = runs["shard[header]"], runs["copy + 2 x sha256"], runs["shard[wds-writer]"]
    lines = [
        f"* Target shard[header] >= 50 % of copy: reached {h['pct_of_copy_cpu']} % (CPU), "
        f"{h['pct_of_copy_wall']} % (wall). Not met. The two sha256 passes the stage must make (each crop "
        "against the `crop_sha256` decompose recorded; the tar, for the manifest) bring a plain copy down to "
        f"{floor['pct_of_copy_cpu']} % on their own (`copy + 2 x sha256`), so 50 % of a plain copy is out of "
        f"reach on CPU time on this machine; shard[header] runs at {round(100 * floor['cpu_s'] / h['cpu_s'], 1)} % "
        "of that floor.",
        f"* `verify_images: decode` (the default before) -> `header` (the default now): "
        f"{runs['shard[decode]']['cpu_s']} -> {h['cpu_s']} CPU s "
        f"({round(runs['shard[decode]']['cpu_s'] / h['cpu_s'], 1)}x less), byte-identical tars.",
    ]
    for mode in ("decode", "header"):
        refs = [k for k in runs if k.startswith(f"shard[{mode}] @")]
        if refs:
            old = runs[refs[0]]
            lines.append(
                f"* shard[{mode}] as it was at {refs[0].split('@ ')[1]}: {old['cpu_s']} CPU s; the default now "
                f"(shard[header]) {h['cpu_s']} ({round(old['cpu_s'] / h['cpu_s'], 1)}x less)."
            )
    lines.append(
        f"* webdataset.TarWriter as the writer (shard[wds-writer]): {wds['cpu_s']} vs {h['cpu_s']} CPU s for the "
        f"stage ({round(100 * (wds['cpu_s'] / h['cpu_s'] - 1))} % more)"
        + (
            ", {} vs {} us per image for the writer alone".format(
                comp["tar writer: webdataset.TarWriter (peer)"]["us_per_image"],
                comp["tar writer: pmcflow.shard.AtomicTarWriter (now)"]["us_per_image"],
            )
            if comp
            else ""
        )
        + "; it was not adopted (pmcflow.shard.AtomicTarWriter says why)."
    )
    if comp:
        per = {k: v["us_per_image"] for k, v in comp.items() if isinstance(v, dict)}
        lines.append(
            "* Per image, what each replacement saved: header sniff instead of PIL.Image.open "
            f"{per['identify: PIL.Image.open (header only)'] - per['identify: pmcflow.shard.sniff_image']:.1f} us; "
            f"no decode {per['decode: PIL.Image.open + load']:.0f} us; the crop hashed once instead of twice "
            f"{per['sha256 of the crop (one pass)']} us; the tar writer "
            f"{per['tar writer: tarfile + re-read sha256 (before)'] - per['tar writer: pmcflow.shard.AtomicTarWriter (now)']:.1f} us "
            "(header built directly, tar hashed as written instead of read back, writev)."
        )
        lines.append(
            f"* What remains, per image: the two sha256 passes ({2 * per['sha256 of the crop (one pass)']:.0f} us), "
            f"the writer ({per['tar writer: pmcflow.shard.AtomicTarWriter (now)']} us, its tar sha256 included), the "
            f"sample json ({per['sample json (json.dumps, sorted keys)']} us: json.dumps of ~50 keys), reading the "
            "crop, the Arrow row and the text; and once per run the fixed cost above (most of it "
            "pmcflow.config parsing the config schema with pyyaml)."
        )
    return lines


def markdown(res: dict[str, Any]) -> str:
    p = res["pool"]
    lines = [
        "# Shard benchmark",
        "",
        f"Pool: {p['n_images']} distinct crops ({p['n_png']} PNG, {p['n_jpg']} JPEG; {p['n_articles']} articles), "
        f"{p['image_mb']} MB: mean {p['kb_mean']} KB, median {p['kb_median']} KB, 5-95 % {p['kb_p5']}-{p['kb_p95']} KB "
        f"(min {p['kb_min']}, max {p['kb_max']}); built in {p['build_s']} s from scikit-image images and "
        "matplotlib charts, with `crop_sha256` recorded as decompose does (`benchmarks/bench_shard.py`).",
        f"All steps in one process and run, `os.sync()` before each, order rotated between repeats, best of "
        f"{res['repeats']} by CPU time; {res['machine']}; load average {res['load_avg']}; {res['date']}. "
        "CPU time is the comparable figure on this shared machine; wall time includes waiting for the disk "
        "and for other processes.",
        f"Shard config: `{json.dumps(res['config'])}`, seed 7.",
        "",
        "| step | CPU s | wall s | MB / CPU s | MB / wall s | images / CPU s | % of copy (CPU) | % of copy (wall) | images decoded |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in res["runs"].items():
        decoded = r.get("n_images_decoded")
        lines.append(
            f"| {name} | {r['cpu_s']} | {r['wall_s']} | {r['mb_per_cpu_s']} | {r['mb_per_wall_s']} | "
            f"{r['images_per_cpu_s']} | {r['pct_of_copy_cpu']} % | {r['pct_of_copy_wall']} % | "
            f"{'-' if decoded is None else decoded} |"
        )
    fx = res["fixed_cost_header_0_rows"]
    lines += [
        "",
        f"shard[header] and shard[decode] tars byte-identical: {res['header_and_decode_tars_identical']}.",
        "",
        f"Fixed cost of a run (shard[header] on a 0-row dataset: config schema, Parquet, manifest, card, "
        f"fsyncs): {fx['cpu_s']} CPU s, {fx['wall_s']} wall s. Without it shard[header] costs "
        f"{res['header_per_image_cpu_us_without_fixed_cost']} CPU us per image, "
        f"{res['header_pct_of_copy_cpu_without_fixed_cost']} % of copy's throughput (CPU).",
    ]
    lines += ["", "## Reading", "", *summary(res)]
    comp = res.get("components")
    if comp:
        lines += [
            "",
            "Per-image CPU cost of the pieces, on the same pool (best of the repeats):",
            "",
            "| piece | CPU s (all images) | us / image |",
            "|---|---|---|",
        ]
        lines += [
            f"| {k} | {v['cpu_s']} | {v['us_per_image']} |" for k, v in comp.items() if isinstance(v, dict)
        ]
        lines += [""] + [f"{k}: {v}." for k, v in comp.items() if not isinstance(v, dict)]
    if res.get("profile_header"):
        lines += [
            "",
            "cProfile (CPU time) of one shard[header] run after the config is resolved, by own time (the "
            "profiler inflates small Python calls most):",
            "",
            "| function | calls | own s | own % | cumulative s |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| `{r['function']}` | {r['calls']} | {r['own_s']} | {r['own_pct']} | {r['cum_s']} |"
            for r in res["profile_header"]
        ]
    if res.get("loader"):
        ld = res["loader"]
        lines += [
            "",
            "| loader (open_clip_train get_wds_dataset, shard[header] train tars) | samples | samples / CPU s | samples / wall s |",
            "|---|---|---|---|",
            f"| {ld['transform']}, batch {ld['batch_size']}, workers {ld['workers']} | {ld['samples']} | {ld['samples_per_cpu_s']} | {ld['samples_per_wall_s']} |",
        ]
    if res.get("notes"):
        lines += ["", *res["notes"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-images", type=int, default=2400)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-loader", action="store_true")
    ap.add_argument("--profile-top", type=int, default=14, help="0: no cProfile run")
    ap.add_argument("--pool", default=None, help="keep the pool in this folder and reuse it next time")
    ap.add_argument("--ref", default=None, help="also run pmcflow.shard as it was at this git ref")
    ap.add_argument("--notes", default=None, help="a file of markdown lines appended to shard.md")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    args = ap.parse_args()
    load_before = os.getloadavg()
    res = bench(
        args.n_images,
        args.repeats,
        not args.no_loader,
        args.profile_top,
        args.ref,
        Path(args.pool) if args.pool else None,
    )
    load_after = os.getloadavg()
    res.update(
        {
            "load_avg": f"{load_before[1]:.1f} before, {load_after[1]:.1f} after (5 min)",
            "notes": Path(args.notes).read_text().splitlines() if args.notes else [],
            "repeats": args.repeats,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (shared), Python {platform.python_version()}",
            "date": time.strftime("%Y-%m-%d"),
        }
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "shard.json").write_text(json.dumps(res, indent=2) + "\n")
    (out / "shard.md").write_text(markdown(res))
    print(markdown(res))


if __name__ == "__main__":
    main()
