"""Report helpers without a kernel: loading per stage, absent stages, tables, figures."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pmcflow import schema as S
from pmcflow import tables as T
from pmcflow.report import html, load, plots, sections
from pmcflow.report.load import Results

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _write_counts(
    path: Path, stage: str, n_in: int, kept: int, rejected: dict[str, int], **extra: int
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    T.write_counts(path, T.counts_record(stage, n_in, kept, rejected, extra=extra or None))


def _rejection(stage: str, item: str, reason: str, detail: str) -> dict[str, str | None]:
    return {
        "stage": stage,
        "chunk": None,
        "item_id": item,
        "pmcid": item.split(".")[0],
        "reason": reason,
        "detail": detail,
    }


@pytest.fixture()
def early(tmp_path: Path) -> Results:
    """A results directory where only list, acquire and parse ran."""
    r = tmp_path / "results"
    _write_counts(r / "listing/counts.json", "list", 5, 4, {"older_version": 1})
    _write_counts(r / "acquire/counts.json", "acquire", 4, 3, {"retracted": 1})
    _write_counts(r / "parse/counts.json", "parse", 3, 3, {}, figures=7)
    old = _rejection("list", "PMC1.1", "older_version", "newer version 2 listed")
    T.write_table([old], S.REJECTIONS, r / "listing/rejections.parquet")
    # acquire's merged rejections carry the listing's rows too: they must be counted once.
    T.write_table(
        [old, _rejection("acquire", "PMC2.1", "retracted", "<b>marked</b>")],
        S.REJECTIONS,
        r / "acquire/rejections.parquet",
    )
    return Results(results_dir=r, workdir=tmp_path)


def test_stage_counts_funnel_and_missing(early: Results) -> None:
    counts = load.stage_counts(early)
    assert [c.stage for c in counts] == ["list", "acquire", "parse"]
    parse = counts[-1]
    assert (parse.n_in, parse.kept, parse.out, parse.unit_out) == (3, 3, 7, "figures")
    assert counts[0].n_rejected == 1
    assert [s.stage for s in load.missing_stages(early)] == ["decompose", "enrich", "filter", "shard"]


def test_rejections_deduplicated_with_examples(early: Results) -> None:
    summary = load.rejection_summary(early)
    assert summary.select("stage", "reason", "n").rows() == [
        ("list", "older_version", 1),
        ("acquire", "retracted", 1),
    ]
    parts = sections.rejection_reasons(early)
    text = "".join(p.text for p in parts if isinstance(p, html.Html))
    assert "&lt;b&gt;marked&lt;/b&gt;" in text and "<b>marked" not in text  # escaped
    assert any(isinstance(p, html.Png) and p.data.startswith(PNG_MAGIC) for p in parts)


@pytest.mark.parametrize(
    "section",
    [
        sections.funnel,
        sections.composition,
        sections.text_lengths,
        sections.examples,
        sections.detector_metrics,
        sections.detector_pr,
        sections.detector_training,
        sections.decompositions,
        sections.subcaption_sources,
        sections.summary_sources,
        sections.enrich_examples,
        sections.encoder_training,
        sections.retrieval,
        sections.zero_shot,
    ],
)
def test_every_section_says_not_run_on_an_empty_results_dir(tmp_path: Path, section) -> None:  # type: ignore[no-untyped-def]
    res = Results(results_dir=tmp_path / "nothing", workdir=tmp_path)
    parts = section(res)
    assert parts and all(isinstance(p, html.Html) for p in parts)
    assert "not run in this workflow" in parts[0].text


def test_composition_reports_later_stages_as_not_run(early: Results) -> None:
    arts = [
        {
            "article_uid": f"PMC{i}.1",
            "pmcid": f"PMC{i}",
            "version": 1,
            "chunk": "c000000",
            "license_code": code,
        }
        for i, code in enumerate(["CC BY", "CC BY", "CC0"])
    ]
    T.write_table(arts, S.ARTICLES, early.path("parse/c000000/articles.parquet"))
    text = "".join(p.text for p in sections.composition(early) if isinstance(p, html.Html))
    assert "CC BY" in text and "CC0" in text
    assert "Modality (filter stage): not run in this workflow" in text
    assert "Shards: not run in this workflow" in text


def test_table_formats_and_escapes() -> None:
    t = html.table([{"a": 1234567, "b": 0.12345, "c": None, "d": "<x>"}], digits=2, caption="cap & co").text
    assert "1,234,567" in t and "0.12" in t and "–" in t and "&lt;x&gt;" in t and "cap &amp; co" in t
    assert html.table([]).text.startswith('<p class="pmcflow-note">')


def test_whitespace_tokens_and_stable_order() -> None:
    assert load.whitespace_tokens("  (A) Axial\tCT,  n = 3 ") == 6
    assert load.whitespace_tokens(None) == 0
    df = pl.DataFrame({"k": [f"u{i}" for i in range(20)]})
    a = load.stable_order(df, "k", seed=1)["k"].to_list()
    assert a == load.stable_order(df.reverse(), "k", seed=1)["k"].to_list()
    assert a != load.stable_order(df, "k", seed=2)["k"].to_list()


def test_figures_are_png_without_software_tag() -> None:
    fig = plots.token_histograms(
        {"caption": [3, 10, 40, 40, 200], "subcaption": [2, 5, 9], "summary": [30, 31]}
    )
    png = html.figure_png(fig)
    assert png.data.startswith(PNG_MAGIC) and b"matplotlib" not in png.data


def test_detector_tables_from_eval_json(tmp_path: Path) -> None:
    m = {
        "map": 0.5,
        "map50": 0.8,
        "map75": 0.4,
        "f1": 0.7,
        "threshold": 0.3,
        "precision": 0.6,
        "recall": 0.8,
        "n_images": 2,
        "n_gt": 5,
        "n_pred": 6,
        "at_fixed": {"threshold": 0.2, "f1": 0.65},
        "pr_curve": [
            {"threshold": 0.9, "precision": 1.0, "recall": 0.2},
            {"threshold": 0.1, "precision": 0.5, "recall": 0.9},
        ],
    }
    ev = {"iou": 0.5, "detectors": {"xycut-default": {"checkpoint": "weight-free", "sets": {"holdout": m}}}}
    (tmp_path / "detector/eval").mkdir(parents=True)
    (tmp_path / "detector/eval/eval.json").write_text(json.dumps(ev))
    res = Results(results_dir=tmp_path, workdir=tmp_path)
    df = load.detector_metrics(ev)
    assert df.row(0, named=True)["F1 @ score 0.2"] == 0.65
    curves = load.pr_curves(res, ev)  # no parquet: falls back to the curve inside eval.json
    assert curves[("xycut-default", "holdout")].height == 2
    assert isinstance(sections.detector_pr(res)[0], html.Png)


def test_splitter_quality_sources(repo_root: Path, tmp_path: Path) -> None:
    got = load.splitter_quality(repo_root, mode="recompute")
    assert got is not None and got[0].startswith("recomputed")
    for split in ("dev", "test", "all"):
        assert 0.0 <= got[1][split]["token_f1_macro"] <= 1.0
    assert load.splitter_quality(tmp_path) is None
    if (repo_root / "benchmarks/results/enrich.json").is_file():
        assert load.splitter_quality(repo_root, mode="auto")[0].startswith("benchmarks/results/enrich.json")  # type: ignore[index]


def test_results_from_config(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("paths: {results: out/r}\ntrain: {run: tiny}\n")
    res = Results.from_params(None, config="c.yaml", workdir=str(tmp_path))
    assert res.results_dir == tmp_path / "out/r" and res.run_name == "tiny"
    assert (
        Results.from_params("x", config="c.yaml", workdir=str(tmp_path), run_name="b").results_dir
        == tmp_path / "x"
    )
    assert res.resolve("a/b.png") == tmp_path / "a/b.png" and res.resolve("/abs.png") == Path("/abs.png")
