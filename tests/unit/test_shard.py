"""Sharding: WebDataset tars that open_clip_train and webdataset read unchanged, deterministic and atomic."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from argparse import Namespace
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image
from pmcflow_testing.encoder_toydata import make_toy_dataset
from torchvision import transforms as T

from pmcflow import schema as S
from pmcflow import shard as SH
from pmcflow.tables import read_counts, write_table

SPLITS = {"train": 0.6, "val": 0.2, "test": 0.2}


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("toy")
    make_toy_dataset(root, n_per_class=8, seed=3, size=48)
    return root


def _shard(toy: Path, out: Path, **cfg: object) -> dict:
    conf = {"splits": SPLITS, "max_samples_per_shard": 5, **cfg}
    return SH.shard_dataset(conf, 11, [str(toy / "dataset.parquet")], str(out), base_dir=str(toy))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_layout_counts_and_manifest(toy: Path, tmp_path: Path) -> None:
    m = _shard(toy, tmp_path / "s")
    out = tmp_path / "s"
    counts = read_counts(out / "counts.json")
    assert counts["in"] == 24 and counts["kept"] == 24 and counts["rejected"] == {}
    total = 0
    for split, info in m["splits"].items():
        sizes = json.loads((out / split / "sizes.json").read_text())
        tars = sorted(p.name for p in (out / split).glob("*.tar"))
        assert sorted(sizes) == tars == [s["name"] for s in info["shards"]]
        assert sum(sizes.values()) == info["n_samples"]
        for s in info["shards"]:
            p = out / split / s["name"]
            assert s["sha256"] == _sha(p) and s["size"] == p.stat().st_size
            assert 1 <= s["count"] <= 5
        total += info["n_samples"]
    assert total == 24
    # Names follow {split}-{000000}.tar
    assert (out / "train" / "train-000000.tar").exists()


def test_original_bytes_text_and_provenance(toy: Path, tmp_path: Path) -> None:
    _shard(toy, tmp_path / "s", text_fields=["subcaption", "summary"], text_separator=" | ")
    src = {r["subfigure_uid"]: r for r in pq.read_table(toy / "dataset.parquet").to_pylist()}
    seen = 0
    for tar_path in sorted((tmp_path / "s").glob("*/*.tar")):
        with tarfile.open(tar_path) as tf:
            members = tf.getmembers()
            assert all(m.mtime == 0 and m.uid == 0 and m.uname == "" for m in members)
            data = {m.name: tf.extractfile(m).read() for m in members}
        for name, blob in data.items():
            if not name.endswith(".json"):
                continue
            meta = json.loads(blob)
            key = name[: -len(".json")]
            row = src[meta["subfigure_uid"]]
            image = data[f"{key}.{meta['image_ext']}"]
            assert image == (toy / row["crop_path"]).read_bytes()  # original bytes
            assert meta["image_ext"] == ("png" if row["crop_format"] == "png" else "jpg")
            assert data[f"{key}.txt"].decode() == f"{row['subcaption']} | {row['summary']}"
            for col in ("article_uid", "pmcid", "license_code", "modality", "caption", "bbox"):
                assert meta[col] == row[col]
            assert meta["shard"] == tar_path.name and meta["split"] == tar_path.parent.name
            seen += 1
    assert seen == 24


def test_every_sample_has_every_text_member(toy: Path, tmp_path: Path) -> None:
    """``<key>.txt`` is the composed text (unchanged); each text field is a member of its own, cleaned
    as compose_text cleans it, empty when null; every sample has the same members in the same order."""
    rows = pq.read_table(toy / "dataset.parquet").to_pylist()
    for i, r in enumerate(rows):  # a messy shared_text on every other row, null on the rest
        r["shared_text"] = f"Shared \t lead\n {i}.\x85" if i % 2 else None
        r["crop_path"] = str(toy / r["crop_path"])
    write_table(rows, S.DATASET, tmp_path / "dataset.parquet")
    SH.shard_dataset(
        {"splits": SPLITS, "max_samples_per_shard": 5, "text_fields": ["subcaption", "summary"],
         "text_separator": " | "},
        11, [str(tmp_path / "dataset.parquet")], str(tmp_path / "s"),
    )  # fmt: skip
    src = {r["subfigure_uid"]: r for r in rows}
    seen = 0
    for tar_path in sorted((tmp_path / "s").glob("*/*.tar")):
        with tarfile.open(tar_path) as tf:
            names = tf.getnames()
            data = {m.name: tf.extractfile(m).read() for m in tf.getmembers()}
        per_key: dict[str, list[str]] = {}
        for name in names:
            key, ext = name.split(".", 1)
            per_key.setdefault(key, []).append(ext)
        for key, exts in per_key.items():
            meta = json.loads(data[f"{key}.json"])
            row = src[meta["subfigure_uid"]]
            # image first, then json, txt and one member per text field, in schema order
            assert exts == [meta["image_ext"], *S.SAMPLE_MEMBERS]
            assert [e for e in exts if e.endswith(".txt")] == [f"{f}.txt" for f in S.SAMPLE_TEXT_FIELDS]
            assert data[f"{key}.txt"].decode() == f"{row['subcaption']} | {row['summary']}"  # unchanged
            for f in S.SAMPLE_TEXT_FIELDS:
                got = data[f"{key}.{f}.txt"].decode()
                assert got == SH.compose_text(row, [f], " ")
                assert got == (
                    "" if row.get(f) is None else " ".join(str(row[f]).split()).replace("\x85", "")
                )
            i = rows.index(row)
            assert data[f"{key}.shared_text.txt"].decode() == (f"Shared lead {i}." if i % 2 else "")
            assert data[f"{key}.subcaption.txt"].decode() == row["subcaption"]
            seen += 1
    assert seen == len(rows)


def test_sample_members_are_defined_once_in_the_schema() -> None:
    names = set(S.DATASET.names)
    assert set(S.SAMPLE_TEXT_FIELDS) <= names
    assert all(S.DATASET.field(f).type == pa.string() for f in S.SAMPLE_TEXT_FIELDS)
    # every text_fields choice that is a dataset column has its member
    from pmcflow.config import load_schema

    shard_props = load_schema()["properties"]["shard"]["properties"]
    allowed = set(shard_props["text_fields"]["items"]["enum"])
    assert allowed & names == set(S.SAMPLE_TEXT_FIELDS)
    assert S.SAMPLE_MEMBERS[:2] == ("json", "txt") and S.text_member("subcaption") == "subcaption.txt"
    with pytest.raises(KeyError):
        S.text_member("caption_title")


def test_text_field_ablations() -> None:
    row = {
        "subcaption": "(a) CT of the chest.",
        "summary": "  Nodules  seen. ",
        "caption": "Figure 1. (a) CT.",
    }
    assert SH.compose_text(row, ["caption"], " ") == "Figure 1. (a) CT."
    assert SH.compose_text(row, ["subcaption"], " ") == "(a) CT of the chest."
    assert SH.compose_text(row, ["subcaption", "summary"], " ") == "(a) CT of the chest. Nodules seen."
    assert SH.compose_text({"subcaption": "x", "summary": None}, ["subcaption", "summary"], " ") == "x"
    assert SH.compose_text({"subcaption": "x", "caption": "x"}, ["subcaption", "caption"], " ") == "x"
    assert SH.compose_text(row, ["caption"], " ", max_chars=6) == "Figure"
    with pytest.raises(SH.ShardConfigError):
        SH.ShardSettings.from_section({"text_fields": ["nope"]})
    with pytest.raises(SH.ShardConfigError, match="must sum to 1"):
        SH.ShardSettings.from_section({"splits": {"train": 0.5}})
    # Types, enums and unknown keys come from the schema, with the key's path in the message.
    for bad, path in (
        ({"text_max_chars": "abc"}, "shard.text_max_chars"),
        ({"verify_images": "quick"}, "shard.verify_images"),
        ({"splits": {"Train": 1.0}}, "shard.splits"),
        ({"max_samples_per_shard": 0}, "shard.max_samples_per_shard"),
        ({"bogus": 1}, r"shard\.bogus: unknown key"),
    ):
        with pytest.raises(SH.ShardConfigError, match=path):
            SH.ShardSettings.from_section(bad)
    assert SH.ShardSettings.from_section({}).max_bytes_per_shard == 1_000_000_000  # the schema's default


def test_deterministic_byte_identical(toy: Path, tmp_path: Path) -> None:
    a = _shard(toy, tmp_path / "a")
    b = _shard(toy, tmp_path / "b")
    for split in a["splits"]:
        assert [s["sha256"] for s in a["splits"][split]["shards"]] == [
            s["sha256"] for s in b["splits"][split]["shards"]
        ]
    assert pq.read_table(tmp_path / "a" / "index.parquet").equals(
        pq.read_table(tmp_path / "b" / "index.parquet")
    )
    # Rerunning into the same directory overwrites identically; a different seed reorders.
    c = _shard(toy, tmp_path / "a")
    assert c["splits"]["train"]["shards"] == a["splits"]["train"]["shards"]
    d = SH.shard_dataset(
        {"splits": SPLITS, "max_samples_per_shard": 5},
        12,
        [str(toy / "dataset.parquet")],
        str(tmp_path / "d"),
        base_dir=str(toy),
    )
    assert [s["sha256"] for s in d["splits"]["train"]["shards"]] != [
        s["sha256"] for s in a["splits"]["train"]["shards"]
    ]


def test_no_article_in_two_splits(toy: Path, tmp_path: Path) -> None:
    _shard(toy, tmp_path / "s")
    idx = pl.read_parquet(tmp_path / "s" / "index.parquet")
    assert idx.height == 24
    assert idx.columns == S.SHARD_INDEX.names
    for col in ("pmcid", "article_uid"):
        per = idx.group_by(col).agg(pl.col("split").n_unique().alias("n"))
        assert per["n"].max() == 1
    assert set(idx["split"].unique()) == {"train", "val", "test"}
    assert idx["key"].n_unique() == 24
    assert all("." not in k and "/" not in k for k in idx["key"])


def test_split_assignment_fractions() -> None:
    fr = {"train": 0.8, "val": 0.1, "test": 0.1}
    got = [SH.assign_split(5, f"PMC{i}", fr) for i in range(20000)]
    for name, f in fr.items():
        assert abs(got.count(name) / len(got) - f) < 0.015
    assert SH.assign_split(5, "PMC1", fr) == SH.assign_split(5, "PMC1", dict(reversed(list(fr.items()))))


def test_shard_size_limit_bytes(toy: Path, tmp_path: Path) -> None:
    m = _shard(toy, tmp_path / "s", max_samples_per_shard=None, max_bytes_per_shard=20480)
    for info in m["splits"].values():
        for s in info["shards"]:
            assert s["size"] <= 20480 or s["count"] == 1


def test_corrupt_missing_unsupported_and_empty_text(toy: Path, tmp_path: Path) -> None:
    rows = pq.read_table(toy / "dataset.parquet").to_pylist()[:6]
    good = (toy / rows[0]["crop_path"]).read_bytes()
    (tmp_path / "trunc.png").write_bytes(good[: len(good) // 2])
    (tmp_path / "garbage.jpg").write_bytes(b"not an image at all")
    tif = io.BytesIO()
    Image.new("L", (20, 20), 128).save(tif, format="TIFF")
    (tmp_path / "img.tif").write_bytes(tif.getvalue())
    rows[0]["crop_path"] = str(tmp_path / "trunc.png")
    rows[1]["crop_path"] = str(tmp_path / "garbage.jpg")
    rows[2]["crop_path"] = None  # no crop at all: a rejection (a path to nothing fails the run, below)
    rows[3]["subcaption"], rows[3]["summary"] = "  ", None
    rows[4]["crop_path"] = str(tmp_path / "img.tif")
    rows.append(dict(rows[5]))  # duplicate uid
    write_table(rows, S.DATASET, tmp_path / "bad.parquet")
    cfg = {"splits": {"train": 1.0}}
    m = SH.shard_dataset(cfg, 1, [str(tmp_path / "bad.parquet")], str(tmp_path / "o"), base_dir=str(toy))
    counts = read_counts(tmp_path / "o" / "counts.json")
    assert counts["in"] == 7 and counts["kept"] == 2
    assert counts["rejected"] == {
        "corrupt_image": 2,
        "duplicate_subfigure_uid": 1,
        "empty_text": 1,
        "missing_crop": 1,
    }
    assert m["image_formats"]["png"] >= 1 and counts["extra"]["n_reencoded"] == 1
    rej = pl.read_parquet(tmp_path / "o" / "rejections.parquet")
    assert rej.height == 5 and set(rej["stage"]) == {"shard"}
    m2 = SH.shard_dataset(
        {**cfg, "other_formats": "reject"},
        1,
        [str(tmp_path / "bad.parquet")],
        str(tmp_path / "o2"),
        base_dir=str(toy),
    )
    assert m2["n_samples"] == 1
    assert read_counts(tmp_path / "o2" / "counts.json")["rejected"]["unsupported_format"] == 1


@pytest.mark.parametrize("fault", ["deleted", "changed"])
def test_dangling_crop_pointer_fails_loudly_and_leaves_no_shards(
    toy: Path, tmp_path: Path, fault: str
) -> None:
    """A dataset row whose crop is gone (or is not the file decompose hashed) fails the shard job;
    nothing that looks like a finished shards folder is left behind, and an earlier one is kept."""
    rows = pq.read_table(toy / "dataset.parquet").to_pylist()[:6]
    crops = tmp_path / "crops"
    crops.mkdir()
    for i, r in enumerate(rows):
        data = (toy / r["crop_path"]).read_bytes()
        (crops / f"{i}.png").write_bytes(data)
        r["crop_path"], r["crop_sha256"] = str(crops / f"{i}.png"), hashlib.sha256(data).hexdigest()
    write_table(rows, S.DATASET, tmp_path / "d.parquet")
    out = tmp_path / "shards"
    SH.shard_dataset({"splits": {"train": 1.0}}, 1, [str(tmp_path / "d.parquet")], str(out))
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    assert "manifest.json" in before
    if fault == "deleted":
        (crops / "3.png").unlink()
    else:
        (crops / "3.png").write_bytes((crops / "4.png").read_bytes())
    with pytest.raises(SH.DanglingPointer, match=r"1 of 6 dataset rows point to crops"):
        SH.shard_dataset({"splits": {"train": 1.0}}, 1, [str(tmp_path / "d.parquet")], str(out))
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == before
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []


def test_empty_input(tmp_path: Path) -> None:
    write_table([], S.DATASET, tmp_path / "empty.parquet")
    for inputs in ([str(tmp_path / "empty.parquet")], []):
        out = tmp_path / f"o{len(inputs)}"
        m = SH.shard_dataset({}, 1, inputs, str(out))
        assert m["n_samples"] == 0
        for split in ("train", "val", "test"):
            assert json.loads((out / split / "sizes.json").read_text()) == {}
            assert not list((out / split).glob("*.tar"))
            assert m["splits"][split]["urls"] is None
        assert pl.read_parquet(out / "index.parquet").height == 0
        assert read_counts(out / "counts.json")["in"] == 0


def test_interrupted_write_publishes_nothing(
    toy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = SH.prepare_image
    calls = {"n": 0}

    def flaky(data: bytes, **kw: object) -> SH.ImagePayload:
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt("simulated kill mid-shard")
        return real(data, **kw)

    monkeypatch.setattr(SH, "prepare_image", flaky)
    out = tmp_path / "s"
    with pytest.raises(KeyboardInterrupt):
        SH.shard_dataset(
            {"splits": {"train": 1.0}}, 1, [str(toy / "dataset.parquet")], str(out), base_dir=str(toy)
        )
    assert not list(out.rglob("*.tar")) and not list(out.rglob(".*tmp*"))
    assert not (out / "manifest.json").exists()
    monkeypatch.setattr(SH, "prepare_image", real)
    m = SH.shard_dataset(
        {"splits": {"train": 1.0}}, 1, [str(toy / "dataset.parquet")], str(out), base_dir=str(toy)
    )
    assert m["n_samples"] == 24


def test_stale_shards_removed(toy: Path, tmp_path: Path) -> None:
    out = tmp_path / "s"
    _shard(toy, out, max_samples_per_shard=2)
    n_before = len(list((out / "train").glob("*.tar")))
    m = _shard(toy, out, max_samples_per_shard=100)
    assert n_before > 1
    assert sorted(p.name for p in (out / "train").glob("*.tar")) == ["train-000000.tar"]
    assert m["splits"]["train"]["n_shards"] == 1


def test_plain_webdataset_reads_shards(toy: Path, tmp_path: Path) -> None:
    import webdataset as wds

    m = _shard(toy, tmp_path / "s")
    urls = m["splits"]["train"]["urls"]
    samples = list(wds.WebDataset(urls, shardshuffle=False).decode("pil"))
    assert len(samples) == m["splits"]["train"]["n_samples"]
    for s in samples:
        img = s.get("jpg") or s.get("png")
        assert isinstance(img, Image.Image) and img.width > 0
        assert isinstance(s["txt"], str) and s["txt"]
        assert s["json"]["key"] == s["__key__"]
        # the per-field members, decoded as text by their last extension
        assert s["subcaption.txt"] == s["json"]["subcaption"] and s["subcaption.txt"]
        assert s["shared_text.txt"] == ""  # null in the toy data: present, empty
        assert set(S.SAMPLE_MEMBERS) <= set(s)


def test_open_clip_train_pipeline_reads_shards(toy: Path, tmp_path: Path) -> None:
    import open_clip
    from open_clip_train.data import get_wds_dataset

    m = _shard(toy, tmp_path / "s")
    info = m["splits"]["train"]
    preprocess = T.Compose([T.Resize((32, 32)), T.ToTensor()])
    tokenizer = open_clip.get_tokenizer("ViT-B-32")
    args = Namespace(
        train_data=info["urls"],
        val_data=m["splits"]["test"]["urls"],
        train_num_samples=None,
        val_num_samples=None,
        dataset_resampled=False,
        train_data_upsampling_factors=None,
        seed=0,
        batch_size=4,
        workers=0,
        world_size=1,
    )
    data = get_wds_dataset(args, preprocess, is_train=True, epoch=0, tokenizer=tokenizer)
    # num_samples came from sizes.json (train_num_samples=None).
    assert data.dataloader.num_samples >= info["n_samples"]
    n = 0
    for images, texts in data.dataloader:
        assert images.shape[1:] == (3, 32, 32) and texts.shape == (images.shape[0], 77)
        n += images.shape[0]
    assert n == data.dataloader.num_samples
    val = get_wds_dataset(args, preprocess, is_train=False, tokenizer=tokenizer)
    assert sum(b[0].shape[0] for b in val.dataloader) == m["splits"]["test"]["n_samples"]


def test_cli(toy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("seed: 4\nshard:\n  splits: {train: 1.0}\n  text_fields: [caption]\n")
    rc = SH.cli(
        [str(toy / "dataset.parquet"), "--out", str(tmp_path / "o"), "-c", str(cfg), "--base-dir", str(toy)]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_samples"] == 24 and out["splits"]["train"]["n_shards"] == 1
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert manifest["seed"] == 4 and manifest["config"]["text_fields"] == ["caption"]


def test_hf_datasets_loads_index_and_tars(toy: Path, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    _shard(toy, tmp_path / "s")
    idx = datasets.load_dataset(
        "parquet",
        data_files=str(tmp_path / "s" / "index.parquet"),
        split="train",
        cache_dir=str(tmp_path / "c"),
    )
    assert idx.num_rows == 24 and idx.column_names == S.SHARD_INDEX.names
    paths = sorted(str(p) for p in (tmp_path / "s" / "train").glob("*.tar"))
    tars = datasets.load_dataset(
        "webdataset",
        data_files={"train": paths},
        split="train",
        features=SH.hf_webdataset_features(paths),
        cache_dir=str(tmp_path / "c"),
    )
    assert tars.num_rows == sum(1 for r in idx if r["split"] == "train")
    assert {"jpg", "png", "txt", "json"} <= set(tars.column_names)
    for row in tars:
        image = row["jpg"] if row["jpg"] is not None else row["png"]
        assert image is not None and image.width > 0
        assert row["json"]["key"] == row["__key__"] and row["txt"] == row["json"]["text"]
        assert (
            row["subcaption.txt"] == row["json"]["subcaption"]
            and row["summary.txt"] == row["json"]["summary"]
        )
        assert row["shared_text.txt"] == ""


def test_meta_json_never_contains_nan() -> None:
    blob = SH._dump_meta({"b": float("nan"), "a": [1.0, float("inf")], "c": "x"})
    assert json.loads(blob) == {"a": [1.0, None], "b": None, "c": "x"}
    assert blob == b'{"a":[1.0,null],"b":null,"c":"x"}'


def test_dataset_card_lets_hf_load_the_folder_as_is(toy: Path, tmp_path: Path) -> None:
    """`load_dataset(<shards folder>)` works with no arguments: the card's YAML header names the
    splits' tars and every column's type. Without it, a text field that is null in every sample of
    the first shard and a string later (as panel labels and LLM reasons are) breaks inference."""
    datasets = pytest.importorskip("datasets")
    table = pq.read_table(toy / "dataset.parquet")
    keys = table.column("subfigure_uid").to_pylist()
    # null in the first half of the samples in shard order, a string in the rest
    rank = {u: i for i, u in enumerate(sorted(keys, key=lambda u: SH.order_key(11, u)))}
    late = [None if rank[u] < len(keys) // 2 else f"label {rank[u]}" for u in keys]
    col = table.schema.get_field_index("panel_label")
    if col >= 0:
        table = table.set_column(col, "panel_label", pa.array(late, pa.string()))
    else:
        table = table.append_column("panel_label", pa.array(late, pa.string()))
    pq.write_table(table, tmp_path / "dataset.parquet")
    out = tmp_path / "s"
    m = SH.shard_dataset(
        {"splits": {"train": 1.0}, "max_samples_per_shard": 4},
        11,
        [str(tmp_path / "dataset.parquet")],
        str(out),
        base_dir=str(toy),
    )
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "config_name: default" in card and "## Licences" in card

    plain_cache = tmp_path / "plain"
    with pytest.raises(Exception):  # noqa: B017 - what the card exists for: inference alone fails
        datasets.load_dataset(
            "webdataset",
            data_files={"train": sorted(str(p) for p in (out / "train").glob("*.tar"))},
            split="train",
            cache_dir=str(plain_cache),
        )
    ds = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "c"))
    assert set(ds) == {"train"} and ds["train"].num_rows == m["n_samples"]
    labels = sorted(str(r["json"]["panel_label"]) for r in ds["train"])
    assert labels.count("None") == len(keys) // 2 and any(x.startswith("label ") for x in labels)
    row = ds["train"][0]
    assert row["txt"] == row["json"]["text"] and row["json"]["key"] == row["__key__"]
    for f in S.SAMPLE_TEXT_FIELDS:  # every member is a declared string column
        assert ds["train"].features[f"{f}.txt"].dtype == "string"
    assert row["subcaption.txt"] == row["json"]["subcaption"] and row["caption.txt"] == row["json"]["caption"]
    assert "`subcaption.txt`" in card and "`summary.txt`" in card

    # A copy of the folder elsewhere loads the same (nothing in the card is an absolute path).
    import shutil

    copy = tmp_path / "elsewhere" / "copy"
    shutil.copytree(out, copy)
    again = datasets.load_dataset(str(copy), cache_dir=str(tmp_path / "c2"))
    assert again["train"].num_rows == m["n_samples"]


# ----------------------------------------------------------------------------------------------
# Header verification, the header sniff and the tar writer
# ----------------------------------------------------------------------------------------------
def _with_hashes(toy: Path, dest: Path, edit: dict[int, tuple[bytes, bool]] | None = None) -> Path:
    """The toy dataset with ``crop_sha256`` recorded as decompose does; ``edit`` replaces crop ``i``
    with other bytes, recording their hash (True) or no hash (False)."""
    rows = pq.read_table(toy / "dataset.parquet").to_pylist()
    dest.mkdir(parents=True, exist_ok=True)
    for i, r in enumerate(rows):
        data = (toy / r["crop_path"]).read_bytes()
        recorded = True
        if edit and i in edit:
            data, recorded = edit[i]
        path = dest / f"{i:03d}-{Path(r['crop_path']).name}"
        path.write_bytes(data)
        r["crop_path"] = str(path)
        r["crop_sha256"] = hashlib.sha256(data).hexdigest() if recorded else None
    write_table(rows, S.DATASET, dest / "dataset.parquet")
    return dest / "dataset.parquet"


def _run(dataset: Path, out: Path, **cfg: object) -> tuple[dict, dict]:
    m = SH.shard_dataset({"splits": {"train": 1.0}, **cfg}, 5, [str(dataset)], str(out))
    return m, read_counts(out / "counts.json")


def test_verify_images_defaults_to_header() -> None:
    assert SH.ShardSettings.from_section({}).verify_images == "header"
    assert SH.ShardSettings.from_section({"verify_images": "decode"}).verify_images == "decode"


def test_header_mode_trusts_the_recorded_hash_and_decodes_crops_without_one(
    toy: Path, tmp_path: Path
) -> None:
    """A truncated crop whose bytes are the ones decompose hashed is kept under ``header`` (it was
    decoded when decompose encoded it; nothing is decoded again), and rejected under ``decode``.
    The same crop with no recorded hash is fully decoded - and rejected - whatever the setting."""
    rows = pq.read_table(toy / "dataset.parquet").to_pylist()
    png = next(i for i, r in enumerate(rows) if r["crop_path"].endswith(".png"))
    good = (toy / rows[png]["crop_path"]).read_bytes()
    truncated = good[: len(good) // 2]
    n = len(rows)

    hashed = _with_hashes(toy, tmp_path / "hashed", {png: (truncated, True)})
    m, c = _run(hashed, tmp_path / "o-header")
    assert c["kept"] == n and c["rejected"] == {} and c["extra"]["n_images_decoded"] == 0
    m, c = _run(hashed, tmp_path / "o-decode", verify_images="decode")
    assert c["kept"] == n - 1 and c["rejected"] == {"corrupt_image": 1}
    assert c["extra"]["n_images_decoded"] == n - 1  # the rejected one failed while decoding

    unhashed = _with_hashes(toy, tmp_path / "unhashed", {png: (truncated, False)})
    for mode in ("header", "decode"):
        m, c = _run(unhashed, tmp_path / f"u-{mode}", verify_images=mode)
        assert c["kept"] == n - 1 and c["rejected"] == {"corrupt_image": 1}
        # the 23 crops with a recorded hash are decoded only when asked to
        assert c["extra"]["n_images_decoded"] == (0 if mode == "header" else n - 1)
    rej = pl.read_parquet(tmp_path / "u-header" / "rejections.parquet")
    assert rej["item_id"].to_list() == [rows[png]["subfigure_uid"]]


def test_header_and_decode_give_byte_identical_shards(toy: Path, tmp_path: Path) -> None:
    dataset = _with_hashes(toy, tmp_path / "d")
    a, ca = _run(dataset, tmp_path / "a", max_samples_per_shard=7)
    b, cb = _run(dataset, tmp_path / "b", max_samples_per_shard=7, verify_images="decode")
    c, _ = _run(dataset, tmp_path / "c", max_samples_per_shard=7)
    assert ca["extra"]["n_images_decoded"] == 0 and cb["extra"]["n_images_decoded"] == 24
    shards = [s["sha256"] for s in a["splits"]["train"]["shards"]]
    assert len(shards) == 4
    assert shards == [s["sha256"] for s in b["splits"]["train"]["shards"]]
    assert shards == [s["sha256"] for s in c["splits"]["train"]["shards"]]
    for p in sorted((tmp_path / "a" / "train").glob("*.tar")):
        assert p.read_bytes() == (tmp_path / "b" / "train" / p.name).read_bytes()


def test_crop_bytes_are_hashed_once_and_image_sha256_is_the_recorded_one(
    toy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = _with_hashes(toy, tmp_path / "d")
    rows = pq.read_table(dataset).to_pylist()
    sizes = {Path(r["crop_path"]).stat().st_size for r in rows}
    hashed: list[int] = []
    real = hashlib.sha256

    def counting(data: bytes = b"", **kw: object):  # noqa: ANN202 - hashlib's own type
        if len(data) in sizes:
            hashed.append(len(data))
        return real(data, **kw)

    monkeypatch.setattr(SH, "hashlib", Namespace(sha256=counting))
    _run(dataset, tmp_path / "o")
    assert len(hashed) == len(rows)  # one pass over each crop's bytes (the tar is hashed as written)
    monkeypatch.undo()
    idx = {
        r["subfigure_uid"]: r["image_sha256"]
        for r in pq.read_table(tmp_path / "o" / "index.parquet").to_pylist()
    }
    assert idx == {r["subfigure_uid"]: r["crop_sha256"] for r in rows}


def _encode(img: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def _png_with_ihdr(data: bytes, **fields: int) -> bytes:
    """``data`` (a PNG) with IHDR fields replaced and the chunk's CRC recomputed."""
    import struct
    import zlib

    names = ("width", "height", "depth", "colour", "compression", "filter", "interlace")
    values = dict(zip(names, struct.unpack_from(">IIBBBBB", data, 16), strict=True))
    values.update(fields)
    body = b"IHDR" + struct.pack(">IIBBBBB", *(values[n] for n in names))
    return data[:12] + body + zlib.crc32(body).to_bytes(4, "big") + data[33:]


