"""End to end on rendered figures: render -> detect (CLI) -> eval-boxes (CLI), plus a learned backend.

Uses ``pmcflow render`` when the renderer is installed; otherwise the detector's toy generator.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from pmcflow.cli import main

HAVE_RENDER = importlib.util.find_spec("pmcflow.synth.render") is not None


def _dataset(out: Path, n: int, seed: int, size: int = 256) -> Path:
    if HAVE_RENDER:
        assert (
            main(["render", "--n", str(n), "--seed", str(seed), "--size", str(size), "--out", str(out)]) == 0
        )
        return out
    from pmcflow_testing.detect_toydata import make_dataset

    return make_dataset(out, n, seed=seed, size=(size, size))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _dataset(tmp_path_factory.mktemp("rendered"), 12, seed=123)


def test_xycut_on_rendered_figures(
    tmp_path: Path, rendered: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    images = sorted(str(p) for p in (rendered / "images").iterdir())  # PNG and JPEG figures
    preds = tmp_path / "preds.json"
    assert main(["detect", "--backend", "xycut", "--score-threshold", "0", "--out", str(preds), *images]) == 0
    capsys.readouterr()
    assert (
        main(
            [
                "eval-boxes",
                str(rendered / "annotations.json"),
                str(preds),
                "--out-json",
                str(tmp_path / "m.json"),
            ]
        )
        == 0
    )
    m = json.loads(capsys.readouterr().out)
    assert m["n_images"] == 12 and m["n_unmatched_preds"] == 0
    # a gutter baseline finds most rendered panels
    assert m["f1"] > 0.5 and m["map50"] > 0.3, m
    full = json.loads((tmp_path / "m.json").read_text())
    assert full["pr_curve"] and full["pr_curve"][0]["threshold"] >= full["pr_curve"][-1]["threshold"]


@pytest.mark.slow
def test_ultralytics_train_detect_eval(
    tmp_path: Path, rendered: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train = _dataset(tmp_path / "train", 8, seed=5, size=160)
    out = tmp_path / "model"
    sets = ["epochs=2", "imgsz=96", "batch_size=4", "workers=0", "device=cpu"]
    assert (
        main(
            [
                "train-detector",
                "--backend",
                "ultralytics",
                "--train",
                str(train),
                "--val",
                str(rendered),
                "--out",
                str(out),
                *[a for s in sets for a in ("--set", s)],
            ]
        )
        == 0
    )
    images = sorted(str(p) for p in (rendered / "images").iterdir())  # PNG and JPEG figures
    preds = tmp_path / "preds.json"
    assert (
        main(
            [
                "detect",
                "--backend",
                "ultralytics",
                "--checkpoint",
                str(out / "model.pt"),
                "--score-threshold",
                "0.001",
                "--out",
                str(preds),
                *images,
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["eval-boxes", str(rendered / "annotations.json"), str(preds)]) == 0
    m = json.loads(capsys.readouterr().out)
    assert 0.0 <= m["map"] <= 1.0 and m["n_gt"] > 0
