"""Container references pinned by digest (pmcflow.containerpin): parsing, what rules get, checks."""

from __future__ import annotations

import hashlib

from pmcflow import containerpin as cp


def test_split_and_rule_image(tmp_path):
    d = "ab" * 32
    assert cp.split(f"containers/base.sif@sha256:{d}") == ("containers/base.sif", d)
    assert cp.split("containers/base.sif") == ("containers/base.sif", None)
    assert cp.split("containers/base.sif@sha256:xyz") == ("containers/base.sif@sha256:xyz", None)
    # a local file is run as the file; a registry reference keeps its digest for the registry
    assert cp.rule_image(f"containers/base.sif@sha256:{d}") == "containers/base.sif"
    assert cp.rule_image(f"oras://ghcr.io/lab/base:0.1@sha256:{d}") == f"oras://ghcr.io/lab/base:0.1@sha256:{d}"
    assert cp.rule_image("containers/base.sif") == "containers/base.sif"


def test_problems_checks_the_bytes(tmp_path):
    img = tmp_path / "base.sif"
    img.write_bytes(b"not really an image, but bytes to pin")
    good = hashlib.sha256(img.read_bytes()).hexdigest()
    images = {
        "base": f"{img}@sha256:{good}",
        "mmdet": f"{tmp_path}/missing.sif@sha256:{good}",
        "vllm": str(img),
    }
    assert cp.problems(images, {"base"}) == ([], [])
    errors, warnings = cp.problems(images, {"base", "mmdet", "vllm"})
    assert errors == [f"containers.mmdet: {tmp_path}/missing.sif does not exist (make containers builds it)"]
    assert len(warnings) == 1 and warnings[0].startswith("containers.vllm:") and "not pinned" in warnings[0]
    img.write_bytes(b"changed")
    errors, _ = cp.problems(images, {"base"})
    assert len(errors) == 1 and "has sha256" in errors[0] and good in errors[0]
    # registry references are left to the registry
    assert cp.problems({"base": f"docker://x/y@sha256:{good}"}, {"base"}) == ([], [])


def test_overlay_round_trips(tmp_path):
    import yaml

    img = tmp_path / "base.sif"
    img.write_bytes(b"image bytes")
    out = tmp_path / "images.yaml"
    assert cp.main([str(out), f"base={img}"]) == 0
    pinned = yaml.safe_load(out.read_text())["containers"]["base"]
    assert cp.split(pinned) == (str(img), hashlib.sha256(b"image bytes").hexdigest())
    assert cp.problems({"base": pinned}, {"base"}) == ([], [])
    assert cp.main([str(out), f"base={tmp_path}/none.sif"]) == 1
    assert cp.main([str(out)]) == 2
