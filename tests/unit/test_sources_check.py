"""Sources files with datasets, licences and splits; `pmcflow sources check`; per-split render pools.

Everything runs offline on small source folders built in ``tmp_path`` from the public-domain NCI
micrographs shipped in ``pmcflow/data/panels`` (copied whole, and as crops saved as PNG), plus a
corrupt file and a too-small one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

from pmcflow import cli as pmcflow_cli
from pmcflow.synth import sourcecheck
from pmcflow.synth.render import merge_shards, render
from pmcflow.synth.sourcecheck import check_sources, format_report
from pmcflow.synth.sources import (
    PANELS_DIR,
    SourcesFileError,
    load_sources_file,
    parse_sources,
    pool_for_split,
    pool_from_config,
)

PANELS = sorted(PANELS_DIR.glob("*.jpg"))


def _real_images(d: Path, n: int, offset: int = 0) -> list[str]:
    """``n`` real images in ``d``: the shipped JPEGs, then distinct crops of them as PNG."""
    d.mkdir(parents=True, exist_ok=True)
    names = []
    for k in range(n):
        src = PANELS[(k + offset) % len(PANELS)]
        if k < len(PANELS) and offset == 0:
            names.append(src.name)
            shutil.copyfile(src, d / src.name)
            continue
        with Image.open(src) as im:
            x = (37 * (k + offset)) % (im.width - 200)  # inside the image
            crop = im.convert("RGB").crop((x, 10, x + 200, 170))
        name = f"crop{k + offset:02d}.png"
        crop.save(d / name)
        names.append(name)
    return names


def _bad_images(d: Path) -> None:
    """One corrupt file and one image below the 32 px minimum."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"not really a png" * 8)
    with Image.open(PANELS[0]) as im:
        im.convert("RGB").resize((20, 14)).save(d / "tiny.png")


