"""The four report notebooks, executed with papermill and rendered to HTML.

* on the outputs of the session's demo run (CI overlay, in a temporary directory);
* on a results directory where only the early stages ran (every later section says "not run");
* (slow) on a complete results directory: the demo's stages plus a filter table, shards, an encoder
  trained with open_clip and its evaluation, built here from the real-image toy dataset;
* (slow) in headless Chromium: every report opens offline and its screenshot is not blank.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from PIL import Image

from pmcflow import schema as S
from pmcflow import tables as T
from pmcflow.report import REPORTS, render_report
from pmcflow.report.render import cli

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
EARLY_STAGES = ("listing", "acquire", "parse")
DEMO_STAGES = ("listing", "acquire", "parse", "decompose", "enrich", "detector")

HEADINGS = {
    "dataset": [
        "Counts through every stage",
        "Rejection reasons per stage",
        "Composition: licences, modality, shards",
        "Text lengths: captions, subcaptions, summaries",
        "Example subfigures",
    ],
    "detector": [
        "Detection metrics per backend and evaluation set",
        "Precision–recall curves",
        "Detector training",
        "Example decompositions",
    ],
    "enrichment": ["Subcaption sources", "Summary sources", "Splitter quality", "Examples"],
    "training": ["Loss curves", "Retrieval", "Zero-shot classification"],
}
IMG_PNG = re.compile(r'<img[^>]+src="data:image/png;base64,')
NOT_RUN = "not run in this workflow"
# Stages each report's overview lists that have no outputs when only EARLY_STAGES ran.
EARLY_NOT_RUN = {
    "dataset": ("decompose", "enrich", "filter", "shard"),
    "detector": ("decompose", "synth", "detector training", "detector evaluation"),
    "enrichment": ("decompose", "enrich"),
    "training": ("shard", "encoder training", "encoder evaluation"),
}
CI_CELL = re.compile(r"<td>\[\d\.\d{3}, \d\.\d{3}\]</td>")


def _stage_rows(page: str, stage: str) -> list[list[str]]:
    """Cells of the table rows whose first cell is ``stage`` (overview and funnel tables)."""
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", page)]
    return [r for r in rows if r and r[0] == stage]


@pytest.fixture(scope="module")
def demo(demo_run: Path) -> Path:
    """The results of the session's demo run (CI overlay; tests/integration/conftest.py)."""
    return demo_run / "results/demo"


def _render_all(results: Path, out: Path, workdir: Path, **params: object) -> dict[str, str]:
    """Every report on ``results``; the kernel runs in ``workdir``, the demo run's workflow copy
    (the paths its tables store are relative to it, as in the workflow's own report rules)."""
    pages: dict[str, str] = {}
    for name in REPORTS:
        t0 = time.perf_counter()
        path = render_report(name, {"results_dir": str(results), **params}, out / f"{name}.html", cwd=workdir)
        pages[name] = path.read_text(encoding="utf-8")
        print(f"{name}: {time.perf_counter() - t0:.1f} s")
    return pages


def _check_page(name: str, page: str) -> None:
    for h in HEADINGS[name]:
        assert f">{h}<" in page, (name, h)
    assert "Traceback" not in page and "Error" not in re.sub(r"<style.*?</style>", "", page, flags=re.S)
    # Self-contained: no scripts or images fetched from elsewhere.
    assert not re.search(r"<script[^>]+src=", page) and 'src="http' not in page


