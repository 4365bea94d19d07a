"""Report helpers without a kernel: loading per stage, absent stages, tables, figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pmcflow import schema as S
from pmcflow import tables as T
from pmcflow.encoders.evaluate import best_positive_ranks, f1_scores
from pmcflow.report import html, load, plots, sections, stats
from pmcflow.report import provenance as prov
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
        sections.tokenized_lengths,
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
        sections.embeddings,
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
    # the threshold shown is the one the evaluation recorded, not a constant of the report
    assert load.fixed_threshold(ev) == 0.2
    other = json.loads(json.dumps(ev))
    other["detectors"]["xycut-default"]["sets"]["holdout"]["at_fixed"]["threshold"] = 0.35
    assert load.fixed_threshold(other) == 0.35 and "F1 @ score 0.35" in load.detector_metrics(other).columns
    del other["detectors"]["xycut-default"]["sets"]["holdout"]["at_fixed"]
    assert load.fixed_threshold(other) is None and "F1 @ fixed score" in load.detector_metrics(other).columns
    curves = load.pr_curves(res, ev)  # no parquet: falls back to the curve inside eval.json
    assert curves[("xycut-default", "holdout")].height == 2
    parts = sections.detector_pr(res)
    assert "weight-free baseline: xycut" in parts[0].text and isinstance(parts[-1], html.Png)


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


# --------------------------------------------------------------------------------------------
# Stages not run: no numbers, "not run" and the reason
# --------------------------------------------------------------------------------------------
def _html(parts: list[html.Part]) -> str:
    return "".join(p.text for p in parts if isinstance(p, html.Html))


def _table_rows(text: str, first_cell: str) -> list[list[str]]:
    """Cells of every table row whose first cell is ``first_cell``."""
    rows = re.findall(r"<tr>(.*?)</tr>", text)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in rows]
    return [c for c in cells if c and c[0] == first_cell]


def test_overview_marks_missing_stages_not_run_without_numbers(early: Results) -> None:
    text = _html(sections.overview(early, "t", sections.REPORT_STAGES["dataset"]))
    for stage in ("decompose", "enrich", "filter", "shard"):
        rows = _table_rows(text, stage)
        assert len(rows) == 1, stage
        assert rows[0][1] == "not run"
        assert not re.search(r"\d", "".join(rows[0])), rows[0]  # no counts, not even zeros
    assert "no shards/counts.json" in text  # the reason: the file it looked for
    parse = _table_rows(text, "parse")[0]
    assert parse[1] == "ran" and "3 articles in, 3 kept → 7 figures" in parse[2]
    # The training report's overview covers the model stages, which did not run here either.
    train = _html(sections.overview(early, "t", sections.REPORT_STAGES["training"]))
    for stage in ("shard", "encoder training", "encoder evaluation"):
        assert _table_rows(train, stage)[0][1] == "not run"


def test_report_stages_are_known() -> None:
    for name, stages in sections.REPORT_STAGES.items():
        assert set(stages) <= set(load.ALL_STAGES), name
    with pytest.raises(ValueError, match="unknown stages"):
        load.stage_status(Results(results_dir=Path("/nonexistent")), ["decomposee"])


def test_funnel_rows_for_stages_not_run_have_no_numbers(early: Results) -> None:
    text = _html(sections.funnel(early))
    for stage in ("decompose", "enrich", "filter", "shard"):
        (row,) = _table_rows(text, stage)
        assert row[1] == "not run"
        assert not re.search(r"\d", "".join(row)), row
    (parse,) = _table_rows(text, "parse")
    assert parse[1] == "ran" and parse[3] == "3" and parse[7] == "7"


def test_text_lengths_without_enrich_says_not_run_not_zero(early: Results) -> None:
    figs = pl.DataFrame({"figure_uid": ["f1", "f2"], "caption": ["a b c", "d e"]})
    path = early.path("parse/c000000/figures.parquet")
    path.parent.mkdir(parents=True, exist_ok=True)
    figs.write_parquet(path)
    text = _html(sections.text_lengths(early))
    (caption,) = _table_rows(text, "caption")
    assert caption[1] == "ran" and caption[2] == "2"
    for kind in ("subcaption", "summary"):
        (row,) = _table_rows(text, kind)
        assert row[1].startswith("not run") and not re.search(r"\d", "".join(row)), row


def test_stage_disabled_in_config_is_not_run_even_with_old_outputs(tmp_path: Path) -> None:
    r = tmp_path / "results"
    (r / "detector/model").mkdir(parents=True)
    (r / "detector/model/train.json").write_text(
        json.dumps({"backend": "ultralytics", "params": {"epochs": 3}})
    )
    on = Results(results_dir=r, workdir=tmp_path)
    assert sections.detector_training(on)[0].text.startswith('<div class="pmcflow-provenance"')
    off = Results(results_dir=r, workdir=tmp_path, config={"detector": {"train": False}})
    (status,) = load.stage_status(off, ["detector training"])
    assert not status.ran and status.summary == ""
    assert "detector.train: false" in status.reason and "earlier run ignored" in status.reason
    parts = sections.detector_training(off)
    assert len(parts) == 1 and "not run in this workflow" in parts[0].text
    assert "detector.train: false" in parts[0].text
    # Without the config, an evaluation that scored no trained detector says the same.
    ev = {"detectors": {"xycut-default": {"checkpoint": "weight-free", "sets": {}}}}
    (r / "detector/eval").mkdir(parents=True)
    (r / "detector/eval/eval.json").write_text(json.dumps(ev))
    (status,) = load.stage_status(on, ["detector training"])
    assert not status.ran and "no trained detector" in status.reason


def test_counts_from_different_runs_are_flagged(early: Results) -> None:
    # decompose says it took 9 figures, parse passed on 7: one of them is stale.
    _write_counts(early.path("decompose/counts.json"), "decompose", 9, 9, {}, n_subfigures=20)
    status = {s.stage: s for s in load.stage_status(early)}
    assert status["decompose"].warning and "different runs" in status["decompose"].reason
    assert not status["parse"].warning
    text = _html(sections.overview(early, "t"))
    assert _table_rows(text, "decompose")[0][1] == "ran — check"


# --------------------------------------------------------------------------------------------
# Chance levels and intervals
# --------------------------------------------------------------------------------------------
def test_accuracy_chance_and_majority_baseline() -> None:
    assert stats.accuracy_chance(4) == 0.25
    counts = [25, 59, 33, 26]
    maj = stats.majority_baseline(counts)
    # Checked against the evaluation's own F1 on constant predictions of the largest class.
    y = np.repeat(np.arange(4), counts)
    pred = np.full_like(y, 1)
    assert maj["accuracy"] == pytest.approx((y == pred).mean())
    assert maj["macro_f1"] == pytest.approx(f1_scores(y, pred, 4).mean())


def test_uniform_macro_f1_matches_simulation() -> None:
    counts = [25, 59, 33, 26]
    exact = stats.uniform_macro_f1(counts)
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), counts)
    sims = np.array([f1_scores(y, rng.integers(0, 4, y.size), 4).mean() for _ in range(20000)])
    se = sims.std() / np.sqrt(sims.size)
    assert abs(exact - sims.mean()) < 4 * se, (exact, sims.mean(), se)
    # Not the same as 1/k or the accuracy chance for unbalanced classes, and close to the
    # large-sample value, which is exact-ish for many items.
    assert exact != pytest.approx(0.25, abs=1e-3)
    assert stats.uniform_macro_f1_limit(counts) == pytest.approx(exact, abs=5e-3)
    big = [4000, 1000, 500]
    assert stats.uniform_macro_f1(big) == pytest.approx(stats.uniform_macro_f1_limit(big), abs=1e-3)
    assert stats.uniform_macro_f1([250, 250, 250, 250]) == pytest.approx(0.25, abs=2e-3)
    assert stats.uniform_macro_f1([7]) == 1.0  # one class: always right


def test_retrieval_chance_one_match_is_k_over_n() -> None:
    n = 143
    c = stats.retrieval_chance(n, [1, 10, 50, 200])
    assert c["R@1"] == pytest.approx(1 / n)
    assert c["R@10"] == pytest.approx(10 / n)
    assert c["R@50"] == pytest.approx(50 / n)
    assert c["R@200"] == 1.0
    assert c["mean_rank"] == pytest.approx((n + 1) / 2)
    assert c["mrr"] == pytest.approx(sum(1 / j for j in range(1, n + 1)) / n)


def test_retrieval_chance_with_grouped_texts_matches_random_scores() -> None:
    """The formula against the evaluation's own rank definition, on random embeddings."""
    groups = np.array([0, 0, 0, 1, 2, 2, 3, 4, 5, 6, 7, 7, 8, 9, 10, 11, 12, 13, 14, 15])
    n = len(groups)
    sizes = [int((groups == g).sum()) for g in groups]
    chance = stats.retrieval_chance(n, [1, 5, 10], sizes)
    rng = np.random.default_rng(1)
    ranks = np.concatenate(
        [
            best_positive_ranks(rng.normal(size=(n, 8)), rng.normal(size=(n, 8)), groups, groups)
            for _ in range(3000)
        ]
    )
    for k in (1, 5, 10):
        assert chance[f"R@{k}"] == pytest.approx((ranks < k).mean(), abs=0.01), k
    assert chance["mean_rank"] == pytest.approx((ranks + 1).mean(), rel=0.02)
    assert chance["mrr"] == pytest.approx((1 / (ranks + 1)).mean(), abs=0.01)
    assert chance["R@1"] > 1 / n  # several matches make a random hit likelier than K/N


