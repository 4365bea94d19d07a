"""Encoder runs of a configuration: train.variants (the text ablation) -> one run per variant."""

from __future__ import annotations

from pathlib import Path

import pytest

from pmcflow import runs as R
from pmcflow.encoders import train as TR

TRAIN = {
    "run": "clip",
    "epochs": 2,
    "text_fields": None,
    "variants": {
        "caption": {"text_fields": ["caption"]},
        "subcaption+summary": {"text_fields": ["shared_text", "subcaption", "summary"], "epochs": 3},
    },
}


def test_one_run_per_variant_with_its_keys_over_the_section() -> None:
    assert R.encoder_runs(TRAIN) == ["clip.caption", "clip.subcaption+summary"]
    assert R.run_settings(TRAIN, "clip.caption") == {"epochs": 2, "text_fields": ["caption"]}
    assert R.run_settings(TRAIN, "clip.subcaption+summary") == {
        "epochs": 3,
        "text_fields": ["shared_text", "subcaption", "summary"],
    }
    assert R.variant_of(TRAIN, "clip.caption") == "caption"
    # The settings are what the trainer accepts (no workflow keys left over).
    for run in R.encoder_runs(TRAIN):
        TR.TrainSettings.from_section(R.run_settings(TRAIN, run))


def test_without_variants_the_run_is_train_run() -> None:
    plain = {"run": "tiny", "epochs": 1, "variants": {}}
    assert R.encoder_runs(plain) == ["tiny"]
    assert R.run_settings(plain, "tiny") == {"epochs": 1}
    assert R.variant_of(plain, "tiny") is None


def test_unknown_runs_and_workflow_keys_in_a_variant_are_errors() -> None:
    with pytest.raises(R.RunError, match="not an encoder run"):
        R.run_settings(TRAIN, "clip")
    with pytest.raises(R.RunError, match=r"train.variants.bad: \['run'\]"):
        R.encoder_runs({"run": "clip", "variants": {"bad": {"run": "x"}}})
    with pytest.raises(TR.TrainError, match=r"train\.epoch: unknown key"):
        TR.TrainSettings.from_section(R.run_settings({"run": "c", "variants": {"v": {"epoch": 3}}}, "c.v"))


def test_best_epoch_by_metric_then_mrr_then_the_later_epoch() -> None:
    rows = [
        {"epoch": 1, "R@200": 0.50, "mrr": 0.10},
        {"epoch": 2, "R@200": 0.70, "mrr": 0.20},
        {"epoch": 3, "R@200": 0.70, "mrr": 0.25},
        {"epoch": 4, "R@200": 0.60, "mrr": 0.90},
    ]
    assert TR.best_epoch(rows, "R@200")["epoch"] == 3
    assert TR.best_epoch(rows, "mrr")["epoch"] == 4
    tie = [{"epoch": 1, "R@200": 1.0, "mrr": 0.5}, {"epoch": 2, "R@200": 1.0, "mrr": 0.5}]
    assert TR.best_epoch(tie, "R@200")["epoch"] == 2


def test_epoch_checkpoints_are_ordered_by_number(tmp_path: Path) -> None:
    for name in ("epoch_10.pt", "epoch_2.pt", "epoch_1.pt", "epoch_latest.pt", "results.jsonl"):
        (tmp_path / name).write_bytes(b"")
    assert [e for e, _ in TR.epoch_checkpoints(tmp_path)] == [1, 2, 10]


def test_select_metric_is_checked() -> None:
    with pytest.raises(TR.TrainError, match="select_metric"):
        TR.TrainSettings.from_section({"select_metric": "R@3"})