@pytest.fixture(scope="module")
def demo_pages(demo_run: Path, demo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _render_all(demo, tmp_path_factory.mktemp("demo-reports"), demo_run)


@pytest.fixture(scope="module")
def early_pages(demo_run: Path, demo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("early")
    results = root / "results"
    for stage in EARLY_STAGES:
        shutil.copytree(demo / stage, results / stage)
    return _render_all(results, root / "html", demo_run)


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_report_on_demo(demo_pages: dict[str, str], name: str) -> None:
    page = demo_pages[name]
    _check_page(name, page)
    if name == "training":  # the demo config stops before the encoders (until the lead wires them)
        assert NOT_RUN in page or IMG_PNG.search(page)
        return
    assert IMG_PNG.search(page), name
    assert 'class="dataframe pmcflow-table"' in page


def test_dataset_report_content_on_demo(demo_pages: dict[str, str]) -> None:
    page = demo_pages["dataset"]
    for stage in ("list", "acquire", "parse", "decompose", "enrich"):
        assert f"<td>{stage}</td>" in page
    assert "older_version" in page and "retracted" in page  # the demo's rejections
    assert "whitespace-separated word" in page  # the tokenizer is named
    assert "Modality (filter stage): not run in this workflow" in page or "Predicted modality" in page


def test_detector_and_enrichment_content_on_demo(demo_pages: dict[str, str]) -> None:
    det = demo_pages["detector"]
    assert "-default" in det and "demo_figures" in det and "98.58" in det  # shipped model or xycut
    enr = demo_pages["enrichment"]
    assert "fallback-full" in enr and "rules" in enr and "token_f1_macro" in enr


def test_reports_show_chance_cis_and_provenance_on_demo(demo_pages: dict[str, str]) -> None:
    det = demo_pages["detector"]
    # The demo trains its detector for a few epochs on a few hundred rendered figures at most.
    assert "smoke-test model: ultralytics" in det and "not a quality measure" in det
    assert "shipped model: ultralytics" in det  # the -default detector: the package's weights
    assert "<td>smoke-test</td>" in det and "<td>shipped</td>" in det  # per row of the metrics table
    assert "records no confidence intervals" in det
    ds = demo_pages["dataset"]
    if "Predicted modality" in ds:  # the filter ran: its classifier is named, with chance and CI
        assert "shipped model: mobilenetv3" in ds and "chance (1/k)" in ds and "Wilson" in ds
        assert CI_CELL.search(ds)
    tr = demo_pages["training"]
    if "Encoder training: " + NOT_RUN not in tr:
        assert "smoke-test model: tiny-" in tr and "not a quality measure" in tr
        assert "<th>chance</th>" in tr and "chance acc (1/k)" in tr and "chance macro-F1" in tr
        assert "majority acc" in tr and CI_CELL.search(tr)
        assert "K/N" in tr


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_report_without_later_stages(early_pages: dict[str, str], name: str) -> None:
    page = early_pages[name]
    _check_page(name, page)
    expected_not_run = {
        "dataset": ["Modality (filter stage): " + NOT_RUN, "Shards: " + NOT_RUN, "Examples: " + NOT_RUN],
        "detector": ["Detector evaluation: " + NOT_RUN, "Decomposition examples: " + NOT_RUN],
        "enrichment": ["Enrichment: " + NOT_RUN],
        "training": ["Encoder training: " + NOT_RUN, "Retrieval evaluation: " + NOT_RUN],
    }[name]
    for text in expected_not_run:
        assert text in page, (name, text)
    if name == "dataset":  # the stages that ran are still counted and charted
        assert IMG_PNG.search(page) and "<td>parse</td>" in page
    # Every stage without outputs is listed as not run, with the file it looked for and no numbers.
    for stage in EARLY_NOT_RUN[name]:
        rows = _stage_rows(page, stage)
        assert rows, (name, stage)
        for cells in rows:
            assert cells[1] == "not run", (name, stage, cells)
            assert not re.search(r"\d", "".join(cells)), (name, stage, cells)  # no zeros, no stale counts
    if name != "training":  # the stages that ran show as such
        for stage in ("list", "acquire", "parse"):
            assert _stage_rows(page, stage)[0][1] == "ran", (name, stage)


def test_cli_writes_html(demo: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(demo / "listing", results / "listing")
    out = tmp_path / "r" / "dataset.html"
    assert (
        cli(
            [
                "dataset",
                "--results",
                str(results),
                "--out",
                str(out),
                "--workdir",
                str(REPO),
                "-p",
                "n_examples=2",
            ]
        )
        == 0
    )
    page = out.read_text(encoding="utf-8")
    assert ">Counts through every stage<" in page and "<td>list</td>" in page
    assert not list(out.parent.glob(".*tmp*"))  # the atomic write left nothing behind
    # Reproducible: the same inputs give the same bytes (papermill's random cell id is pinned).
    again = render_report(
        "dataset", {"results_dir": str(results), "n_examples": 2}, tmp_path / "again.html", cwd=REPO
    )
    assert again.read_bytes() == out.read_bytes()


# --------------------------------------------------------------------------------------------
# Complete results directory (slow): filter table, shards, encoder, evaluation
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def full_results(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's stages plus later-stage outputs made by the real shard/train/evaluate code.

    The filter stage's table is the real-image toy DATASET (pmcflow_testing.encoder_toydata: crops of
    scikit-image photographs and charts, with a modality column); nothing is rejected by it, and
    its counts say so.
    """
    from pmcflow_testing.encoder_toydata import make_toy_dataset

    from pmcflow.encoders.benchmarks import build_demo_benchmarks
    from pmcflow.encoders.compare import compare_models
    from pmcflow.encoders.evaluate import evaluate_encoder
    from pmcflow.encoders.train import train_encoder
    from pmcflow.shard import shard_dataset

    root = tmp_path_factory.mktemp("full")
    results = root / "results"
    for stage in DEMO_STAGES:
        (results / stage).parent.mkdir(parents=True, exist_ok=True)
        (results / stage).symlink_to(demo / stage, target_is_directory=True)

    toy = root / "toy"
    ds = pl.read_parquet(make_toy_dataset(toy, n_per_class=14, seed=5, size=64))
    ds = ds.with_columns(pl.col("crop_path").map_elements(lambda p: str(toy / p), return_dtype=pl.String))
    dataset_path = results / "filter" / "c000000" / "dataset.parquet"
    T.write_table(ds.to_arrow(), S.DATASET, dataset_path)
    T.write_table([], S.REJECTIONS, results / "filter" / "rejections.parquet")
    per_chunk = T.counts_record("filter", ds.height, ds.height, {}, chunk="c000000")
    T.write_counts(results / "filter" / "counts.json", T.merge_counts("filter", [per_chunk]))

    seed = 20260415
    shard_dataset(
        {"splits": {"train": 0.6, "val": 0.15, "test": 0.25}, "max_samples_per_shard": 10},
        seed,
        [str(dataset_path)],
        str(results / "shards"),
    )
    run = "tiny-clip"
    train_encoder(
        {"model": "tiny-vit-bpe", "epochs": 2, "batch_size": 8, "timeout_s": 600},
        seed,
        str(results / "shards"),
        str(results / "encoders" / run),
    )
    # The demo benchmarks, a baseline beside the run, and the embedding analysis between them.
    bench = build_demo_benchmarks(root / "bench", seed=0)
    assert bench
    ev_cfg = {
        "bootstrap": 50,
        "linear_probe": {"epochs": 5},
        "baselines": {"untrained": {"model": "tiny-vit-bpe"}},
    }
    yaml_path = [root / "bench" / "benchmarks.yaml"]
    evaluate_encoder(
        ev_cfg,
        seed,
        str(results / "encoders" / run),
        str(results / "shards"),
        str(results / "evaluation" / run),
        benchmarks_yaml=yaml_path,
    )
    base = results / "evaluation" / "baselines" / "untrained"
    evaluate_encoder(
        ev_cfg,
        seed,
        None,
        str(results / "shards"),
        str(base),
        baseline="untrained",
        benchmarks_yaml=yaml_path,
    )
    compare_models(
        {run: results / "evaluation" / run / "embeddings.npz", "baseline:untrained": base / "embeddings.npz"},
        {"max_images": 100, "permutations": 20, "perplexity": 10},
        seed,
        results / "evaluation" / "embeddings",
    )
    return results


@pytest.fixture(scope="module")
def full_pages(demo_run: Path, full_results: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _render_all(full_results, tmp_path_factory.mktemp("full-html"), demo_run, run_name="tiny-clip")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REPORTS))
def test_report_on_complete_results(full_pages: dict[str, str], name: str) -> None:
    page = full_pages[name]
    _check_page(name, page)
    assert IMG_PNG.search(page), name
    if name == "training":
        assert NOT_RUN not in page
        for k in (1, 10, 50, 200):
            assert f"<td>R@{k}</td>" in page
        assert "img→txt" in page and "txt→img" in page
        # the baseline beside the run, and the embedding analysis between the two
        assert "<td>baseline:untrained</td>" in page and "baseline model, evaluated by the same code" in page
        assert "MMD permutation tests between the models" in page and "20 permutations" in page
        assert "test:modality" in page  # zero-shot on the split's modality labels
        assert "smoke-test model: tiny-vit-bpe" in page  # 2 epochs on a toy set
        assert "<th>chance</th>" in page and "chance acc (1/k)" in page and CI_CELL.search(page)
    if name == "dataset":
        assert "<td>filter</td>" in page and "<td>shard</td>" in page
        assert "Predicted modality" in page and "retinal fundus" in page
        assert "WebDataset shards per split" in page


# --------------------------------------------------------------------------------------------
# Headless browser (slow)
# --------------------------------------------------------------------------------------------
def screenshot(html_path: Path, png: Path, height: int = 2000) -> np.ndarray:
    from pmcflow.report.screenshot import screenshot as shoot

    shoot(html_path, png, width=1280, height=height, browser=str(CHROMIUM))
    with Image.open(png) as im:
        return np.asarray(im.convert("L"), dtype=np.float32)


@pytest.mark.slow
def test_reports_in_headless_chromium(full_pages: dict[str, str], tmp_path: Path) -> None:
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium); this test installs nothing")
    for name, page in sorted(full_pages.items()):
        html_path = tmp_path / f"{name}.html"
        html_path.write_text(page, encoding="utf-8")
        pixels = screenshot(html_path, tmp_path / f"{name}.png")
        assert pixels.shape == (2000, 1280)
        # A blank (or error) page is one flat colour; a report has text, tables and plots.
        assert pixels.std() > 20, (name, float(pixels.std()))
        assert (pixels < 128).mean() > 0.01, name  # enough dark ink (text, axes)
        top = pixels[:600]
        assert top.std() > 10, name  # the title and first section are drawn at the top