def _sniff_cases() -> dict[str, bytes]:
    import numpy as np

    rng = np.random.default_rng(0)
    photo = Image.fromarray(rng.integers(0, 255, (37, 53, 3), dtype=np.uint8))
    grey = photo.convert("L")
    cases = {
        "png-rgb": _encode(photo, "PNG"),
        "png-rgba": _encode(photo.convert("RGBA"), "PNG"),
        "png-l": _encode(grey, "PNG"),
        "png-la": _encode(photo.convert("LA"), "PNG"),
        "png-1": _encode(grey.convert("1"), "PNG"),
        "png-p": _encode(photo.convert("P"), "PNG"),
        "png-i16": _encode(grey.convert("I;16"), "PNG"),
        "png-1x1": _encode(Image.new("RGB", (1, 1)), "PNG"),
        "png-with-text": _encode(photo, "PNG", pnginfo=_pnginfo()),
        "jpeg-rgb-444": _encode(photo, "JPEG", quality=95, subsampling=0),
        "jpeg-rgb-420": _encode(photo, "JPEG", quality=75, subsampling=2),
        "jpeg-grey": _encode(grey, "JPEG"),
        "jpeg-cmyk": _encode(photo.convert("CMYK"), "JPEG"),
        "jpeg-progressive": _encode(photo, "JPEG", progressive=True),
        "jpeg-progressive-grey": _encode(grey, "JPEG", progressive=True, optimize=True),
        "jpeg-optimized": _encode(photo, "JPEG", optimize=True),
        "jpeg-restart-markers": _encode(photo, "JPEG", restart_marker_rows=1),
        "jpeg-comment-icc-exif": _encode(
            photo, "JPEG", comment=b"a comment", icc_profile=b"\x00" * 300, exif=Image.Exif().tobytes()
        ),
        "jpeg-wide": _encode(Image.new("RGB", (4000, 3)), "JPEG"),
    }
    # Sizes Pillow reports from the header alone, with no pixels behind them.
    cases["png-interlaced-header"] = _png_with_ihdr(cases["png-rgb"], interlace=1)
    cases["png-huge-header"] = _png_with_ihdr(cases["png-l"], width=123_456, height=7)
    return cases


