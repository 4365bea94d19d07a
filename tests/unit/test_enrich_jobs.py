"""Enrichment as two jobs per chunk (subcaptions, then summaries) gives the bytes of one process,
and its counts reconcile: the subcaption job's rejections are the chunk's too."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pmcflow import schema as S
from pmcflow.config import load_config
from pmcflow.enrich.settings import EnrichSettings
from pmcflow.enrich.stage import cli, cli_subcaption, enrich_chunk, subcaption_chunk

REPO = Path(__file__).resolve().parents[2]
CAPTION = (
    "Effects of drug X on mouse liver. (A) H&E staining of liver sections from control mice. "
    "(B) The same staining after 4 weeks of drug X. Scale bars, 50 um."
)


def _write(path: Path, rows: list[dict]) -> str:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path)


def _chunk(tmp: Path) -> dict[str, str]:
    art = {"article_uid": "PMC1.1", "pmcid": "PMC1", "doi": "10.1/x", "pmid": "1", "license_code": "CC BY",
           "is_retracted": False}  # fmt: skip
    fig = {"figure_uid": "PMC1.1/f1", "article_uid": "PMC1.1", "pmcid": "PMC1", "figure_id": "f1",
           "label": "Figure 1", "caption": CAPTION, "caption_title": None}  # fmt: skip
    subfigures = [
        {"subfigure_uid": f"PMC1.1/f1/{i}", "figure_uid": "PMC1.1/f1", "article_uid": "PMC1.1", "pmcid": "PMC1",
         "version": 1, "chunk": "c000001", "panel_label": letter, "crop_path": None}  # fmt: skip
        for i, letter in enumerate(("a", "b"))
    ]
    # A subfigure of a figure the parse tables do not have: rejected by the subcaption job.
    subfigures.append({**subfigures[0], "subfigure_uid": "PMC1.1/f9/0", "figure_uid": "PMC1.1/f9"})
    mention = {"mention_uid": "PMC1.1/m1", "article_uid": "PMC1.1", "pmcid": "PMC1", "figure_id": "f1",
               "text": "Drug X caused marked steatosis in the liver (Fig. 1B) compared with controls (Fig. 1A).",
               "panel_letters": ["b"]}  # fmt: skip
    return {
        "subfigures": _write(tmp / "subfigures.parquet", subfigures),
        "figures": _write(tmp / "figures.parquet", [fig]),
        "articles": _write(tmp / "articles.parquet", [art]),
        "mentions": _write(tmp / "mentions.parquet", [mention]),
    }


def test_two_jobs_give_the_bytes_of_one_process(tmp_path):
    cfg = EnrichSettings.from_config(load_config([REPO / "config" / "demo.yaml"]))
    t = _chunk(tmp_path)
    one = tmp_path / "one"
    rec_one = enrich_chunk(cfg, "c000001", t["subfigures"], t["figures"], t["mentions"], t["articles"], str(one))

    two = tmp_path / "two"
    two.mkdir()
    kept = subcaption_chunk(
        cfg, "c000001", t["subfigures"], t["figures"], t["articles"], str(two),
    )  # fmt: skip
    assert kept == 2
    subs = pq.read_table(two / "subcaptions.parquet")
    assert subs.schema.equals(S.SUBCAPTIONS)
    assert [r["subcaption"] for r in subs.to_pylist()][1].startswith("(B) The same staining")
    rec_two = enrich_chunk(
        cfg, "c000001", t["subfigures"], t["figures"], t["mentions"], t["articles"], str(two),
        subcaptions=(str(two / "subcaptions.parquet"), str(two / "subcaption_rejections.parquet")),
    )  # fmt: skip
    assert rec_two == rec_one
    assert rec_two["in"] == 3 and rec_two["kept"] == 2 and rec_two["rejected"] == {"figure_missing": 1}
    for name in ("enriched.parquet", "rejections.parquet", "counts.json"):
        assert (one / name).read_bytes() == (two / name).read_bytes(), name


def test_the_cli_runs_the_two_steps(tmp_path, capsys):
    t = _chunk(tmp_path)
    common = ["-c", str(REPO / "config" / "demo.yaml"), "--chunk", "c000001", "--subfigures", t["subfigures"],
              "--figures", t["figures"], "--articles", t["articles"]]  # fmt: skip
    subs, rej = str(tmp_path / "s.parquet"), str(tmp_path / "r.parquet")
    assert cli_subcaption([*common, "--out", subs, "--rejections", rej]) == 0
    assert "subcaptions c000001: kept=2" in capsys.readouterr().out
    out = tmp_path / "e"
    assert cli([*common, "--mentions", t["mentions"], "--out", str(out), "--subcaptions", subs, rej]) == 0
    counts = json.loads((out / "counts.json").read_text())
    assert counts["kept"] == 2 and counts["rejected"] == {"figure_missing": 1}


def test_a_caption_without_labels_reaches_its_subfigures_by_reading_order(tmp_path):
    """The subcaption job passes each subfigure's figure count and reading order: a real legend
    that lost its labels (EMBO Mol Med 10.15252/emmm.201505492, Fig. 5, CC BY 4.0) cut into as many
    clear pieces as the figure has subfigures gives each its piece; a figure with one subfigure
    missing from the table keeps the full caption."""
    from pmcflow.enrich.evaluate import load_rows

    legend = next(
        r
        for r in load_rows(REPO / "tests" / "fixtures" / "subcaptions" / "sourcedata_panel_legends_dev.jsonl")
        if r["id"] == "sourcedata:10.15252/emmm.201505492:Figure 5"
    )
    caption, title = legend["caption_reconstructed"], legend["figure_title"]
    panels = [g["text"] for g in legend["subcaptions"]]
    assert len(panels) == 3
    art = {"article_uid": "PMC2.1", "pmcid": "PMC2", "doi": "10.1/y", "pmid": "2", "license_code": "CC BY",
           "is_retracted": False}  # fmt: skip
    figs = [
        {"figure_uid": f"PMC2.1/{f}", "article_uid": "PMC2.1", "pmcid": "PMC2", "figure_id": f, "label": f,
         "caption": caption, "caption_title": title}  # fmt: skip
        for f in ("f1", "f2")
    ]
    subfigures = [
        {"subfigure_uid": f"PMC2.1/{f}/s{i}", "figure_uid": f"PMC2.1/{f}", "article_uid": "PMC2.1", "pmcid": "PMC2",
         "version": 1, "chunk": "c000002", "panel_label": None, "crop_path": None, "graphic_index": 0,
         "subfigure_index": i}  # fmt: skip
        for f, indices in (("f1", (2, 0, 1)), ("f2", (0, 2)))  # f2's s1 is not in the table
        for i in indices
    ]
    t = {
        "subfigures": _write(tmp_path / "subfigures.parquet", subfigures),
        "figures": _write(tmp_path / "figures.parquet", figs),
        "articles": _write(tmp_path / "articles.parquet", [art]),
    }
    cfg = EnrichSettings.from_config(load_config([REPO / "config" / "demo.yaml"]))
    assert subcaption_chunk(cfg, "c000002", t["subfigures"], t["figures"], t["articles"], str(tmp_path)) == 5
    rows = {r["subfigure_uid"]: r for r in pq.read_table(tmp_path / "subcaptions.parquet").to_pylist()}
    for i in range(3):
        r = rows[f"PMC2.1/f1/s{i}"]
        assert (r["subcaption"], r["subcaption_source"], r["subcaption_reason"], r["shared_text"]) == (
            panels[i], "rules", "reading_order", title
        )
    for i in (0, 2):
        r = rows[f"PMC2.1/f2/s{i}"]
        assert (r["subcaption"], r["subcaption_source"], r["subcaption_reason"]) == (
            caption, "fallback-full", "no_labels"
        )