def test_wilson_interval_known_values() -> None:
    lo, hi = stats.wilson_interval(50, 100)
    assert (round(lo, 4), round(hi, 4)) == (0.4038, 0.5962)
    lo, hi = stats.wilson_interval(0, 10)
    assert lo == 0.0 and round(hi, 4) == 0.2775


# --------------------------------------------------------------------------------------------
# Encoder evaluation: chance, CIs and provenance in the training report's sections
# --------------------------------------------------------------------------------------------
def _write_evaluation(root: Path, run: str, *, n_train: int, model: str, epochs: int) -> None:
    """A run's train.json and an evaluation written with the evaluation's own metric functions."""
    from pmcflow.encoders.evaluate import METRICS_SCHEMA, classification_metrics, rank_metrics

    rng = np.random.default_rng(3)
    n = 40
    rows = []
    for direction in ("image_to_text", "text_to_image"):
        for m in rank_metrics(rng.integers(0, n, n), [1, 10], n_boot=50, seed=1):
            rows.append({"task": "retrieval", "dataset": "test", "direction": direction, **m})
    y = np.repeat(np.arange(4), [10, 20, 5, 5])
    for m in classification_metrics(y, rng.integers(0, 4, n), ["a", "b", "c", "d"], n_boot=50, seed=2):
        rows.append({"task": "zero_shot", "dataset": "test:modality", "direction": None, **m})
    T.write_table(rows, METRICS_SCHEMA, root / f"evaluation/{run}/metrics.parquet")
    ev = {
        "split": "test",
        "model_id": f"local-dir:{root}/encoders/{run}/model",
        "checkpoint": "ck.pt",
        "config": {"group_identical_texts": True},
        "retrieval": {"n_pairs": n, "n_text_groups": n},
        "skipped": {},
    }
    (root / f"evaluation/{run}/metrics.json").write_text(json.dumps(ev))
    tr = {
        "model": model,
        "n_train": n_train,
        "schedule": {"epochs": epochs},
        "checkpoint": "ck.pt",
        "config": {},
    }
    (root / f"encoders/{run}").mkdir(parents=True)
    (root / f"encoders/{run}/train.json").write_text(json.dumps(tr))