def _pnginfo():  # noqa: ANN202
    from PIL import PngImagePlugin

    info = PngImagePlugin.PngInfo()
    info.add_text("Software", "pmcflow test")
    return info


@pytest.mark.parametrize("name", sorted(_sniff_cases()))
def test_header_sniff_agrees_with_pillow(name: str) -> None:
    data = _sniff_cases()[name]
    with Image.open(io.BytesIO(data)) as img:
        want = (img.format, *img.size)
    assert SH.sniff_image(data) == want


def test_header_sniff_agrees_with_pillow_on_real_crops(toy: Path) -> None:
    n = 0
    for path in sorted((toy / "crops").iterdir()):
        data = path.read_bytes()
        with Image.open(path) as img:
            assert SH.sniff_image(data) == (img.format, *img.size)
        n += 1
    assert n == 24


def test_header_sniff_declines_what_it_cannot_vouch_for() -> None:
    img = Image.new("RGB", (20, 10), (1, 2, 3))
    png, jpeg = _encode(img, "PNG"), _encode(img, "JPEG")
    for fmt in ("WEBP", "TIFF", "GIF", "BMP"):
        assert SH.sniff_image(_encode(img, fmt)) is None  # Pillow identifies these
    mpo = _encode(img, "MPO", save_all=True, append_images=[img.rotate(90)])
    assert SH.sniff_image(mpo) is None and Image.open(io.BytesIO(mpo)).format == "MPO"
    bad_crc = bytearray(png)
    bad_crc[30] ^= 0xFF
    bad_depth = _png_with_ihdr(png, depth=5)  # colour type 2 with depth 5 does not exist
    zero = _png_with_ihdr(png, width=0)
    for data in (b"", b"not an image", png[:8], png[:32], bytes(bad_crc), bad_depth, zero, jpeg[:2]):
        assert SH.sniff_image(data) is None
    # Frame headers Pillow refuses (12-bit samples, 2 components): no answer either.
    sof = jpeg.index(b"\xff\xc0")
    for offset, value in ((4, 12), (9, 2)):
        odd = bytearray(jpeg)
        odd[sof + offset] = value
        with pytest.raises(OSError):
            Image.open(io.BytesIO(bytes(odd)))
        assert SH.sniff_image(bytes(odd)) is None
    # A JPEG header cut anywhere before the start of scan: no answer, never a wrong one.
    sos = jpeg.index(b"\xff\xda")
    assert all(SH.sniff_image(jpeg[:k]) is None for k in range(sos))
    assert SH.sniff_image(jpeg[: sos + 4]) == ("JPEG", 20, 10)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_header_sniff_never_contradicts_pillow_on_mutated_headers() -> None:
    """Seeded single-byte mutations of PNG and JPEG headers: whenever the sniff answers and Pillow
    opens the file, both report the same format and size."""
    import random

    rnd = random.Random(7)
    cases = _sniff_cases()
    n_answered = 0
    for name in ("png-rgb", "jpeg-rgb-444", "jpeg-progressive", "jpeg-comment-icc-exif", "jpeg-cmyk"):
        base = cases[name]
        head = base.index(b"IDAT") if name.startswith("png") else base.index(b"\xff\xda") + 4
        for _ in range(150):
            data = bytearray(base)
            data[rnd.randrange(head)] = rnd.randrange(256)
            got = SH.sniff_image(bytes(data))
            if got is None:
                continue
            n_answered += 1
            try:
                with Image.open(io.BytesIO(bytes(data))) as img:
                    want = (img.format, *img.size)
            except Exception:  # noqa: BLE001 - Pillow refusing is fine; contradicting is not
                continue
            assert got == want, name
    assert n_answered > 100


