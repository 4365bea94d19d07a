"""Benchmarks as data: the paper's definitions, config resolution, loaders, splits, checksums, demos."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import json
import random
import tarfile
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from pmcflow.encoders import benchmarks as B
from pmcflow.encoders.benchmarks import Benchmark, BenchmarkError, Download

# The paper's Table 8 (zero-shot F1), column names by modality group, in the paper's order.
TABLE8 = {
    "radiology": ["PneumoniaMNIST+", "BreastMNIST+", "OrganAMNIST+", "OrganCMNIST+", "OrganSMNIST+"],
    "vlp": ["PAD-UFES-20", "Skin Cancer", "PathMNIST+", "DermaMNIST+", "OCTMNIST+", "RetinaMNIST+"],
    "microscopy": [
        "Sicap",
        "PCam",
        "NCT-CRC-HE",
        "LC-Lung",
        "LC-Colon",
        "BACH",
        "BloodMNIST+",
        "TissueMNIST+",
    ],
}
# Table 5: (number of classes, Nb. Samples) per classification dataset; retrieval sizes.
TABLE5_CLASSES = {
    "PAD-UFES-20": (6, 460), "Skin Cancer": (7, 2003), "PCam": (2, 32768), "NCT-CRC-HE": (8, 6333),
    "LC-Lung": (3, 3000), "LC-Colon": (2, 2000), "BACH": (4, 100), "Sicap": (4, 2122),
    "PathMNIST+": (9, 107180), "DermaMNIST+": (7, 10015), "OCTMNIST+": (4, 109309), "PneumoniaMNIST+": (2, 5856),
    "RetinaMNIST+": (5, 1600), "BreastMNIST+": (2, 780), "BloodMNIST+": (8, 17092), "TissueMNIST+": (8, 236386),
    "OrganAMNIST+": (11, 58830), "OrganCMNIST+": (11, 23583), "OrganSMNIST+": (11, 25211),
}  # fmt: skip
TABLE5_RETRIEVAL = {"Quilt": 13559, "MIMIC-CXR": 3269, "DeepEyeNet": 3140}


def _png(path: Path, color: tuple[int, int, int], size: int = 40) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (size, size), color).save(path, format="PNG")
    return path


def _png_bytes(color: tuple[int, int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (24, 24), color).save(buf, format="PNG")
    return buf.getvalue()


# ----------------------------------------------------------------------------------------------
# the paper's definitions
# ----------------------------------------------------------------------------------------------


def test_paper_has_6_retrieval_and_19_zero_shot_tasks_named_as_in_tables_3_and_8() -> None:
    bs = B.paper_benchmarks()
    tasks = B.benchmark_tasks(list(bs.values()))
    counts = Counter(t["task"] for t in tasks)
    # convention: 3 retrieval datasets x 2 directions; 19 zero-shot + 19 linear-probe
    assert counts == {"retrieval": 6, "zero_shot": 19, "linear_probe": 19}
    retrieval = [t for t in tasks if t["task"] == "retrieval"]
    assert Counter(t["direction"] for t in retrieval) == {"image_to_text": 3, "text_to_image": 3}
    assert {t["paper_name"] for t in retrieval} == set(TABLE5_RETRIEVAL)
    for modality, names in TABLE8.items():
        got = [t["paper_name"] for t in tasks if t["task"] == "zero_shot" and t["modality"] == modality]
        assert got == names
    zs = {t["benchmark"] for t in tasks if t["task"] == "zero_shot"}
    lp = {t["benchmark"] for t in tasks if t["task"] == "linear_probe"}
    assert zs == lp and len(zs) == 19


def test_paper_definitions_match_table5_and_are_complete() -> None:
    bs = B.paper_benchmarks()
    for b in bs.values():
        assert b.path is None
        assert b.source and b.licence and b.citation and b.access in B.ACCESS_LEVELS, b.name
        if "retrieval" in b.tasks:
            assert b.n == TABLE5_RETRIEVAL[b.paper_name]
            assert b.class_names is None and b.layout in B.RETRIEVAL_LAYOUTS
            continue
        n_classes, n = TABLE5_CLASSES[b.paper_name]
        assert b.n == n, b.name
        declared = [k for k in b.class_map if k not in b.exclude_labels]
        assert len(declared) == n_classes, b.name
        assert b.templates and all("{}" in t for t in b.templates)
        for d in b.download:  # only open definitions carry a download, always with a checksum
            assert b.access == "open" and (d.md5 or d.sha256) and d.checksum_source
    # access levels of the restricted sets
    assert bs["mimic-cxr"].access == "credentialed" and "PhysioNet" in (bs["mimic-cxr"].licence or "")
    assert bs["quilt"].access == "request" and bs["deepeyenet"].access == "request"
    # MedMNIST+ checksums as published in medmnist 3.0.2's INFO (MD5_224)
    assert bs["pathmnist"].download[0].md5 == "2c51a510bcdc9cf8ddb2af93af1eadec"
    assert bs["tissuemnist"].download[0].md5 == "b077128c4a949f0a4eb01517f9037b9c"
    assert bs["dermamnist"].licence == "CC BY-NC 4.0" and bs["pneumoniamnist"].licence == "CC BY 4.0"
    assert bs["organamnist"].class_map["10"] == "spleen"
    assert bs["nct-crc-he"].exclude_labels == ("BACK",)
    assert not bs["pcam"].download  # conflicting published MD5s: none recorded


# ----------------------------------------------------------------------------------------------
# config resolution
# ----------------------------------------------------------------------------------------------


def test_resolve_merges_a_paper_benchmark_and_overrides_keys(tmp_path: Path) -> None:
    table = tmp_path / "pneumonia.parquet"
    table.write_bytes(b"")  # existence is what resolve checks
    [b] = B.resolve_benchmarks(
        [{"name": "pneumoniamnist", "path": "pneumonia.parquet", "templates": ["a chest X-ray showing {}."]}],
        base_dir=tmp_path,
    )
    paper = B.paper_benchmarks()["pneumoniamnist"]
    assert b.path == str(tmp_path / "pneumonia.parquet")
    assert b.templates == ("a chest X-ray showing {}.",)
    assert b.class_names == paper.class_names == (("0", "normal"), ("1", "pneumonia"))
    assert b.download == paper.download and b.n == 5856 and b.split == "test"


def test_resolve_defines_a_custom_benchmark(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    [b] = B.resolve_benchmarks(
        [
            {
                "name": "mine",
                "tasks": ["zero_shot"],
                "layout": "dir",
                "path": str(tmp_path / "d"),
                "class_names": {"a": "apples", "b": "bananas"},
                "templates": ["a photo of {}."],
                "test_fraction": 0.5,
            }
        ]
    )
    assert b.modality == "other" and b.class_map == {"a": "apples", "b": "bananas"} and b.test_fraction == 0.5


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"name": "quilt", "path": "x.csv", "imag_column": "img"},
            r"benchmarks\[0\]\.imag_column: unknown key",
        ),
        (
            {"name": "bach", "path": "d", "download": {"url": "u", "filename": "f", "sha265": "0"}},
            r"download\.sha265: unknown key",
        ),
        ({"name": "quilt"}, r"benchmarks\[0\] \(quilt\)\.path: benchmark 'quilt' has no path"),
        ({"name": "quilt", "path": "missing.csv"}, r"benchmark 'quilt': .*missing\.csv does not exist"),
        ({"name": "mine", "path": "d"}, r"not a paper benchmark .* must define tasks and layout"),
        (
            {"name": "mine", "path": "d", "tasks": ["zero_shot"], "layout": "dir"},
            r"templates: zero_shot needs",
        ),
        ({"name": "mine", "path": "d", "tasks": ["retrieval"], "layout": "dir"}, r"retrieval needs one of"),
        ({"name": "mine", "path": "d", "tasks": ["ranking"], "layout": "dir"}, r"unknown task 'ranking'"),
        ({"name": "pcam", "path": "d", "test_fraction": 1.5}, r"test_fraction: must be a number in \(0, 1\)"),
        ({"name": "pcam", "path": "d", "templates": ["no slot"]}, r"templates\[0\]: 'no slot' has no"),
    ],
)
def test_resolve_rejects_bad_entries_with_the_key_path(tmp_path: Path, entry: dict, message: str) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(BenchmarkError, match=message):
        B.resolve_benchmarks([entry], base_dir=tmp_path)


def test_resolve_rejects_duplicates_and_non_lists(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(BenchmarkError, match="listed twice"):
        B.resolve_benchmarks(
            [{"name": "bach", "path": "d"}, {"name": "bach", "path": "d"}], base_dir=tmp_path
        )
    with pytest.raises(BenchmarkError, match="expected a list"):
        B.resolve_benchmarks({"name": "bach"})  # type: ignore[arg-type]


def test_to_entry_round_trips(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    [b] = B.resolve_benchmarks([{"name": "nct-crc-he", "path": "d"}], base_dir=tmp_path)
    [again] = B.resolve_benchmarks([b.to_entry()], base_dir=tmp_path)
    assert again == b


# ----------------------------------------------------------------------------------------------
# loaders
# ----------------------------------------------------------------------------------------------


def test_load_retrieval_csv_with_image_root_and_row_filter(tmp_path: Path) -> None:
    # a Quilt-1M-like copy: the official column names, images under quilt_1m/
    rows = [
        ("a.png", "cap A", "quilt"),
        ("b.png", "cap B", "laion"),
        ("c.png", "cap C", "openpath"),
        ("d.png", "", "quilt"),
    ]
    for name, _, _ in rows:
        _png(tmp_path / "quilt_1m" / name, (10, 20, 30))
    csv = tmp_path / "quilt_1m_val.csv"
    csv.write_text("image_path,caption,subset\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows))
    [b] = B.resolve_benchmarks([{"name": "quilt", "path": str(csv)}])
    rd = B.load_retrieval(b)
    assert rd.texts == ["cap A", "cap C"]  # laion filtered out, the empty caption skipped
    assert rd.image_paths == [str(tmp_path / "quilt_1m" / "a.png"), str(tmp_path / "quilt_1m" / "c.png")]
    assert rd.ids == ["a.png", "c.png"] and rd.skipped == 1 and rd.image_bytes is None
    assert rd.image(1).size == (40, 40)


def test_load_retrieval_parquet_bytes_and_default_columns(tmp_path: Path) -> None:
    blobs = [_png_bytes((i * 40, 0, 0)) for i in range(3)]
    pq.write_table(
        pa.table({"id": ["x", "y", "z"], "image": blobs, "caption": ["one", "two", "three"]}),
        tmp_path / "t.parquet",
    )
    b = Benchmark(name="t", tasks=("retrieval",), layout="parquet", path=str(tmp_path / "t.parquet"))
    rd = B.load_retrieval(b)
    assert rd.ids == ["x", "y", "z"] and rd.texts == ["one", "two", "three"]
    assert rd.image_bytes == blobs and rd.image_paths[2] == f"{tmp_path / 't.parquet'}#2"
    assert rd.image(1).getpixel((0, 0)) == (40, 0, 0)
    missing = Benchmark(
        name="t",
        tasks=("retrieval",),
        layout="parquet",
        path=str(tmp_path / "t.parquet"),
        text_column="report",
    )
    with pytest.raises(BenchmarkError, match="text column 'report' not in t.parquet"):
        B.load_retrieval(missing)


def _add(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tf.addfile(info, io.BytesIO(data))


def test_load_retrieval_webdataset(tmp_path: Path) -> None:
    shards = tmp_path / "shards"
    shards.mkdir()
    with tarfile.open(shards / "000001.tar", "w") as tf:
        _add(tf, "s/k2.png", _png_bytes((1, 2, 3)))
        _add(tf, "s/k2.txt", b"second shard text")
    with tarfile.open(shards / "000000.tar", "w") as tf:
        _add(tf, "k0.jpg.json", b"{}")
        _add(tf, "k0.png", _png_bytes((9, 9, 9)))
        _add(tf, "k0.txt", "caption zero \u00b5m\n".encode())
        _add(tf, "k1.png", _png_bytes((5, 5, 5)))  # no text: skipped
    b = Benchmark(name="wds", tasks=("retrieval",), layout="webdataset", path=str(shards))
    rd = B.load_retrieval(b)
    assert rd.ids == ["k0", "s/k2"] and rd.texts == ["caption zero \u00b5m", "second shard text"]
    assert rd.image_paths == [f"{shards / '000000.tar'}#k0.png", f"{shards / '000001.tar'}#s/k2.png"]
    assert rd.skipped == 1 and rd.image_bytes is not None
    assert rd.image(0).getpixel((3, 3)) == (9, 9, 9)
    assert B.open_image(rd.image_paths[1]).getpixel((0, 0)) == (1, 2, 3)  # reference re-opened from the tar


def test_load_classification_dir_excludes_and_derives_a_split(tmp_path: Path) -> None:
    root = tmp_path / "CRC-VAL-HE-7K"
    for cls, n in (("ADI", 6), ("BACK", 3), ("TUM", 4)):
        for i in range(n):
            _png(root / cls / f"{cls}-{i}.png", (i, 0, 0))
    [b] = B.resolve_benchmarks([{"name": "nct-crc-he", "path": str(root)}])
    cd = B.load_classification(b)
    assert cd.excluded == 3 and Counter(cd.labels) == {"ADI": 6, "TUM": 4}
    assert cd.classes == [
        "ADI",
        "DEB",
        "LYM",
        "MUC",
        "MUS",
        "NORM",
        "STR",
        "TUM",
    ]  # the 8 declared, BACK excluded
    assert cd.class_names["TUM"] == "colorectal adenocarcinoma epithelium"
    assert cd.split_source == "derived" and cd.ids[0] == "ADI/ADI-0.png"
    # stratified 20 %: round(6 * .2) = 1 of ADI, round(4 * .2) = 1 of TUM
    assert Counter((lab, s) for lab, s in zip(cd.labels, cd.splits, strict=True) if s == "test") == {
        ("ADI", "test"): 1,
        ("TUM", "test"): 1,
    }
    assert list(cd.label_indices()[:6]) == [0] * 6
    _png(root / "ODD" / "x.png", (0, 0, 0))
    with pytest.raises(BenchmarkError, match=r"label\(s\) 'ODD' \(1\) not among its classes"):
        B.load_classification(b)


def test_load_classification_dir_with_split_folders(tmp_path: Path) -> None:
    root = tmp_path / "photos"
    for split, n in (("train", 3), ("test", 2)):
        for cls in ("Benign", "Normal"):
            for i in range(n):
                _png(root / split / cls / "sub" / f"{i}.tif", (0, i, 0))
    b = Benchmark(
        name="mini", tasks=("zero_shot", "linear_probe"), layout="dir", path=str(root), templates=("a {}",)
    )
    cd = B.load_classification(b)
    assert cd.split_source == "folders" and cd.classes == ["Benign", "Normal"]
    assert Counter(zip(cd.splits, cd.labels, strict=True)) == {
        ("test", "Benign"): 2, ("test", "Normal"): 2, ("train", "Benign"): 3, ("train", "Normal"): 3,
    }  # fmt: skip
    assert "test/Benign/sub/0.tif" in cd.ids and cd.indices("test") == [0, 1, 2, 3]


def test_load_classification_table_with_int_labels_split_column_and_names(tmp_path: Path) -> None:
    for i in range(4):
        _png(tmp_path / "img" / f"{i}.png", (i, i, i))
    pq.write_table(
        pa.table(
            {
                "image": [f"img/{i}.png" for i in range(4)],
                "label": ["0", "pneumonia", "1", "normal"],
                "split": ["train", "test", "test", "train"],
            }
        ),
        tmp_path / "p.parquet",
    )
    [b] = B.resolve_benchmarks([{"name": "pneumoniamnist", "path": str(tmp_path / "p.parquet")}])
    cd = B.load_classification(b)
    assert cd.labels == ["0", "1", "1", "0"] and cd.splits == ["train", "test", "test", "train"]
    assert cd.classes == ["0", "1"] and cd.class_names == {"0": "normal", "1": "pneumonia"}
    assert cd.image_paths[2] == str(tmp_path / "img" / "2.png") and cd.split_source == "column"


def test_load_classification_csv_with_suffix_and_image_root(tmp_path: Path) -> None:
    # a HAM10000-like copy: metadata with image ids without extension, images in images/
    rows = [("ISIC_1", "nv"), ("ISIC_2", "mel"), ("ISIC_3", "nv"), ("ISIC_4", "df")]
    for img, _ in rows:
        _png(tmp_path / "images" / f"{img}.jpg", (0, 0, 9))
    meta = tmp_path / "HAM10000_metadata.csv"
    meta.write_text("lesion_id,image_id,dx\n" + "".join(f"L{i},{a},{d}\n" for i, (a, d) in enumerate(rows)))
    [b] = B.resolve_benchmarks([{"name": "skin-cancer", "path": str(meta), "split_seed": 3}])
    cd = B.load_classification(b)
    assert cd.image_paths[0] == str(tmp_path / "images" / "ISIC_1.jpg")
    assert cd.labels == ["nv", "mel", "nv", "df"] and cd.classes == [
        "nv",
        "mel",
        "bkl",
        "bcc",
        "akiec",
        "vasc",
        "df",
    ]
    assert cd.splits == B.stable_split(cd.ids, cd.labels, 0.2, 3)


# ----------------------------------------------------------------------------------------------
# stable_split
# ----------------------------------------------------------------------------------------------


def test_stable_split_is_deterministic_stratified_and_order_free() -> None:
    ids = [f"img{i:04d}" for i in range(300)]
    labels = ["a"] * 200 + ["b"] * 90 + ["c"] * 9 + ["d"]
    s1 = B.stable_split(ids, labels, 0.2, seed=7)
    assert s1 == B.stable_split(ids, labels, 0.2, seed=7)
    test = Counter(lab for lab, s in zip(labels, s1, strict=True) if s == "test")
    assert test == {"a": 40, "b": 18, "c": 2}  # round(n * 0.2) per label; the single "d" stays in train
    order = list(range(300))
    random.Random(0).shuffle(order)
    shuffled = B.stable_split([ids[i] for i in order], [labels[i] for i in order], 0.2, seed=7)
    assert {ids[i]: shuffled[k] for k, i in enumerate(order)} == dict(zip(ids, s1, strict=True))
    assert B.stable_split(ids, labels, 0.2, seed=8) != s1
    # the split of a label does not depend on the other labels' samples
    only_b = B.stable_split(ids[200:290], labels[200:290], 0.2, seed=7)
    assert only_b == s1[200:290]
    assert B.stable_split(["x", "y"], ["k", "k"], 0.01, 0).count("test") == 1
    with pytest.raises(BenchmarkError):
        B.stable_split(["x"], ["k"], 1.0, 0)


# ----------------------------------------------------------------------------------------------
# benchmark_files
# ----------------------------------------------------------------------------------------------


def test_benchmark_files_lists_table_and_images_with_sha256(tmp_path: Path) -> None:
    imgs = [_png(tmp_path / "im" / f"{i}.png", (i * 30, 1, 2)) for i in range(3)]
    pq.write_table(
        pa.table({"image": [f"im/{i}.png" for i in range(3)], "text": ["a", "b", "c"]}),
        tmp_path / "pairs.parquet",
    )
    b = Benchmark(name="p", tasks=("retrieval",), layout="parquet", path=str(tmp_path / "pairs.parquet"))
    rows = B.benchmark_files(b)
    assert [r["relpath"] for r in rows] == ["im/0.png", "im/1.png", "im/2.png", "pairs.parquet"]
    for r in rows:
        data = Path(r["path"]).read_bytes()
        assert r["sha256"] == hashlib.sha256(data).hexdigest() and r["bytes"] == len(data)
    imgs[1].unlink()
    with pytest.raises(BenchmarkError, match="1 file\\(s\\) missing"):
        B.benchmark_files(b)


# ----------------------------------------------------------------------------------------------
# demo benchmarks
# ----------------------------------------------------------------------------------------------


def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    out = tmp_path_factory.mktemp("demo") / "a"
    return out, B.build_demo_benchmarks(out, seed=0)


def test_demo_benchmarks_are_byte_identical_for_a_seed(demo: tuple[Path, list[dict]], tmp_path: Path) -> None:
    out, built = demo
    again = B.build_demo_benchmarks(tmp_path / "b", seed=0)
    assert _tree(out) == _tree(tmp_path / "b")
    assert [{k: v for k, v in b.items() if k != "path"} for b in built] == [
        {k: v for k, v in b.items() if k != "path"} for b in again
    ]
    B.build_demo_benchmarks(tmp_path / "c", seed=1)
    a, c = _tree(out), _tree(tmp_path / "c")
    assert a.keys() == c.keys() and sum(a[k] != c[k] for k in a if k.endswith(".png")) > 0.9 * sum(
        k.endswith(".png") for k in a
    )


def test_demo_benchmarks_load_through_their_config(demo: tuple[Path, list[dict]]) -> None:
    out, built = demo
    assert [b["name"] for b in built] == ["demo-modality", "demo-retrieval"]
    bs = {b.name: b for b in B.read_benchmarks_yaml(out / "benchmarks.yaml")}
    cd = B.load_classification(bs["demo-modality"])
    assert len(cd.classes) >= 4 and cd.split_source == "folders"
    per_class = Counter(zip(cd.labels, cd.splits, strict=True))
    assert all(per_class[(c, "train")] >= 4 and per_class[(c, "test")] >= 2 for c in cd.classes)
    assert set(cd.class_names.values()) >= {"radiology", "light microscopy", "chart or plot"}
    rd = B.load_retrieval(bs["demo-retrieval"])
    assert len(rd) == built[1]["n"] >= 20 and len(set(rd.texts)) == len(rd.texts)
    assert all(
        t.split(". ", 1)[0]
        in {"Radiology image", "Microscopy image", "Histopathology image", "Retinal fundus image", "Chart"}
        for t in rd.texts
    )
    for path in cd.image_paths[:5] + rd.image_paths[:5]:
        with Image.open(path) as im:
            assert max(im.size) <= 224
    files = B.benchmark_files(bs["demo-retrieval"])
    assert len(files) == len(rd) + 1
    prov = (out / "PROVENANCE.md").read_text()
    assert all(
        f"`demo-retrieval/{p}`" in prov
        for p in pq.read_table(out / "demo-retrieval" / "pairs.parquet").column("image").to_pylist()
    )
    assert "public domain" in prov and "CC0" in prov


# ----------------------------------------------------------------------------------------------
# MedMNIST npz conversion, downloads, command line
# ----------------------------------------------------------------------------------------------


def test_convert_medmnist_npz_feeds_the_paper_definition(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    arrays = {
        "train_images": rng.integers(0, 255, (4, 16, 16), dtype=np.uint8),
        "train_labels": np.array([[0], [1], [1], [0]], dtype=np.uint8),
        "test_images": rng.integers(0, 255, (2, 16, 16), dtype=np.uint8),
        "test_labels": np.array([[1], [0]], dtype=np.uint8),
    }
    np.savez(tmp_path / "pneumoniamnist_224.npz", **arrays)
    target = B.convert_medmnist_npz(tmp_path / "pneumoniamnist_224.npz", tmp_path / "pneu")
    assert target == tmp_path / "pneu" / "pneumoniamnist_224.parquet"
    [b] = B.resolve_benchmarks([{"name": "pneumoniamnist", "path": str(target)}])
    cd = B.load_classification(b)
    assert cd.labels == ["0", "1", "1", "0", "1", "0"] and cd.splits == ["train"] * 4 + ["test"] * 2
    assert np.array_equal(np.asarray(Image.open(cd.image_paths[5])), arrays["test_images"][1])


@pytest.fixture
def http_dir(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    served = tmp_path / "served"
    served.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *a, **k: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", served
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_downloads_and_verifies_only_open_checksummed_files(
    http_dir: tuple[str, Path], tmp_path: Path
) -> None:
    base, served = http_dir
    payload = bytes(range(256)) * 4000
    (served / "set.npz").write_bytes(payload)
    md5 = hashlib.md5(payload).hexdigest()
    good = Benchmark(
        name="tiny", tasks=("zero_shot",), layout="parquet", templates=("{}",), access="open",
        download=(Download(url=f"{base}/set.npz", filename="set.npz", md5=md5, size=len(payload)),),
    )  # fmt: skip
    dest = tmp_path / "dest"
    [row] = B.fetch_benchmarks([good], dest)
    assert row["status"] == "downloaded" and row["sha256"] == hashlib.sha256(payload).hexdigest()
    assert (dest / "tiny" / "set.npz").read_bytes() == payload
    [row] = B.fetch_benchmarks([good], dest)
    assert row["status"] == "present"

    bad = Benchmark(
        name="bad", tasks=("zero_shot",), layout="parquet", templates=("{}",), access="open",
        download=(Download(url=f"{base}/set.npz", filename="set.npz", md5="0" * 32),),
    )  # fmt: skip
    with pytest.raises(BenchmarkError, match="checksum mismatch"):
        B.fetch_benchmarks([bad], dest)
    assert not any((dest / "bad").iterdir())  # nothing left behind
    unverified = Benchmark(
        name="nosum", tasks=("zero_shot",), layout="parquet", templates=("{}",), access="open",
        download=(Download(url=f"{base}/set.npz", filename="set.npz"),),
    )  # fmt: skip
    with pytest.raises(BenchmarkError, match="no published checksum"):
        B.fetch_benchmarks([unverified], dest)
    with pytest.raises(BenchmarkError, match=r"'mimic-cxr' has no open download \(access: credentialed\)"):
        B.fetch_benchmarks(["mimic-cxr"], dest)
    assert not (dest / "mimic-cxr").exists()


def test_cli_list_and_build(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert B.cli_list([]) == 0
    text = capsys.readouterr().out
    assert (
        "pathmnist" in text
        and "6 retrieval tasks (3 datasets x 2 directions), 19 zero-shot and 19 linear-probe tasks" in text
    )
    assert B.cli_list(["--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 22 and rows[0]["name"] == "quilt"
    assert B.cli(["build-demo-benchmarks", "--out", str(tmp_path / "o"), "--seed", "2"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    summary = json.loads(lines[0])
    assert summary["seed"] == 2 and [b["name"] for b in summary["benchmarks"]] == [
        "demo-modality",
        "demo-retrieval",
    ]
    assert (tmp_path / "o" / "benchmarks.yaml").is_file()
