"""Rule splitter against the human SourceData panel segmentation (tests/fixtures/subcaptions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pmcflow.enrich.evaluate import evaluate_splitter, load_rows, score_figure, split_of
from pmcflow.enrich.rules import Segment

FIXTURE = (
    Path(__file__).resolve().parents[1] / "fixtures" / "subcaptions" / "sourcedata_panel_legends_dev.jsonl"
)


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return load_rows(FIXTURE)


def test_split_is_by_article_and_stable(rows: list[dict]) -> None:
    by_doi: dict[str, set[str]] = {}
    for r in rows:
        by_doi.setdefault(r["doi"], set()).add(split_of(r["doi"]))
    assert all(len(v) == 1 for v in by_doi.values())
    assert sum(1 for r in rows if split_of(r["doi"]) == "test") == 30


def test_score_figure_alignment() -> None:
    gold = [
        {"text": "(A) foo bar.", "labels_heuristic": ["A"]},
        {"text": "(B) baz qux.", "labels_heuristic": ["B"]},
    ]
    perfect = score_figure("f", [Segment(["b"], "(B) baz qux."), Segment(["a"], "(A) foo bar.")], gold)
    assert perfect.exact == [True, True] and perfect.count_match and perfect.label_pairs == [True, True]
    merged = score_figure("f", [Segment(["a", "b"], "(A) foo bar. (B) baz qux.")], gold)
    assert merged.exact == [False, False] and merged.f1[1] == 0.0 and not merged.count_match


def test_rules_beat_no_split_and_hold_on_labelled_legends(rows: list[dict]) -> None:
    res = evaluate_splitter(rows)
    for split in ("dev", "test"):
        e = res[split]
        assert e["token_f1_macro"] > e["no_split"]["token_f1_macro"] + 0.4
        assert e["exact_match_rate"] > e["no_split"]["exact_match_rate"] + 0.4
    # legends whose every gold panel still carries its label (like real PMC captions)
    assert res["dev"]["labelled_figures"]["token_f1_macro"] >= 0.95
    assert res["test"]["labelled_figures"]["token_f1_macro"] >= 0.90