def test_prepare_image_header_and_decode() -> None:
    img = Image.new("RGB", (30, 20), (9, 9, 9))
    png = _encode(img, "PNG")
    p = SH.prepare_image(png, verify="header")
    assert (p.ext, p.source_format, p.width, p.height, p.decoded, p.reencoded) == (
        "png",
        "PNG",
        30,
        20,
        False,
        False,
    )
    assert p.data is png
    assert SH.prepare_image(png).decoded  # the function's own default decodes
    # Header mode identifies; only decoding notices the missing pixel data.
    assert SH.prepare_image(png[:60], verify="header").width == 30
    with pytest.raises(SH.ImageReject, match="corrupt_image"):
        SH.prepare_image(png[:60], verify="decode")
    with pytest.raises(SH.ImageReject) as exc:
        SH.prepare_image(png, verify="header", max_pixels=599)
    assert exc.value.reason == "image_too_large"
    # Formats the sniff leaves alone: WEBP identified by Pillow, TIFF re-encoded (so decoded).
    webp = SH.prepare_image(_encode(img, "WEBP"), verify="header")
    assert (webp.ext, webp.decoded) == ("webp", False)
    tif = SH.prepare_image(_encode(img, "TIFF"), verify="header")
    assert (tif.ext, tif.source_format, tif.reencoded, tif.decoded) == ("png", "TIFF", True, True)