def test_retrieval_and_zero_shot_show_chance_cis_and_provenance(tmp_path: Path) -> None:
    _write_evaluation(tmp_path, "tiny", n_train=204, model="tiny-vit-bpe", epochs=2)
    res = Results(results_dir=tmp_path, workdir=tmp_path)
    ret = sections.retrieval(res)
    text = _html(ret)
    assert "smoke-test model: tiny-vit-bpe" in text and "2 epochs on 204 image–text pairs" in text
    assert "not a quality measure" in text
    (r1,) = _table_rows(text, "tiny")[:1]
    header = re.findall(r"<th>(.*?)</th>", text)
    assert r1[header.index("chance")] == f"{1 / 40:.3f}"  # K/N with N = 40 distinct pairs
    assert re.search(r"\[\d\.\d{3}, \d\.\d{3}\]", r1[header.index("img→txt CI")])
    assert "N = 40" in text
    assert any(isinstance(p, html.Png) for p in ret)

    zs = sections.zero_shot(res)
    text = _html(zs)
    header = re.findall(r"<th>(.*?)</th>", text)
    (row,) = _table_rows(text, "tiny")
    chance = stats.classification_chance([10, 20, 5, 5])
    assert row[header.index("chance acc (1/k)")] == "0.250"
    assert row[header.index("chance macro-F1")] == f"{chance['macro_f1_uniform']:.3f}"
    assert row[header.index("majority acc")] == "0.500"
    assert re.fullmatch(r"\[\d\.\d{3}, \d\.\d{3}\]", row[header.index("accuracy CI")])
    assert "smoke-test model" in text and any(isinstance(p, html.Png) for p in zs)