def _write_yaml(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A sources folder with train and val datasets for two modalities and a datasets file."""
    root = tmp_path / "site"
    _real_images(root / "micro_train", 3)
    _bad_images(root / "micro_train")  # 3 usable + corrupt + tiny
    _real_images(root / "micro_val", 2, offset=10)
    _real_images(root / "histo_train", 2, offset=20)
    _real_images(root / "histo_val_a", 1, offset=30)
    _real_images(root / "histo_val_b", 1, offset=40)
    _write_yaml(
        root / "sources.yaml",
        """\
datasets:
  micro-train:
    modality: microscopy
    path: micro_train
    licence: public domain
    splits: [train]
    url: https://visualsonline.cancer.gov/
  micro-val: {modality: microscopy, path: micro_val, licence: "CC0 1.0", splits: [val, holdout]}
  histo-train: {modality: histopathology, path: [histo_train], licence: CC BY 4.0, splits: train}
  histo-val: {modality: histopathology, path: [histo_val_a, histo_val_b], licence: CC BY-NC 4.0, splits: [holdout, val]}
""",
    )
    return root


# ---------------------------------------------------------------------------------- parsing


def test_datasets_format_parses(site):
    spec = load_sources_file(site / "sources.yaml")
    assert not spec.legacy and spec.origin == str(site / "sources.yaml")
    by = {d.name: d for d in spec.datasets}
    assert sorted(by) == ["histo-train", "histo-val", "micro-train", "micro-val"]
    assert by["micro-train"].paths == (site / "micro_train",)  # relative to the file
    assert by["histo-val"].paths == (site / "histo_val_a", site / "histo_val_b")
    assert by["histo-train"].splits == ("train",)  # one split as a string
    assert by["histo-val"].splits == ("val", "holdout")  # canonical order
    assert (
        by["micro-val"].licence == "CC0 1.0" and by["micro-train"].url == "https://visualsonline.cancer.gov/"
    )
    assert spec.modalities == ["histopathology", "microscopy"]
    assert [d.name for d in spec.for_split("val")] == ["histo-val", "micro-val"]
    assert [d.name for d in spec.for_split("train")] == ["histo-train", "micro-train"]
    assert spec.coverage_problems(["train", "val", "holdout"]) == []


@pytest.mark.parametrize(
    "entry, expected",
    [
        ("{modality: radiology, licence: CC BY 4.0, splits: [train]}", "dataset 'roco': missing 'path'"),
        (
            "{modality: radiology, path: x, licence: CC BY 4.0, splits: [train, test]}",
            "dataset 'roco': unknown split 'test' in 'splits'",
        ),
        ("{modality: radiology, path: x, splits: [train]}", "dataset 'roco': missing 'licence'"),
        (
            "{modality: radiology, path: x, licence: '  ', splits: [train]}",
            "dataset 'roco': missing 'licence'",
        ),
        (
            "{modality: radiology, path: x, license: MIT, splits: [train]}",
            "dataset 'roco': unknown key 'license' (did you mean 'licence'?)",
        ),
        ("{modality: radiology, path: x, licence: MIT}", "dataset 'roco': missing 'splits'"),
        ("{path: x, licence: MIT, splits: [val]}", "dataset 'roco': missing 'modality'"),
        (
            "{modality: radiology, path: [], licence: MIT, splits: [val]}",
            "dataset 'roco': 'path' must be a non-empty path",
        ),
        ("[radiology, x]", "dataset 'roco': expected a mapping"),
    ],
)
def test_bad_dataset_entries_name_the_dataset_and_key(tmp_path, entry, expected):
    f = _write_yaml(tmp_path / "bad.yaml", f"datasets:\n  roco: {entry}\n")
    with pytest.raises(SourcesFileError) as e:
        load_sources_file(f)
    assert any(p.startswith(expected) for p in e.value.problems), e.value.problems
    assert str(f) in str(e.value)


def test_every_problem_of_a_file_is_reported_at_once(tmp_path):
    f = _write_yaml(
        tmp_path / "bad.yaml",
        "datasets:\n  a: {modality: x, path: p, splits: [train]}\n  b: {modality: x, path: p, licence: L, splits: [tests]}\nextra: 1\n",
    )
    with pytest.raises(SourcesFileError) as e:
        load_sources_file(f)
    assert e.value.problems == [
        "top level: unknown key 'extra' (allowed: datasets, description)",
        "dataset 'a': missing 'licence' (the licence of its images, e.g. \"CC BY 4.0\")",
        "dataset 'b': unknown split 'tests' in 'splits' (use train, val, holdout)",
    ]


def test_invalid_yaml_and_empty_file(tmp_path):
    with pytest.raises(SourcesFileError, match="not valid YAML"):
        load_sources_file(_write_yaml(tmp_path / "a.yaml", "datasets: {a: [\n"))
    with pytest.raises(SourcesFileError, match="the file is empty"):
        load_sources_file(_write_yaml(tmp_path / "b.yaml", ""))


def test_a_split_without_a_dataset_for_a_modality_is_refused(site):
    text = (site / "sources.yaml").read_text().replace("splits: [holdout, val]", "splits: [holdout]")
    spec = load_sources_file(_write_yaml(site / "gap.yaml", text))
    assert spec.coverage_problems(["train", "holdout"]) == []
    problems = spec.coverage_problems(["val"])
    assert problems == [
        "split 'val': modality 'histopathology' has no dataset (it has only histo-train [train], histo-val [holdout])"
    ]
    with pytest.raises(SourcesFileError, match="split 'val': modality 'histopathology' has no dataset"):
        pool_for_split(spec, "val", max_side=256)
    pool_for_split(spec, "holdout", max_side=256)  # the other splits still render
    report = check_sources(spec, ["val"], max_side=256)
    assert not report["ok"] and problems[0] in report["problems"]


def test_a_datasets_pool_needs_a_known_split(site):
    spec = load_sources_file(site / "sources.yaml")
    with pytest.raises(SourcesFileError, match="give the split"):
        pool_for_split(spec, None)
    with pytest.raises(SourcesFileError, match="unknown split 'test'"):
        pool_for_split(spec, "test")


def test_same_source_id_from_two_paths_is_refused(tmp_path):
    _real_images(tmp_path / "a" / "imgs", 1)
    _real_images(tmp_path / "b" / "imgs", 1)
    spec = parse_sources(
        {
            "datasets": {
                "d": {"modality": "m", "path": ["a/imgs", "b/imgs"], "licence": "L", "splits": ["train"]}
            }
        },
        base=tmp_path,
    )
    with pytest.raises(SourcesFileError, match="two paths give the same source id 'd:imgs/"):
        pool_for_split(spec, "train")
    assert any("same source id" in p for p in check_sources(spec, ["train"])["problems"])


# ---------------------------------------------------------------------------------- check


def test_check_counts_usable_and_rejected_per_dataset_and_modality(site):
    report = check_sources(load_sources_file(site / "sources.yaml"), max_side=256)
    assert report["ok"], report["problems"]
    assert report["format"] == "datasets" and report["splits"] == ["train", "val", "holdout"]
    mt = report["datasets"]["micro-train"]
    assert (mt["files"], mt["usable"], mt["rejected"]) == (5, 3, {"corrupt": 1, "too_small": 1})
    assert mt["licence"] == "public domain" and mt["splits"] == ["train"]
    assert [e["source_id"] for e in mt["rejected_examples"]] == [
        "micro-train:micro_train/corrupt.png",
        "micro-train:micro_train/tiny.png",
    ]
    assert (report["datasets"]["histo-val"]["files"], report["datasets"]["histo-val"]["usable"]) == (2, 2)
    assert report["images_checked"] == 5 + 2 + 2 + 2
    rows = report["split_modalities"]
    assert rows["train"]["microscopy"] == {"datasets": ["micro-train"], "files": 5, "usable": 3}
    assert rows["val"]["histopathology"] == {"datasets": ["histo-val"], "files": 2, "usable": 2}
    assert rows["holdout"]["microscopy"] == {"datasets": ["micro-val"], "files": 2, "usable": 2}
    text = format_report(report)
    assert "micro-train" in text and "corrupt 1, too_small 1" in text and "CC BY-NC 4.0" in text
    assert text.rstrip().endswith("OK: every split checked has usable images of every modality")


def test_check_fails_when_a_needed_split_modality_has_no_usable_image(site):
    for p in (site / "micro_val").iterdir():
        p.unlink()
    _bad_images(site / "micro_val")  # only a corrupt and a tiny image left for val/holdout microscopy
    spec = load_sources_file(site / "sources.yaml")
    report = check_sources(spec, max_side=256)
    assert not report["ok"]
    assert "split 'val', modality 'microscopy': no usable image (datasets: micro-val)" in report["problems"]
    assert (
        "split 'holdout', modality 'microscopy': no usable image (datasets: micro-val)" in report["problems"]
    )
    assert "dataset 'micro-val': none of its 2 images is usable" in report["problems"]
    assert report["datasets"]["micro-val"]["rejected"] == {"corrupt": 1, "too_small": 1}
    assert check_sources(spec, ["train"], max_side=256)["ok"]  # the train split alone is fine


def test_check_fails_on_a_missing_path(site):
    shutil.rmtree(site / "histo_val_b")
    report = check_sources(load_sources_file(site / "sources.yaml"), max_side=256)
    assert not report["ok"]
    assert report["problems"] == [f"dataset 'histo-val': path does not exist: {site / 'histo_val_b'}"]
    assert report["datasets"]["histo-val"]["files"] == 1  # the other path is still checked


def test_workers_give_the_same_report(site, monkeypatch):
    monkeypatch.setattr(sourcecheck, "CHUNK", 2)  # several chunks per dataset, merged out of order
    spec = load_sources_file(site / "sources.yaml")
    assert check_sources(spec, max_side=256, workers=2) == check_sources(spec, max_side=256, workers=1)


def test_cli_json_and_exit_status(site, capsys):
    f = str(site / "sources.yaml")
    assert pmcflow_cli.main(["sources", "check", f, "--json", "--size", "256"]) == 0
    out = capsys.readouterr().out
    report = json.loads(out)  # one JSON object and nothing else on stdout
    assert report == check_sources(load_sources_file(f), max_side=256)
    assert pmcflow_cli.main(["sources", "check", f, "--split", "val", "--json", "--size", "256"]) == 0
    assert json.loads(capsys.readouterr().out)["splits"] == ["val"]

    _bad_images(site / "histo_bad")
    text = (site / "sources.yaml").read_text().replace("path: [histo_train]", "path: [histo_bad]")
    bad = str(_write_yaml(site / "bad.yaml", text))
    assert pmcflow_cli.main(["sources", "check", bad, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert (
        report["ok"] is False
        and "split 'train', modality 'histopathology': no usable image (datasets: histo-train)"
        in report["problems"]
    )
    assert pmcflow_cli.main(["sources", "check", bad]) == 1
    assert "FAILED: 2 problems" in capsys.readouterr().out

    invalid = str(
        _write_yaml(site / "invalid.yaml", "datasets:\n  x: {modality: m, path: p, splits: [train]}\n")
    )
    assert pmcflow_cli.main(["sources", "check", invalid, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["problems"] == [
        "dataset 'x': missing 'licence' (the licence of its images, e.g. \"CC BY 4.0\")"
    ]
    assert pmcflow_cli.main(["sources", "check", invalid]) == 1
    assert "dataset 'x': missing 'licence'" in capsys.readouterr().err


# ---------------------------------------------------------------------------------- render


def _annotations(d: Path) -> dict:
    return json.loads((d / "annotations.json").read_text())


def test_render_draws_each_split_only_from_its_datasets(site, tmp_path):
    spec = load_sources_file(site / "sources.yaml")
    val_sets, train_sets = {"micro-val", "histo-val"}, {"micro-train", "histo-train"}
    for split, allowed in (("val", val_sets), ("holdout", val_sets), ("train", train_sets)):
        out = tmp_path / split
        counts = render(12, 5, out, size=160, sources=spec, split=split)
        assert counts["kept"] == 12
        coco = _annotations(out)
        assert coco["info"]["split"] == split
        assert {a["dataset"] for a in coco["annotations"]} == allowed  # both modalities drawn, nothing else
        assert {d["name"] for d in coco["datasets"]} == allowed
        lic = {x["id"]: x["name"] for x in coco["licenses"]}
        by_name = {d["name"]: d for d in coco["datasets"]}
        for a in coco["annotations"]:
            assert lic[a["license"]] == by_name[a["dataset"]]["licence"]
        ids = [
            p["source_id"]
            for line in (out / "records.jsonl").read_text().splitlines()
            for p in json.loads(line)["spec"]["panels"]
        ]
        assert {sid.split(":", 1)[0] for sid in ids} == allowed
        sources = json.loads((out / "sources.json").read_text())
        assert sources["split"] == split and set(sources["datasets"]) == allowed
    # the train pool's bad files are recorded, never drawn
    rejected = {sid for sid in ids if sid.endswith(("corrupt.png", "tiny.png"))}
    assert not rejected


def test_render_shards_of_a_split_merge_with_their_provenance(site, tmp_path):
    spec = load_sources_file(site / "sources.yaml")
    render(6, 2, tmp_path / "whole", size=128, sources=spec, split="val")
    for k in range(2):
        render(6, 2, tmp_path / f"s{k}", size=128, sources=spec, split="val", shard=k, num_shards=2)
    merge_shards([tmp_path / "s1", tmp_path / "s0"], tmp_path / "merged")
    whole, merged = _annotations(tmp_path / "whole"), _annotations(tmp_path / "merged")
    for key in ("annotations", "licenses", "datasets"):
        assert merged[key] == whole[key]
    render(2, 2, tmp_path / "t0", size=128, sources=spec, split="train", shard=0, num_shards=2)
    with pytest.raises(ValueError, match="different settings"):  # a train shard among val shards
        merge_shards([tmp_path / "s0", tmp_path / "t0"], tmp_path / "bad")


def _files(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_old_format_gives_every_split_the_same_unchanged_pool(site, tmp_path):
    f = _write_yaml(site / "old.yaml", "microscopy: [micro_train, micro_val]\nhistopathology: histo_train\n")
    spec = load_sources_file(f)
    assert spec.legacy and [d.name for d in spec.datasets] == ["microscopy", "histopathology"]
    assert all(d.splits == ("train", "val", "holdout") and d.licence is None for d in spec.datasets)
    mapping = {
        "microscopy": [str(site / "micro_train"), str(site / "micro_val")],
        "histopathology": [str(site / "histo_train")],
    }
    # the pool the render used before this format existed, with the same ids
    old = pool_from_config(mapping, max_side=160)
    for split in (None, "train", "val"):
        new = pool_for_split(spec, split, max_side=160)
        assert {m: [r.source_id for r in refs] for m, refs in new.refs.items()} == {
            m: [r.source_id for r in refs] for m, refs in old.refs.items()
        }
        assert not new.datasets and new.split is None
    render(5, 9, tmp_path / "old_api", size=160, sources=mapping)
    render(5, 9, tmp_path / "file_val", size=160, sources=spec, split="val")
    render(5, 9, tmp_path / "file_none", size=160, sources=spec)
    render(5, 9, tmp_path / "paths", size=160, sources={m: [Path(p) for p in v] for m, v in mapping.items()})
    ref = _files(tmp_path / "old_api")
    assert _files(tmp_path / "file_val") == ref and _files(tmp_path / "file_none") == ref
    assert _files(tmp_path / "paths") == ref  # Path objects in a mapping, as the API allowed
    coco = json.loads(ref["annotations.json"])
    assert coco["licenses"] == [] and "datasets" not in coco and "split" not in coco["info"]
    assert all("dataset" not in a and "license" not in a for a in coco["annotations"])
    report = check_sources(spec, max_side=160)
    assert report["ok"] and report["format"] == "modalities" and report["warnings"]
    assert report["datasets"]["microscopy"]["files"] == 7 and report["datasets"]["microscopy"]["usable"] == 5


def test_builtin_pool_render_ignores_the_split(tmp_path):
    render(2, 4, tmp_path / "a", size=128)
    render(2, 4, tmp_path / "b", size=128, split="holdout")
    assert _files(tmp_path / "a") == _files(tmp_path / "b")


def test_render_cli_needs_a_split_for_a_datasets_file(site, tmp_path, capsys):
    f = str(site / "sources.yaml")
    assert pmcflow_cli.main(["render", "--n", "2", "--out", str(tmp_path / "x"), "--sources", f]) == 1
    assert "give the split" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()  # nothing written
    assert (
        pmcflow_cli.main(
            [
                "render",
                "--n",
                "2",
                "--size",
                "128",
                "--out",
                str(tmp_path / "v"),
                "--sources",
                f,
                "--split",
                "val",
            ]
        )
        == 0
    )
    assert {a["dataset"] for a in _annotations(tmp_path / "v")["annotations"]} <= {"micro-val", "histo-val"}
