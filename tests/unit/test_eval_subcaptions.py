"""``pmcflow eval-subcaptions``: the splitter's measures on gold files, for the rules or another
system's ``split-caption`` output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pmcflow.enrich import subcaption
from pmcflow.enrich.evaluate import (
    LABEL_WISE,
    MATCH_F1,
    PANELS,
    cli,
    contract_segments,
    evaluate_labelwise,
    evaluate_splitter,
    gold_row,
    load_rows,
    panel_segments,
    score_figure,
)
from pmcflow.enrich.rules import panel_segments as contract_panels
from pmcflow.enrich.rules import shared_text, split_caption

FX = Path(__file__).resolve().parents[1] / "fixtures" / "subcaptions"
SOURCEDATA = FX / "sourcedata_panel_legends_dev.jsonl"
PLOS = FX / "plos_labelwise.jsonl"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    rc = cli([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if out.out.strip() else {}), out.err


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8")
    return path


def test_scores_the_fixture_sets_as_the_library_does(capsys: pytest.CaptureFixture[str]) -> None:
    rc, res, _ = _run(capsys, SOURCEDATA, PLOS, "--by-split", "--baseline")
    assert rc == 0 and res["splitter"] == "rules" and res["rejected"] == []
    sd, plos = res["files"][str(SOURCEDATA)], res["files"][str(PLOS)]
    assert sd["lines"] == sd["scored"] == 151 and set(sd) == {"lines", "scored", "rejected", PANELS}
    assert plos["lines"] == plos["scored"] == 675 and set(plos) == {"lines", "scored", "rejected", LABEL_WISE}
    assert sd[PANELS] == evaluate_splitter(load_rows(SOURCEDATA))
    assert plos[LABEL_WISE] == evaluate_labelwise(load_rows(PLOS))
    # the headline numbers of the README
    assert sd[PANELS]["all"]["matched_at_0_9"] == pytest.approx(0.859, abs=0.02)
    assert sd[PANELS]["all"]["matched_at_0_9"] > sd[PANELS]["all"]["no_split"]["matched_at_0_9"] + 0.4
    assert res["pooled"][PANELS] == sd[PANELS] and res["pooled"][LABEL_WISE] == plos[LABEL_WISE]
    # --n-panels: each legend's panel count, as evaluate_splitter's panels_hint gives it
    rc, hinted, _ = _run(capsys, SOURCEDATA, "--n-panels")
    assert rc == 0 and hinted["n_panels"] is True
    assert hinted["files"][str(SOURCEDATA)][PANELS] == evaluate_splitter(
        load_rows(SOURCEDATA), include_baseline=False, panels_hint=True
    )["all"]


@pytest.mark.parametrize("gold", [SOURCEDATA, PLOS], ids=["sourcedata", "plos"])
def test_split_caption_output_scores_as_the_splitter(
    gold: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--write-inputs | pmcflow split-caption | --predictions: the same scores as in-process."""
    inputs, preds = tmp_path / "in.jsonl", tmp_path / "pred.jsonl"
    assert _run(capsys, gold, "--n-panels", "--write-inputs", inputs)[0] == 0
    assert subcaption.cli(["-i", str(inputs), "-o", str(preds)]) == 0
    rc, via_output, _ = _run(capsys, gold, "--n-panels", "--by-split", "--predictions", preds)
    assert rc == 0 and via_output["splitter"] == "predictions"
    rc, in_process, _ = _run(capsys, gold, "--n-panels", "--by-split")
    assert rc == 0
    assert via_output["files"] == in_process["files"]


def test_contract_segments_rebuild_the_splitters_segments() -> None:
    for r in load_rows(SOURCEDATA)[:60]:
        title = r.get("figure_title")
        split = split_caption(r["caption_reconstructed"], title)
        record = {"segments": [s.to_json() for s in contract_panels(split)], "shared_text": shared_text(split)}
        rebuilt = contract_segments(json.loads(json.dumps(record)), title)
        assert panel_segments(rebuilt, title) == panel_segments(split, title)