def test_baselines_are_shown_beside_the_runs_with_their_provenance(tmp_path: Path) -> None:
    _write_evaluation(tmp_path, "tiny", n_train=204, model="tiny-vit-bpe", epochs=2)
    _write_evaluation(tmp_path, "baselines/untrained", n_train=1, model="x", epochs=1)
    _write_evaluation(tmp_path, "baselines/hub", n_train=1, model="x", epochs=1)
    rec = {
        "name": "untrained",
        "model": "tiny-vit-bpe",
        "weights": "random initialisation (seed 1): the chance floor",
    }
    path = tmp_path / "evaluation/baselines/untrained/metrics.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "baseline": rec}))
    res = Results(results_dir=tmp_path, workdir=tmp_path)
    assert load.evaluated_models(res) == ["tiny", "baseline:hub", "baseline:untrained"]
    assert load.evaluation_dir("baseline:hub") == "evaluation/baselines/hub"
    # The config's order wins, and a configured baseline without outputs is not listed.
    cfg = {"evaluate": {"baselines": {"untrained": {}, "hub": {}, "missing": {}}}}
    assert load.evaluated_models(Results(results_dir=tmp_path, workdir=tmp_path, config=cfg)) == [
        "tiny",
        "baseline:untrained",
        "baseline:hub",
    ]
    text = _html(sections.retrieval(res))
    assert [r[0] for r in _table_rows(text, "baseline:untrained")][:1] == ["baseline:untrained"]
    assert "baseline model, evaluated by the same code: tiny-vit-bpe, random initialisation" in text
    assert "no baseline record in evaluation/baselines/hub/metrics.json" in text


def test_embedding_section_shows_tsne_and_mmd_per_benchmark(tmp_path: Path) -> None:
    from pmcflow.encoders import compare as CM

    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 4)).astype(np.float32)
    for name, arr in (("a", x), ("b", x + 2.0)):
        np.savez(tmp_path / f"{name}.npz", bench=arr)
    out = tmp_path / "evaluation/embeddings"
    CM.compare_models(
        {"a": tmp_path / "a.npz", "b": tmp_path / "b.npz"},
        {"max_images": 10, "permutations": 20, "perplexity": 5},
        0,
        out,
    )
    parts = sections.embeddings(Results(results_dir=tmp_path, workdir=tmp_path))
    text = _html(parts)
    assert "bench: 10 of 12 test images" in text and "20 permutations" in text
    (row,) = _table_rows(text, "a")
    assert row[:3] == ["a", "b", "10"] and row[4] == f"{1 / 21:.4f}"
    assert sum(isinstance(p, html.Png) for p in parts) == 1
    off = Results(
        results_dir=tmp_path / "none",
        workdir=tmp_path,
        config={"evaluate": {"embedding": {"enabled": False}}},
    )
    assert "evaluate.embedding.enabled: false" in _html(sections.embeddings(off))


