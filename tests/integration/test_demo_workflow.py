"""The demo DAG end to end through Snakemake, into a temporary results directory."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from pmcflow_testing import workflow as wf

from pmcflow import schema as S
from pmcflow.tables import read_counts

REPO = Path(__file__).resolve().parents[2]


def test_lint_is_clean() -> None:
    proc = wf.run_demo(wf.REPO, "--lint")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_counts_reconcile_at_every_stage(demo_run: Path) -> None:
    results = demo_run / "results/demo"
    listing = read_counts(results / "listing/counts.json")
    acquire = read_counts(results / "acquire/counts.json")
    parse = read_counts(results / "parse/counts.json")
    for rec in (listing, acquire, parse):
        assert rec["in"] == rec["kept"] + sum(rec["rejected"].values())
    # What the listing keeps is what the chunks acquire; what they acquire is what parse reads.
    assert acquire["in"] == listing["kept"]
    assert parse["in"] == acquire["kept"]
    assert parse["kept"] > 0
    # The demo corpus has one article marked retracted: it is rejected, not silently dropped.
    assert acquire["rejected"].get("retracted", 0) + listing["rejected"].get("retracted", 0) >= 1
    rej = pl.read_parquet(results / "acquire/rejections.parquet")
    assert rej.height == sum(acquire["rejected"].values()) + sum(listing["rejected"].values())


def _in_order_pieces(text: str, source: str) -> bool:
    """``text`` is one or more verbatim pieces of ``source``, in source order, joined by a space
    (each piece is taken as long as it matches)."""
    pos, rest = 0, text
    while rest:
        cuts = [k for k in range(len(rest), 0, -1) if k == len(rest) or rest[k] == " "]
        found = next(((k, source.find(rest[:k], pos)) for k in cuts if source.find(rest[:k], pos) >= 0), None)
        if found is None:
            return False
        k, at = found
        pos, rest = at + k, rest[k + 1 :]
    return True


def test_decompose_and_enrich_reconcile(demo_run: Path) -> None:
    results = demo_run / "results/demo"
    parse = read_counts(results / "parse/counts.json")
    decompose = read_counts(results / "decompose/counts.json")
    enrich = read_counts(results / "enrich/counts.json")
    # Every resolved figure graphic is decomposed or rejected with a reason.
    chunks = sorted(json.loads((results / "listing/chunks.json").read_text())["chunks"])
    figures = pl.concat([pl.read_parquet(results / f"parse/{c}/figures.parquet") for c in chunks])
    graphics = sum(len(g or []) for g in figures["graphics"].to_list())
    assert parse["extra"]["graphics"] == graphics
    # Every graphic is considered: decomposed, or rejected with a reason (unresolved ones included).
    assert decompose["in"] == graphics
    assert decompose["in"] == decompose["kept"] + sum(decompose["rejected"].values())
    # Each subfigure becomes exactly one enriched row.
    assert enrich["in"] == decompose["extra"]["n_subfigures"]
    assert enrich["kept"] == enrich["in"]
    enriched = pl.concat([pl.read_parquet(results / f"enrich/{c}/enriched.parquet") for c in chunks])
    assert enriched.columns == S.ENRICHED.names
    assert enriched["subcaption"].null_count() == 0
    assert set(enriched["subcaption_source"].unique()) <= {"rules", "vlm", "fallback-full"}
    for row in enriched.iter_rows(named=True):
        assert (demo_run / row["crop_path"]).is_file()  # relative to the workflow directory
        # Subcaptions and the shared lead are verbatim pieces of the caption (whitespace-normalised).
        caption = " ".join((row["caption"] or "").split())
        subcaption = " ".join(row["subcaption"].split())
        if row["subcaption_reason"] == "mention":  # the sentences naming the panel, in caption order
            assert _in_order_pieces(subcaption, caption), (subcaption, caption)
        else:
            assert subcaption in caption
        assert " ".join((row["shared_text"] or "").split()) in caption
        if row["subcaption_source"] == "fallback-full":
            assert row["subcaption_reason"] and not row["shared_text"]
    # Full-caption fallback among subfigures of compound figures, every one with a reason. The
    # paper reports 13 %; the demo measures 12.7 % (README), so this guards that level.
    from pmcflow.report.sections import fallback_rate

    fb = fallback_rate(enriched)
    assert fb["rate_pct"] < 16.0, fb
    assert sum(fb["reasons"].values()) == fb["fallback"] and "none" not in fb["reasons"]


def test_parse_outputs_are_complete(demo_run: Path) -> None:
    results = demo_run / "results/demo"
    chunks = sorted(json.loads((results / "listing/chunks.json").read_text())["chunks"])
    assert len(chunks) >= 2, "the demo config is meant to exercise several chunks"
    figures = pl.concat([pl.read_parquet(results / f"parse/{c}/figures.parquet") for c in chunks])
    mentions = pl.concat([pl.read_parquet(results / f"parse/{c}/mentions.parquet") for c in chunks])
    articles = pl.concat([pl.read_parquet(results / f"parse/{c}/articles.parquet") for c in chunks])
    assert figures.columns == S.FIGURES.names
    assert mentions.columns == S.MENTIONS.names
    assert articles.columns == S.ARTICLES.names
    assert figures.height > 50 and mentions.height > 300
    # Every figure graphic resolves to a downloaded, existing media file.
    paths = [p for ps in figures["graphic_paths"].to_list() for p in (ps or []) if p]
    n_graphics = sum(len(g or []) for g in figures["graphics"].to_list())
    assert len(paths) == n_graphics
    for p in paths:
        assert Path(p).is_file() or (demo_run / p).is_file(), p
    # Panel letters are extracted from real xrefs such as "Figure 2B".
    assert mentions.filter(pl.col("panels").list.len() > 0).height > 50


def test_rerun_is_a_no_op(demo_run: Path) -> None:
    proc = wf.run_demo(demo_run, "-n")
    assert proc.returncode == 0, proc.stderr
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_filter_shards_training_and_reports(demo_run: Path) -> None:
    results = demo_run / "results/demo"
    enrich = read_counts(results / "enrich/counts.json")
    filt = read_counts(results / "filter/counts.json")
    assert filt["in"] == enrich["kept"]
    assert filt["in"] == filt["kept"] + sum(filt["rejected"].values())
    shards = results / "shards"
    manifest = json.loads((shards / "manifest.json").read_text())
    sizes = sum(sum(json.loads(p.read_text()).values()) for p in shards.glob("*/sizes.json"))
    index = pl.read_parquet(shards / "index.parquet")
    assert index.height == sizes == read_counts(shards / "counts.json")["kept"] > 0
    assert manifest
    # No article in two splits.
    assert index.group_by("pmcid").agg(pl.col("split").n_unique()).filter(pl.col("split") > 1).height == 0
    metrics = json.loads(next((results / "evaluation").glob("*/metrics.json")).read_text())
    assert metrics
    for name in ("dataset", "detector", "enrichment", "training"):
        html = (results / "reports" / f"{name}.html").read_text()
        assert "data:image/png;base64," in html, name
    detector_eval = json.loads((results / "detector/eval/eval.json").read_text())
    for det in detector_eval["detectors"].values():
        for m in det["sets"].values():
            assert 0.0 <= m["map"] <= 1.0 and 0.0 <= m["f1"] <= 1.0


def test_every_rule_log_says_what_ran(demo_run: Path) -> None:
    """No empty rule log: each names its rule, files, params digest and wall time."""
    logs = sorted(p for p in (demo_run / "logs/demo").rglob("*.log"))
    assert len(logs) >= 20
    for p in logs:
        text = p.read_text()
        assert "pmcflow.rule: rule " in text, p
        assert " finished after " in text, p


def test_demo_dataset_loads_in_hf_datasets_as_is(demo_run: Path, tmp_path: Path) -> None:
    """The demo's shard folder, copied elsewhere, loads with `datasets.load_dataset(folder)` alone:
    the dataset card declares the splits and types (the webdataset builder's inference fails here)."""
    import shutil

    import datasets

    shards = demo_run / "results/demo" / "shards"
    copy = tmp_path / "copied" / "shards"
    shutil.copytree(shards, copy)
    ds = datasets.load_dataset(str(copy), cache_dir=str(tmp_path / "hf"))
    sizes = {p.parent.name: sum(json.loads(p.read_text()).values()) for p in shards.glob("*/sizes.json")}
    assert {k: v.num_rows for k, v in ds.items()} == {k: n for k, n in sizes.items() if n}
    index = pl.read_parquet(shards / "index.parquet")
    for split, part in ds.items():
        keys = set(part["__key__"])
        assert keys == set(index.filter(pl.col("split") == split)["key"].to_list()), split
        row = part[0]
        assert row["txt"] == row["json"]["text"] and row["json"]["split"] == split


def test_a_second_run_gives_the_same_bytes(demo_run: Path) -> None:
    """The whole DAG again, from nothing, in the same place: every output matches the first run's
    (pmcflow.repro: only training logs and wall-clock fields may differ).  Runs last: it replaces
    the module's results with the second run's."""
    import shutil

    from pmcflow import repro

    first = repro.snapshot(demo_run / "results/demo")
    for d in ("results", "resources", "logs"):
        shutil.rmtree(demo_run / d)
    proc = wf.run_demo(demo_run)
    assert proc.returncode == 0, proc.stderr[-6000:]
    second = repro.snapshot(demo_run / "results/demo")
    assert len(first) > 100
    assert repro.differences(first, second) == []