def test_other_predictions_are_scored_not_the_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each legend's body as one segment scores as the library's no-split baseline."""
    rows = load_rows(SOURCEDATA)
    whole = []
    for r in rows:
        title, caption = r.get("figure_title"), " ".join(r["caption_reconstructed"].split())
        body = caption[len(title) :].strip() if title and caption.startswith(title) else caption
        whole.append({"segments": [{"labels": [], "text": body}], "shared_text": title or ""})
    preds = _write(tmp_path / "whole.jsonl", whole)
    rc, res, _ = _run(capsys, SOURCEDATA, "--predictions", preds, "--baseline")
    assert rc == 0
    got = res["files"][str(SOURCEDATA)][PANELS]
    assert got["matched_at_0_9"] == got["no_split"]["matched_at_0_9"] < 0.2


def test_the_three_gold_forms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    caption = "CT of the chest. Axial (A) and coronal (B) CT. (C) Histology, H&E."
    gold = _write(
        tmp_path / "gold.jsonl",
        [
            # a label set alone (HES-SO/NLM style): right, then one missing
            {"caption": caption, "labels": ["A", "B", "C"]},
            {"caption": caption, "labels": ["a", "b", "c", "d"]},
            # split-caption form, every segment labelled: label-wise, shared text scored
            {
                "caption": caption,
                "segments": [
                    {"labels": ["a", "b"], "text": "Axial (A) and coronal (B) CT."},
                    {"labels": ["c"], "text": "(C) Histology, H&E."},
                ],
                "shared_text": "CT of the chest.",
            },
            # a caption without labels, rightly left without
            {"caption": "A single chest radiograph.", "labels": []},
            # unlabelled gold panels: scored as SourceData is
            {
                "caption": "Mice were fed for 4 weeks. Body weight of mice. Liver sections stained with H&E.",
                "segments": [{"text": "Body weight of mice."}, {"text": "Liver sections stained with H&E."}],
            },
        ],
    )
    rc, res, _ = _run(capsys, gold, "--errors", tmp_path / "errors.jsonl")
    assert rc == 0
    entry = res["files"][str(gold)]
    assert entry["lines"] == entry["scored"] == 5 and entry["rejected"] == 0
    lw = entry[LABEL_WISE]
    assert lw["figures"] == 4 and lw["labelled_figures"] == 3
    assert lw["label_set_accuracy"] == 0.75 and lw["misses"] == {"missed_some": 1}
    assert lw["gold_segments"] == 2 and lw["matched_at_0_9"] == 1.0
    assert lw["shared_text_f1"] == 1.0  # only the row that gives a shared text is scored on it
    assert entry[PANELS]["figures"] == 1 and entry[PANELS]["gold_segments"] == 2
    errors = [json.loads(x) for x in (tmp_path / "errors.jsonl").read_text().splitlines()]
    assert errors[0]["line"] == 2 and errors[0]["label_set"] == "missed_some"
    assert errors[0]["gold_labels"] == ["a", "b", "c", "d"] and errors[0]["predicted_labels"] == ["a", "b", "c"]
    assert all(e["line"] != 1 for e in errors)


def test_errors_file_lists_each_figure_with_a_miss(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    errors = tmp_path / "errors.jsonl"
    assert _run(capsys, SOURCEDATA, "--errors", errors)[0] == 0
    listed = [json.loads(x) for x in errors.read_text(encoding="utf-8").splitlines()]
    expected = []
    for r in load_rows(SOURCEDATA):
        title = r.get("figure_title")
        sc = score_figure(str(r["id"]), panel_segments(split_caption(r["caption_reconstructed"], title), title), r["subcaptions"])
        if any(f < MATCH_F1 for f in sc.f1):
            expected.append((str(r["id"]), sum(f < MATCH_F1 for f in sc.f1)))
    assert [(e["id"], sum(g["f1"] < MATCH_F1 for g in e["gold"])) for e in listed] == expected
    assert sum(n for _, n in expected) > 0


def test_bad_lines_are_rejected_with_reasons(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = {"caption": "(A) Mouse. (B) Rat.", "labels": ["a", "b"]}
    gold = _write(
        tmp_path / "gold.jsonl",
        [
            good,
            "{not json",
            {"labels": ["a"]},
            {"caption": "x", "segments": [{"labels": ["a"]}]},
            {"caption_reconstructed": "(A) x.", "subcaptions": []},
            {"caption": "(A) x.", "labels": "a"},
            "",
            {"caption": "(A) x.", "n_panels": 0, "labels": ["a"]},
            {"caption": "(A) x."},
            good,
        ],
    )
    rc, res, err = _run(capsys, gold)
    assert rc == 1
    entry = res["files"][str(gold)]
    assert entry["lines"] == 9 and entry["scored"] == 2 and entry["rejected"] == 7
    assert entry["lines"] == entry["scored"] + entry["rejected"]
    reasons = {r["line"]: r["reason"] for r in res["rejected"]}
    assert sorted(reasons) == [2, 3, 4, 5, 6, 8, 9]
    assert "caption" in reasons[3] and '"text"' in reasons[4] and "empty" in reasons[5]
    assert "list" in reasons[6] and "positive integer" in reasons[8] and "no gold" in reasons[9]
    assert f"{gold}:2:" in err
    assert entry[LABEL_WISE]["label_set_accuracy"] == 1.0

    # a prediction line that is not split-caption output rejects its row, not the run
    preds = _write(tmp_path / "pred.jsonl", [{"segments": []}] * 8 + ['{"segments": "A"}'])
    rc, res, _ = _run(capsys, gold, "--predictions", preds)
    assert rc == 1
    assert [r for r in res["rejected"] if r["line"] == 10][0]["reason"].startswith("prediction line 9")
    assert res["files"][str(gold)]["scored"] == 1


def test_predictions_must_line_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gold = _write(tmp_path / "gold.jsonl", [{"caption": "(A) x. (B) y.", "labels": ["a", "b"]}] * 3)
    preds = _write(tmp_path / "pred.jsonl", [{"segments": []}] * 2)
    rc, res, err = _run(capsys, gold, "--predictions", preds)
    assert rc == 2 and res == {} and "has 2 lines for the 3" in err
    assert _run(capsys, gold, "--predictions", tmp_path / "missing.jsonl")[0] == 2
    with pytest.raises(SystemExit):
        cli([str(gold), str(gold), "--predictions", str(preds)])


def test_gold_row_forms() -> None:
    sd = gold_row(load_rows(SOURCEDATA)[0], "f", 1)
    assert sd.kind == PANELS and sd.row["doi"] == load_rows(SOURCEDATA)[0]["doi"]
    lw = gold_row(load_rows(PLOS)[0], "f", 1)
    assert lw.kind == LABEL_WISE and lw.row["article"] == load_rows(PLOS)[0]["article"]
    plain = gold_row({"caption": "x (A).", "segments": [{"labels": ["A"], "text": "x (A)."}]}, "f", 7)
    assert plain.kind == LABEL_WISE and plain.row["gold"]["labels"] == ["a"] and plain.row["id"] == "f:7"
    assert plain.row["gold"]["shared_text"] is None