@pytest.mark.parametrize(
    ("name", "size", "mtime"),
    [
        ("a.json", 0, 0),
        ("PMC1_1_F1_s0-0123456789.png", 123_457, 0),
        ("x" * 96 + ".txt", 511, 1_700_000_000),  # exactly 100 bytes
        ("é-ü.txt", 512, 7),
        ("y" * 120 + ".json", 10, 0),  # a GNU long name: through tarfile
        ("big.png", 9 * 2**30, 0),  # beyond 11 octal digits: through tarfile
    ],
)
def test_tar_header_is_what_tarfile_writes(name: str, size: int, mtime: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.uname, info.gname = size, mtime, 0o644, "", ""
    assert SH.tar_header(name, size, mtime) == info.tobuf(
        tarfile.GNU_FORMAT, tarfile.ENCODING, "surrogateescape"
    )


def _members(n: int) -> list[tuple[str, bytes]]:
    import random

    rnd = random.Random(n)
    return [
        (f"k{i:04d}.{ext}", rnd.randbytes(rnd.randrange(0, 3000)))
        for i in range(n)
        for ext in ("png", "json")
    ]


def test_atomic_tar_writer_matches_tarfile_and_accounts_exactly(tmp_path: Path) -> None:
    members = _members(40)
    ref = io.BytesIO()
    with tarfile.open(fileobj=ref, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uname, info.gname = len(data), 0o644, "", ""
            tf.addfile(info, io.BytesIO(data))
    w = SH.AtomicTarWriter(tmp_path / "t.tar")
    for name, data in members:
        w.add(name, data)
    assert w.members_bytes == sum(SH.tar_member_size(len(d)) for _, d in members)
    assert not (tmp_path / "t.tar").exists()  # only the hidden temporary, until commit
    sha, size = w.commit()
    out = (tmp_path / "t.tar").read_bytes()
    assert out == ref.getvalue()
    assert size == len(out) == SH.tar_file_size(w.members_bytes) and sha == hashlib.sha256(out).hexdigest()
    assert [p.name for p in tmp_path.iterdir()] == ["t.tar"]


def test_atomic_tar_writer_survives_partial_writes_and_aborts_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    members = _members(30)
    w = SH.AtomicTarWriter(tmp_path / "full.tar")
    for name, data in members:
        w.add(name, data)
    w.commit()
    real = SH.os.writev
    calls = {"n": 0}

    def short_writev(fd: int, bufs: list) -> int:  # the kernel may write less than asked
        calls["n"] += 1
        data = b"".join(bytes(b) for b in bufs)
        return real(fd, [data[: max(1, len(data) // 3 - 17)]])

    monkeypatch.setattr(SH.os, "writev", short_writev)
    monkeypatch.setattr(SH.AtomicTarWriter, "FLUSH_BYTES", 4096)
    w = SH.AtomicTarWriter(tmp_path / "short.tar")
    for name, data in members:
        w.add(name, data)
    sha, size = w.commit()
    assert calls["n"] > 20
    assert (tmp_path / "short.tar").read_bytes() == (tmp_path / "full.tar").read_bytes()
    w = SH.AtomicTarWriter(tmp_path / "aborted.tar")
    w.add("a.txt", b"x" * 10_000)
    w.abort()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full.tar", "short.tar"]


def test_atomic_tar_writer_joins_small_members_and_passes_large_ones_as_they_are(tmp_path: Path) -> None:
    """Samples whose members straddle JOIN_BYTES (joined with their headers into one buffer, or
    handed on as they are), zero-length members and a GNU long name: still tarfile's bytes."""
    import random

    rnd = random.Random(5)
    big = SH.AtomicTarWriter.JOIN_BYTES
    lengths = [0, 1, 511, 512, 513, big - 1, big, big + 1, 3 * big + 7, 300_000]
    samples = []
    for i in range(12):
        exts = ["png", "json", "txt", "caption.txt"] + (["x" * 110 + ".txt"] if i == 3 else [])
        samples.append((f"k{i:03d}", [(e, rnd.randbytes(rnd.choice(lengths))) for e in exts]))
    ref = io.BytesIO()
    with tarfile.open(fileobj=ref, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for key, members in samples:
            for ext, data in members:
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size, info.mode, info.uname, info.gname = len(data), 0o644, "", ""
                tf.addfile(info, io.BytesIO(data))
    w = SH.AtomicTarWriter(tmp_path / "t.tar")
    for key, members in samples:
        w.add_sample(key, members)
    sha, size = w.finish()
    assert not (tmp_path / "t.tar").exists()  # finished, not yet published
    w.publish()
    out = (tmp_path / "t.tar").read_bytes()
    assert out == ref.getvalue() and w.count == len(samples)
    assert size == len(out) and sha == hashlib.sha256(out).hexdigest()


@pytest.mark.parametrize("mtime", [0, 1_700_000_000])
def test_atomic_tar_writer_sample_headers_are_tarfiles_for_any_key(tmp_path: Path, mtime: int) -> None:
    """add_sample puts a sample's headers together from its key and member names encoded once: the
    bytes tarfile writes for non-ASCII keys, names of exactly 100 bytes, longer ones (GNU long
    names, through tarfile) and a name repeated across samples, at any mtime."""
    ext = ["png", "json", "txt", "caption.txt"]
    keys = ["k0", "Caf\u00e9-\u00fc", "x" * (100 - len(".caption.txt")), "y" * 95, "z" * 130, "k0"]
    samples = [
        (key, [(e, bytes([i]) * (i * 97 + j)) for j, e in enumerate(ext)]) for i, key in enumerate(keys)
    ]
    ref = io.BytesIO()
    with tarfile.open(fileobj=ref, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for key, members in samples:
            for e, data in members:
                info = tarfile.TarInfo(f"{key}.{e}")
                info.size, info.mtime, info.mode, info.uname, info.gname = len(data), mtime, 0o644, "", ""
                tf.addfile(info, io.BytesIO(data))
    w = SH.AtomicTarWriter(tmp_path / "t.tar", mtime)
    for key, members in samples:
        w.add_sample(key, members)
    sha, size = w.commit()
    out = (tmp_path / "t.tar").read_bytes()
    assert out == ref.getvalue() and size == len(out) == SH.tar_file_size(w.members_bytes)
    assert sha == hashlib.sha256(out).hexdigest()


@pytest.mark.parametrize("stage", ["one pass", "chunk"])
def test_a_failed_publish_fails_the_run_and_leaves_nothing(
    toy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    """Tars are fsynced and renamed on a background thread while the next one is written: an error
    there (a full disk at fsync) fails the run as it would in the foreground, and neither a shards
    folder nor a temporary file is left."""
    real = SH.AtomicTarWriter.publish
    calls = {"n": 0}

    def failing(self: SH.AtomicTarWriter) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        real(self)

    monkeypatch.setattr(SH.AtomicTarWriter, "publish", failing)
    out = tmp_path / "s"
    conf = {"splits": {"train": 1.0}, "max_samples_per_shard": 4}
    with pytest.raises(OSError, match="No space left"):
        if stage == "one pass":
            SH.shard_dataset(conf, 1, [str(toy / "dataset.parquet")], str(out), base_dir=str(toy))
        else:
            SH.shard_chunk(conf, 1, [toy / "dataset.parquet"], out, chunk="c000000", base_dir=toy)
    assert calls["n"] >= 2
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == []


def test_field_text_is_the_cleaned_text_with_whitespace_collapsed() -> None:
    """field_text's shortcut for clean ASCII text gives what cleaning and collapsing would."""
    from pmcflow.textclean import clean_text

    values = [
        "", " ", "a", "a b", "a  b", " a", "a ", "a\tb", "a\nb", "a\x1fb", "a\x85b", "Caf\u00e9  x",
        "e\u0301", "x\r\ny", "\u00a0a", "a\u2003b", "plain text, no runs.", 12, 1.5, True,
    ]  # fmt: skip
    for v in values:
        assert SH.field_text(v) == " ".join((clean_text(str(v)) or "").split()), repr(v)
    assert SH.field_text(None) == ""


def test_read_file_reads_what_open_reads(tmp_path: Path) -> None:
    for i, n in enumerate((0, 1, 4096, 1 << 20, (1 << 20) + 3)):
        p = tmp_path / f"f{i}"
        p.write_bytes(bytes(range(256)) * (n // 256) + b"x" * (n % 256))
        assert SH._read_file(str(p)) == p.read_bytes()
    with pytest.raises(FileNotFoundError):
        SH._read_file(str(tmp_path / "missing"))
    with pytest.raises(IsADirectoryError):
        SH._read_file(str(tmp_path))


# ------------------------------------------------------------------------------------------------
# Per-chunk shards and the global step (the workflow's rules shard_chunk and shard)
# ------------------------------------------------------------------------------------------------
def _two_chunks(toy: Path, tmp_path: Path) -> list[Path]:
    """The toy rows split by article into two chunk tables, as the workflow's chunks are."""
    table = pq.read_table(toy / "dataset.parquet")
    pmcids = sorted(set(table.column("pmcid").to_pylist()))
    first = set(pmcids[: len(pmcids) // 2])
    paths = []
    for i, keep in enumerate((True, False)):
        mask = pa.array([(p in first) == keep for p in table.column("pmcid").to_pylist()])
        path = tmp_path / f"c00000{i}.parquet"
        pq.write_table(table.filter(mask), path)
        paths.append(path)
    return paths


def test_chunks_then_assemble_hold_the_same_samples_as_one_pass(toy: Path, tmp_path: Path) -> None:
    import webdataset as wds

    conf = {"splits": SPLITS, "max_samples_per_shard": 5}
    paths = _two_chunks(toy, tmp_path)
    parts = [tmp_path / "parts" / f"c00000{i}" for i in range(2)]
    for i, (path, part) in enumerate(zip(paths, parts, strict=True)):
        rec = SH.shard_chunk(conf, 11, [path], part, chunk=f"c00000{i}", base_dir=toy)
        assert read_counts(part / "counts.json")["in"] == pq.read_metadata(path).num_rows == rec["n_in"]
    m = SH.assemble_shards(conf, 11, parts, paths, tmp_path / "shards")
    one = _shard(toy, tmp_path / "one")
    # The same samples in the same splits (the split depends on the article alone), same image bytes.
    cols = ["key", "split", "image_sha256", "text"]
    a = pl.read_parquet(tmp_path / "shards" / "index.parquet").select(cols).sort("key")
    b = pl.read_parquet(tmp_path / "one" / "index.parquet").select(cols).sort("key")
    assert a.equals(b) and m["n_samples"] == one["n_samples"]
    assert read_counts(tmp_path / "shards" / "counts.json")["in"] == one["n_in"]
    for split, info in m["splits"].items():
        names = [sh["name"] for sh in info["shards"]]
        assert all(n.startswith(f"{split}-c00000") for n in names)
        sizes = json.loads((tmp_path / "shards" / split / "sizes.json").read_text())
        assert list(sizes) == names and sum(sizes.values()) == info["n_samples"]
        # open_clip / webdataset read the manifest's urls (one brace pattern per chunk, '::') as-is.
        if info["urls"]:
            keys = [s["__key__"] for s in wds.WebDataset(info["urls"], shardshuffle=False)]
            assert sorted(keys) == sorted(a.filter(pl.col("split") == split)["key"].to_list())
        for sh in info["shards"]:  # linked, not copied: the chunk's file itself
            got = tmp_path / "shards" / split / sh["name"]
            src = next(p for p in parts if (p / split / sh["name"]).is_file()) / split / sh["name"]
            assert got.stat().st_ino == src.stat().st_ino and _sha(got) == sh["sha256"]
    # A chunk that changes rewrites only its own shards; the global step gives the same bytes again.
    before = {p: (p.stat().st_ino, _sha(p)) for p in sorted(parts[0].rglob("*")) if p.is_file()}
    SH.shard_chunk(conf, 11, [paths[1]], parts[1], chunk="c000001", base_dir=toy)
    assert {p: (p.stat().st_ino, _sha(p)) for p in sorted(parts[0].rglob("*")) if p.is_file()} == before
    SH.assemble_shards(conf, 11, parts, paths, tmp_path / "again")
    for name in ("manifest.json", "index.parquet", "counts.json", "train/sizes.json"):
        got = (tmp_path / "again" / name).read_text(errors="replace").replace(str(tmp_path / "again"), "X")
        want = (tmp_path / "shards" / name).read_text(errors="replace").replace(str(tmp_path / "shards"), "X")
        assert got == want, name
    with pytest.raises(SH.ShardConfigError, match="chunk name"):
        SH.shard_chunk(conf, 11, [paths[0]], tmp_path / "bad", chunk="a/b", base_dir=toy)


def test_assemble_writes_the_chunks_index_as_their_rows_would_be(toy: Path, tmp_path: Path) -> None:
    """assemble_shards concatenates the chunks' index tables (no round trip through Python rows):
    the bytes writing their rows gives, the same article counts; a chunk index of another layout
    (a column missing) goes through rows, the column null."""
    conf = {"splits": SPLITS, "max_samples_per_shard": 5}
    paths = _two_chunks(toy, tmp_path)
    parts = [tmp_path / "parts" / f"c00000{i}" for i in range(2)]
    for i, (path, part) in enumerate(zip(paths, parts, strict=True)):
        SH.shard_chunk(conf, 11, [path], part, chunk=f"c00000{i}", base_dir=toy)
    m = SH.assemble_shards(conf, 11, parts, paths, tmp_path / "a")
    rows = [r for part in parts for r in pq.read_table(part / "index.parquet").to_pylist()]
    write_table(rows, S.SHARD_INDEX, tmp_path / "rows.parquet")
    assert (tmp_path / "a" / "index.parquet").read_bytes() == (tmp_path / "rows.parquet").read_bytes()
    assert m["n_articles"] == {n: len({r["pmcid"] for r in rows if r["split"] == n}) for n in SPLITS}
    n0 = pq.read_metadata(parts[0] / "index.parquet").num_rows
    old = pq.read_table(parts[1] / "index.parquet").drop_columns(["modality"])
    pq.write_table(old, parts[1] / "index.parquet")
    SH.assemble_shards(conf, 11, parts, paths, tmp_path / "b")
    got = pq.read_table(tmp_path / "b" / "index.parquet")
    assert got.num_rows == len(rows) and got.column("modality").to_pylist()[n0:] == [None] * (len(rows) - n0)
    assert got.drop_columns(["modality"]).to_pylist() == [
        {k: v for k, v in r.items() if k != "modality"} for r in rows
    ]


def test_read_dataset_and_rows_are_what_read_table_and_to_pylist_give(toy: Path, tmp_path: Path) -> None:
    """Parquet files are read through pq.ParquetFile (no pyarrow.dataset import), a folder through
    pq.read_table; rows are converted column by column: the same tables and dicts either way."""
    paths = _two_chunks(toy, tmp_path)
    want = pa.concat_tables([pq.read_table(p) for p in paths], promote_options="default")
    assert SH.read_dataset(paths).equals(want)
    folder = tmp_path / "folder"
    folder.mkdir()
    for p in paths:
        (folder / p.name).write_bytes(p.read_bytes())
    assert SH._read_parquet(folder).num_rows == want.num_rows
    with pytest.raises(FileNotFoundError, match="missing.parquet"):  # pq.read_table's error, as before
        SH.read_dataset([tmp_path / "missing.parquet"])
    table = pa.table(
        {
            "s": ["a", None, "c\u00e9"],
            "i": [1, None, 3],
            "l": [[1.5, 2.0], None, []],
            "st": [{"x": 1, "y": "b"}, None, {"x": None, "y": None}],
        }
    )
    order = [2, 0, 1]
    assert list(SH._rows(table, order, batch=2)) == table.take(pa.array(order)).to_pylist()
    assert list(SH._rows(want, list(range(want.num_rows)))) == want.to_pylist()


def test_evaluation_reads_only_its_subset_of_a_split(toy: Path, tmp_path: Path) -> None:
    """evaluate / best-epoch selection decode only the seeded max_pairs subset of a split (memory
    bounded by max_pairs), and it is the subset a full read followed by seeded_subset gives."""
    import io
    import tarfile

    from pmcflow.encoders.evaluate import read_split
    from pmcflow.seeding import seeded_subset

    out = tmp_path / "shards"
    _shard(toy, out)
    full = read_split(out, "train")
    assert len(full) > 6
    keep = seeded_subset(5, "eval", [s["key"] for s in full], 4)
    sub = read_split(out, "train", max_pairs=4, seed=5)
    assert [s["key"] for s in sub] == [full[i]["key"] for i in keep]
    assert [s["text"] for s in sub] == [full[i]["text"] for i in keep]
    assert read_split(out, "train", max_pairs=len(full) + 1, seed=5)[-1]["key"] == full[-1]["key"]
    # A sample outside the subset is never decoded: break one image's bytes and read again.
    victim = next(s["key"] for i, s in enumerate(full) if i not in set(keep))
    for tar_path in sorted((out / "train").glob("*.tar")):
        with tarfile.open(tar_path) as tf:
            members = [(m, tf.extractfile(m).read()) for m in tf.getmembers()]
        if not any(m.name.startswith(victim + ".") for m, _ in members):
            continue
        with tarfile.open(tar_path, "w") as tf:
            for m, data in members:
                if m.name.startswith(victim + ".") and m.name.rsplit(".", 1)[1] in ("jpg", "png", "webp"):
                    data = b"not an image"
                    m.size = len(data)
                tf.addfile(m, io.BytesIO(data))
    assert [s["key"] for s in read_split(out, "train", max_pairs=4, seed=5)] == [s["key"] for s in sub]
    with pytest.raises(Exception):  # noqa: B017 - the full read does decode the broken image
        read_split(out, "train")