def test_results_take_the_workflow_config_itself(tmp_path: Path) -> None:
    """The report rules pass the run's config, so the tokenizer (and the texts) a report shows
    never depend on whether a training job happened to finish before the report ran."""
    cfg = {"train": {"model": "tiny-vit-bpe"}, "paths": {"results": "r"}}
    res = Results.from_params(None, config=cfg, workdir=str(tmp_path))
    assert res.results_dir == tmp_path / "r" and res.config["train"]["model"] == "tiny-vit-bpe"
    (tmp_path / "r/encoders/run").mkdir(parents=True)
    (tmp_path / "r/encoders/run/train.json").write_text(json.dumps({"model": "tiny-vit-minilm"}))
    assert load.configured_model(res) == ("tiny-vit-bpe", "config train.model")
    # the demo's config: variants (the text ablation) and a run name are workflow keys, not the
    # trainer's; the configured model still wins over whichever run finished first
    demo = {"run": "tiny-clip", "model": "tiny-vit-bpe", "variants": {"caption": {"text_fields": ["caption"]}}}
    res = Results.from_params(None, config={"train": demo, "paths": {"results": "r"}}, workdir=str(tmp_path))
    assert load.configured_model(res) == ("tiny-vit-bpe", "config train.model")
    bare = Results.from_params(None, config=None, workdir=str(tmp_path))
    assert bare.config == {}


def test_full_scale_encoder_is_not_labelled_smoke_test(tmp_path: Path) -> None:
    _write_evaluation(tmp_path, "big", n_train=18_000_000, model="vitb16-pubmedbert", epochs=64)
    res = Results(results_dir=tmp_path, workdir=tmp_path)
    p = prov.encoder(res, "big")
    assert p.kind == prov.IN_RUN and not p.is_smoke
    text = _html(sections.retrieval(res))
    assert "model trained in this run: vitb16-pubmedbert" in text and "smoke-test" not in text


def test_retrieval_chance_reads_identical_texts_from_the_shards(tmp_path: Path) -> None:
    import io
    import tarfile

    texts = ["same caption", "same caption", "other", "third", "same caption", "other"]
    keys = [f"k{i}" for i in range(len(texts))]
    (tmp_path / "shards/test").mkdir(parents=True)
    with tarfile.open(tmp_path / "shards/test/test-000000.tar", "w") as tar:
        for k, t in zip(keys, texts, strict=True):
            for name, data in ((f"{k}.txt", t.encode()), (f"{k}.png", b"\x89PNG")):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    manifest = {"splits": {"test": {"shards": [{"name": "test-000000.tar"}]}}}
    (tmp_path / "shards/manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "evaluation/r").mkdir(parents=True)
    ev = {"split": "test", "config": {}, "retrieval": {"n_pairs": 6, "n_text_groups": 3}}
    (tmp_path / "evaluation/r/metrics.json").write_text(json.dumps(ev))
    pl.DataFrame({"key": keys[::-1]}).write_parquet(tmp_path / "evaluation/r/retrieval_ranks.parquet")
    res = Results(results_dir=tmp_path, workdir=tmp_path)
    matches, how = load.retrieval_matches(res, "r")
    # In the order of the ranks file (k5 .. k0): other, same, third, other, same, same.
    assert matches == [2, 3, 1, 2, 3, 3] and "3 distinct texts among 6 pairs" in how
    ev["retrieval"]["n_text_groups"] = 4  # not the texts the evaluation grouped: no guess
    (tmp_path / "evaluation/r/metrics.json").write_text(json.dumps(ev))
    assert load.retrieval_matches(res, "r")[0] is None


# --------------------------------------------------------------------------------------------
# Model provenance
# --------------------------------------------------------------------------------------------
def _trained_detector(root: Path, epochs: int, n_images: int) -> None:
    (root / "detector/model").mkdir(parents=True)
    tr = {
        "backend": "ultralytics",
        "params": {"epochs": epochs, "model": "yolov8n.yaml"},
        "history": [{"epoch": 1, "train/box_loss": 2.0}],
    }
    (root / "detector/model/train.json").write_text(json.dumps(tr))
    (root / "detector/model/train.txt").write_text("".join(f"img{i}.png\n" for i in range(n_images)))
    (root / "detector/model/model.pt").write_bytes(b"weights of this run")


def test_detector_provenance_smoke_test_and_shipped(tmp_path: Path) -> None:
    _trained_detector(tmp_path, epochs=1, n_images=16)
    res = Results(results_dir=tmp_path, workdir=tmp_path)
    p = prov.trained_detector(res)
    assert p.is_smoke
    assert p.label == (
        "smoke-test model: ultralytics (yolov8n.yaml), trained in this run: 1 epoch on 16 rendered figures"
        " — not a quality measure"
    )
    assert prov.eval_detector(res, "xycut-default", "weight-free").kind == prov.WEIGHT_FREE
    shipped = prov.eval_detector(res, "ultralytics-default", "shipped")
    meta_path = prov.SHIPPED_DETECTOR / "detector.json"
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        assert shipped.kind == prov.SHIPPED and meta["sha256"][:12] in shipped.label
        assert prov.decompose_detector(res, "ultralytics:model.pt", meta["sha256"]).kind == prov.SHIPPED
    else:
        assert shipped.kind == prov.UNKNOWN
    # The decomposition's detector found by its checkpoint's sha256: this run's model.
    sha = prov.sha256_file(tmp_path / "detector/model/model.pt")
    assert prov.decompose_detector(res, "ultralytics:model.pt", sha).is_smoke
    assert prov.decompose_detector(res, "ultralytics:model.pt", "0" * 64).kind == prov.UNKNOWN


def test_detector_provenance_full_scale(tmp_path: Path) -> None:
    _trained_detector(tmp_path, epochs=40, n_images=500_000)
    p = prov.trained_detector(Results(results_dir=tmp_path, workdir=tmp_path))
    assert p.kind == prov.IN_RUN and "smoke-test" not in p.label and "40 epochs on 500,000" in p.label


def test_detector_sections_label_every_table_and_figure(tmp_path: Path) -> None:
    _trained_detector(tmp_path, epochs=3, n_images=160)
    curve = [
        {"threshold": 0.9, "precision": 1.0, "recall": 0.2},
        {"threshold": 0.1, "precision": 0.5, "recall": 0.9},
    ]
    m = {"map": 0.5, "n_images": 2, "n_gt": 5, "at_fixed": {"threshold": 0.2, "f1": 0.6}, "pr_curve": curve}
    ev = {
        "detectors": {
            "ultralytics-trained": {
                "checkpoint": str(tmp_path / "detector/model/model.pt"),
                "sets": {"holdout": m},
            },
            "xycut-default": {"checkpoint": "weight-free", "sets": {"holdout": m}},
        }
    }
    (tmp_path / "detector/eval").mkdir(parents=True)
    (tmp_path / "detector/eval/eval.json").write_text(json.dumps(ev))
    res = Results(results_dir=tmp_path, workdir=tmp_path)
    text = _html(sections.detector_metrics(res))
    assert "smoke-test model: ultralytics (yolov8n.yaml), trained in this run: 3 epochs on 160" in text
    assert "weight-free baseline: xycut" in text
    header = re.findall(r"<th>(.*?)</th>", text)
    assert _table_rows(text, "ultralytics-trained")[0][header.index("model")] == "smoke-test"
    assert _table_rows(text, "xycut-default")[0][header.index("model")] == "weight-free"
    for section in (sections.detector_pr, sections.detector_training):
        parts = section(res)
        assert "smoke-test model" in _html(parts) and any(isinstance(p, html.Png) for p in parts)


def test_modality_classifier_accuracy_with_chance_and_provenance(tmp_path: Path) -> None:
    p_mod, rec = prov.modality_record(Results(results_dir=tmp_path, workdir=tmp_path))
    if rec is None:
        pytest.skip("the package ships no modality classifier record")
    assert p_mod.kind == prov.SHIPPED and "assumed" in p_mod.label  # no config given: the default
    text = _html(sections.modality_accuracy(p_mod, rec))
    k = len(rec["heldout"]["confusion"]["classes"])
    (row,) = _table_rows(text, "all")
    assert row[4] == f"{1 / k:.3f}" and re.fullmatch(r"\[\d\.\d{3}, \d\.\d{3}\]", row[3])
    custom = Results(
        results_dir=tmp_path, workdir=tmp_path, config={"filter": {"modality": {"checkpoint": "m/model.pt"}}}
    )
    assert prov.modality_record(custom)[0].kind == prov.CONFIGURED


# ------------------------------------------------------------------------------------------------
# Token lengths with the configured encoder's tokenizer
# ------------------------------------------------------------------------------------------------
def _dataset_rows(subcaptions: list[str], summaries: list[str | None]) -> list[dict[str, object]]:
    rows = []
    for i, (sub, summ) in enumerate(zip(subcaptions, summaries, strict=True)):
        uid = f"PMC{i}.1/fig1/s0"
        rows.append(
            {"subfigure_uid": uid, "figure_uid": f"PMC{i}.1/fig1", "article_uid": f"PMC{i}.1",
             "pmcid": f"PMC{i}", "version": 1, "chunk": "c0", "subcaption": sub, "summary": summ,
             "caption": f"Figure 1. {sub}", "figure_label": "Figure 1"}
        )  # fmt: skip
    return rows


def test_tokenized_lengths_show_the_truncated_share(tmp_path: Path) -> None:
    """CLIP BPE reads "a" as one token, plus start and end: n words = n + 2 tokens; ViT-B-32 reads 77.
    Subcaptions of 10, 75, 76 and 200 words: 12, 77 (fits), 78 and 202 tokens: 2 of 4 truncated."""
    import open_clip

    r = tmp_path / "results"
    subs = [" ".join(["a"] * n) for n in (10, 75, 76, 200)]
    summaries = [" ".join(["b"] * 80), None, None, "b  b"]
    T.write_table(_dataset_rows(subs, summaries), S.DATASET, r / "filter/c0/dataset.parquet")
    cfg = {"train": {"model": "ViT-B-32"}, "shard": {"text_fields": ["subcaption", "summary"]}}
    res = Results(results_dir=r, workdir=tmp_path, config=cfg)

    tok = load.text_tokenizer(res)
    assert (tok.model, tok.context_length, tok.fallback) == ("ViT-B-32", 77, None)
    ref = open_clip.get_tokenizer("ViT-B-32")
    for text in subs:  # the count is what the model's tokenizer would write before cutting
        ids = ref(text)[0]
        assert (tok.count(text) >= 77) == bool(ids[-1] != 0)  # a full row: cut, or exactly full
        assert min(tok.count(text), 77) == int((ids != 0).sum())

    data = load.tokenizer_lengths(res)
    assert data is not None
    assert data["lengths"]["subcaption"] == [12, 77, 78, 202]
    assert data["lengths"]["summary"] == [82, 4] and data["empty"]["summary"] == 2
    sub = load.truncation(data["lengths"]["subcaption"], 77)
    assert (sub["truncated"], sub["share_truncated"], sub["max"]) == (2, 0.5, 202)
    # the composed .txt (shard config: subcaption + summary) of the first sample: 10 + 80 words
    assert data["lengths"]["txt"][0] == 92 and data["texts"]["txt"][1] == subs[1]

    parts = sections.tokenized_lengths(res)
    assert isinstance(parts[-1], html.Png)  # the histograms
    text = _html(parts)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", text)]
    rows = {c[0]: c for c in cells if c and c[0].startswith("&lt;key&gt;")}
    assert rows["&lt;key&gt;.subcaption.txt"][-2:] == ["2", "50.0%"]
    assert rows["&lt;key&gt;.summary.txt"][1:3] == ["2", "50.0%"]  # 2 non-empty, half empty
    assert rows["&lt;key&gt;.summary.txt"][-2:] == ["1", "50.0%"]
    assert rows["&lt;key&gt;.figure_label.txt"][-2:] == ["0", "0.0%"]
    txt = next(v for k, v in rows.items() if k.startswith("&lt;key&gt;.txt"))
    assert txt[-2:] == ["3", "75.0%"]  # 92, 77 (75 words, no summary), 78, 202 + 2
    assert "context length 77" in text and "ViT-B-32" in text and "Not the model" not in text


def test_tokenized_lengths_use_the_shard_index_text_and_say_when_falling_back(tmp_path: Path) -> None:
    r = tmp_path / "results"
    subs = [" ".join(["a"] * n) for n in (3, 300)]
    rows = _dataset_rows(subs, [None, None])
    T.write_table(rows, S.DATASET, r / "filter/c0/dataset.parquet")
    index = [
        {"key": f"k{i}", "split": "train", "shard": "train-000000.tar", "subfigure_uid": row["subfigure_uid"],
         "article_uid": row["article_uid"], "pmcid": row["pmcid"], "text": "x y" if i else "only this"}
        for i, row in enumerate(rows[:1] + rows[1:])
    ]  # fmt: skip
    T.write_table(index[:1], S.SHARD_INDEX, r / "shards/index.parquet")  # only the first was sharded
    model = tmp_path / "m"
    model.mkdir()
    (model / "open_clip_config.json").write_text(
        json.dumps(
            {"model_cfg": {"text_cfg": {"hf_tokenizer_name": "no-such-org/not-cached", "context_length": 5}}}
        )
    )
    res = Results(results_dir=r, workdir=tmp_path, config={"train": {"model": f"local-dir:{model}"}})
    data = load.tokenizer_lengths(res)
    assert data is not None and data["texts"]["n_samples"] == 1  # the sharded samples only
    assert data["texts"]["txt"] == ["only this"] and data["lengths"]["subcaption"] == [5]
    tok = data["tokenizer"]
    assert tok.context_length == 5 and tok.fallback and "no-such-org/not-cached" in tok.fallback
    text = _html(sections.tokenized_lengths(res))
    assert "Not the model&#x27;s own tokenizer" in text or "Not the model's own tokenizer" in text
    assert "context length 5" in text


def test_notebook_cell_ids_are_unique():
    """nbformat replaces a duplicate cell id with a random one on every run, which would make the
    rendered HTML differ between two runs of the same DAG."""
    import json
    from collections import Counter

    for nb_path in sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb")):
        ids = [c.get("id") for c in json.loads(nb_path.read_text())["cells"]]
        assert None not in ids, nb_path.name
        dup = [i for i, n in Counter(ids).items() if n > 1]
        assert dup == [], (nb_path.name, dup)


def test_fallback_reasons_are_ordered_by_count_then_name_whatever_the_row_order() -> None:
    """Tied reason counts used to follow polars' group order, which varies between processes (the
    dataset report then differed between two demo runs); ties now go by name."""
    import polars as pl

    from pmcflow.report.sections import fallback_rate

    rows = [
        ("f1", "fallback-full", "no_panel_label"),
        ("f1", "fallback-full", "no_labels"),
        ("f2", "fallback-full", "no_labels"),
        ("f2", "fallback-full", "no_panel_label"),
        ("f2", "rules", None),
        ("f3", "fallback-full", "mention"),
        ("f3", "fallback-full", "mention"),
        ("f3", "fallback-full", "mention"),
    ]
    for order in (rows, rows[::-1], rows[2:] + rows[:2]):
        df = pl.DataFrame(
            {
                "figure_uid": [r[0] for r in order],
                "graphic_index": [0] * len(order),
                "is_single_panel": [False] * len(order),
                "subcaption_source": [r[1] for r in order],
                "subcaption_reason": [r[2] for r in order],
            }
        )
        fb = fallback_rate(df)
        assert list(fb["reasons"].items()) == [("mention", 3), ("no_labels", 2), ("no_panel_label", 2)]
        assert fb["fallback"] == 7 and fb["compound"] == 8
