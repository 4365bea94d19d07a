"""containers/*.def: static checks (parse, pinned base, pins = lock/envs, sections), that every
rule names a pinned container, the base definition's %post run in a debootstrap chroot, and a real
image (containers/core.def) built with Apptainer that demo rules run inside, pinned by digest.

The image tests run where Apptainer exists (`make test` installs it on Debian hosts as root,
scripts/setup/install_apptainer.sh); a build that fails is a test failure, not a skip."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from pmcflow_testing import containers as ct
from pmcflow_testing import workflow as wf

REPO = Path(__file__).resolve().parents[2]
cc = ct.check_containers_module()  # scripts/setup/check_containers.py


def _errors_for(tmp_path: Path, name: str, edit) -> list[str]:
    """Check containers/<name>.def after ``edit(text) -> text``, written to a temp file."""
    text = (REPO / "containers" / f"{name}.def").read_text()
    new = edit(text)
    assert new != text, "the edit did not apply: fix the test"
    p = tmp_path / f"{name}.def"
    p.write_text(new)
    defs = cc.load_defs()
    lock, _ = cc.read_pins(cc.LOCK)
    return cc.check_definition(cc.parse_def(p), lock, defs)


def test_definitions_pass_static_checks():
    errs = cc.check_all()
    assert errs == [], "\n".join(errs)
    assert {"base", "mmdet", "vllm"} <= set(cc.load_defs())


def test_base_installs_the_lock_file():
    d = cc.load_defs()["base"]
    assert ("requirements/lock.txt", "/opt/pmcflow/requirements/lock.txt") in d.files()
    assert any(
        "-r" in a and "/opt/pmcflow/requirements/lock.txt" in a
        for a in cc._pip_install_args(d.sections["post"])
    )


@pytest.mark.parametrize(
    ("name", "old", "new", "expect"),
    [
        # unpinned bases
        (
            "base",
            "http://snapshot.debian.org/archive/debian/20261115T000000Z/",
            "http://deb.debian.org/debian",
            "snapshot",
        ),
        ("base", "Bootstrap: debootstrap", "Bootstrap: docker\nFrom: python:3.11-slim", "sha256"),
        ("mmdet", "From: containers/base.sif", "From: /scratch/somebody/base.sif", "localimage"),
        # pins that drift from the lock, or no pins
        ("base", "pip==26.3 wheel", "pip==26.3 numpy==2.0.0 wheel", "lock.txt has 2.4.6"),
        ("base", "pip==26.3 wheel", "pip==26.3 requests wheel", "unpinned pip install 'requests'"),
        # ranges in envs/vllm.txt need the constraint file
        ("vllm", "-c /opt/pmcflow/containers/vllm.constraints.txt", "", "does not pin"),
        # %test must assert the version the image installs
        ("vllm", 'v == "0.33.0"', 'v == "0.32.0"', "%test expects vllm 0.32.0"),
        # sections and files
        ("base", "%test\n", "%runscript\n", "missing or empty %test"),
        ("base", "    src /opt/pmcflow/src", "    srcs /opt/pmcflow/src", "does not exist"),
        ("mmdet", "MMCV_VERSION=2.1.0", "MMCV_VERSION=2.2.0", "build_mmcv.sh default"),
        # the image's python3 must accept every pin (Debian 11 ships 3.9.2; numpy 2.4 needs 3.11)
        (
            "base",
            "OSVersion: bookworm",
            "OSVersion: bullseye",
            "python3 is 3.9.2; these pins do not support it",
        ),
    ],
)
def test_checks_catch_mistakes(tmp_path, name, old, new, expect):
    errs = _errors_for(tmp_path, name, lambda t: t.replace(old, new))
    assert any(expect in e for e in errs), errs


def test_parse_rejects_garbage(tmp_path):
    p = tmp_path / "x.def"
    p.write_text("From ubuntu\n%post\n  true\n")
    with pytest.raises(ValueError):
        cc.parse_def(p)
    p.write_text("Bootstrap: debootstrap\n%pots\n  true\n")
    with pytest.raises(ValueError, match="unknown section"):
        cc.parse_def(p)
    # Apptainer reads an indented %word as a section (a help text saying "%test checks ..." broke
    # the base image's build).
    p.write_text("Bootstrap: debootstrap\n%help\n    %test checks the pins\n%post\n  true\n")
    with pytest.raises(ValueError, match="reads as a section"):
        cc.parse_def(p)
    # A header argument needs a default in %arguments.
    p.write_text("Bootstrap: debootstrap\nMirrorURL: {{ M }}\n%post\n  true\n")
    with pytest.raises(ValueError, match="without a %arguments default"):
        cc.parse_def(p)


def test_every_rule_has_a_pinned_container():
    errs = cc.check_rules(["config/demo.yaml"])
    assert errs == [], "\n".join(errs)


def test_rule_check_sees_rules():
    """The rule check loads the real workflow (an empty rule table would pass vacuously)."""
    rules = cc.rule_containers(["config/demo.yaml"])
    assert {"list_articles", "acquire_chunk", "parse_chunk"} <= set(rules)


def test_vllm_enrichment_runs_in_the_vllm_image_with_gpus(tmp_path):
    """A vLLM backend moves its enrichment job (subcaptions, summaries: one engine per job) to
    vllm.sif / envs/vllm.yaml and requests its tensor-parallel GPUs; a CPU backend stays in base."""
    overlay = tmp_path / "vllm.yaml"
    overlay.write_text(
        "enrich:\n  subcaption:\n    backend: vllm\n    vllm: {tensor_parallel_size: 2}\n"
        "  summary:\n    backend: vllm\n"
    )
    rules = cc.rule_settings(["config/demo.yaml", str(overlay)])
    for rule, gpus in (("enrich_subcaptions", 2), ("enrich_chunk", 1)):
        assert rules[rule]["container"].endswith("containers/vllm.sif"), rule
        assert rules[rule]["conda"].endswith("envs/vllm.yaml"), rule
        assert rules[rule]["resources"]["gpu"] == gpus, rule
    only_summary = tmp_path / "summary.yaml"
    only_summary.write_text("enrich:\n  summary:\n    backend: vllm\n")
    mixed = cc.rule_settings(["config/demo.yaml", str(only_summary)])
    assert mixed["enrich_subcaptions"]["container"].endswith("containers/base.sif")
    assert "gpu" not in mixed["enrich_subcaptions"]["resources"]
    assert mixed["enrich_chunk"]["container"].endswith("containers/vllm.sif")
    cpu = cc.rule_settings(["config/demo.yaml"])
    for rule in ("enrich_subcaptions", "enrich_chunk"):
        assert cpu[rule]["container"].endswith("containers/base.sif") and "gpu" not in cpu[rule]["resources"]
        assert cpu[rule]["conda"].endswith("envs/pmcflow.yaml")


def _debootstrap_ready() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    if not shutil.which("debootstrap"):
        return "debootstrap not installed"
    if not cc._reachable(cc.FALLBACK_MIRROR):
        return "no Debian mirror reachable"
    return None


@pytest.mark.slow
@pytest.mark.heavy  # 5 min on a 2-core CI host; the core image's full build and %test stay in CI
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", ["base", "vllm"])
def test_post_runs_in_debootstrap(name):
    """The definition's %post in a debootstrap root of its Debian release (pip resolves only):
    every pin must exist for that release's Python (Debian 12: 3.11.2)."""
    reason = _debootstrap_ready()
    if reason:
        pytest.skip(reason)
    rc = cc.run_post(name)
    assert rc == 0, f"containers/{name}.def %post failed in a debootstrap root (see output above)"


# ---------------------------------------------------------------------------------------------
# A real image: containers/core.def built with Apptainer, demo rules run inside it.

DEMO = ["--configfile", "config/demo.yaml", "config/ci.yaml"]
PARSE_TARGET = "results/demo/parse/counts.json"  # list_articles, acquire_chunk, parse_chunk, parse_summary


@pytest.fixture(scope="module")
def core_image(tmp_path_factory) -> Path:
    if not ct.apptainer():
        pytest.skip("apptainer not installed (make test installs it on Debian as root)")
    log = tmp_path_factory.mktemp("image") / "build.log"
    return ct.build("core", log)  # a failed build raises: the test errors, it is not skipped


def _pin_overlay(path: Path, image: Path, digest: str | None = None) -> Path:
    from pmcflow import containerpin

    path.write_text(f"containers:\n  base: {image}@sha256:{digest or containerpin.sha256_file(image)}\n")
    return path


def _ran_in_image(logs: list[Path]) -> None:
    assert logs, "no rule logs"
    for log in logs:
        text = log.read_text()
        assert "container " in text and "/opt/venv/" in text, f"{log} ran outside the image:\n{text[:800]}"


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_core_image_builds_and_passes_its_test(core_image):
    """The image's own %test (every installed pin equals the lock's) and its entry point."""
    app = ct.apptainer()
    test = subprocess.run([app, "test", str(core_image)], capture_output=True, text=True, timeout=300)
    assert test.returncode == 0, test.stdout + test.stderr
    assert "pmcflow core image OK" in test.stdout
    run = subprocess.run([app, "run", str(core_image), "--help"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "usage" in run.stdout.lower(), run.stdout + run.stderr
    labels = subprocess.run([app, "inspect", "--labels", str(core_image)], capture_output=True, text=True)
    assert "pmcflow.debian.snapshot: 20261115T000000Z" in labels.stdout, labels.stdout


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_demo_rules_run_in_the_pinned_image(core_image, tmp_path):
    """snakemake --sdm apptainer: acquisition and parsing of the demo run inside the core image
    (the rule logs name the container and the image's interpreter), pinned by its digest; a wrong
    digest stops the run before any job."""
    work = wf.copy_workflow(REPO, tmp_path / "wf")
    bad = _pin_overlay(tmp_path / "bad.yaml", core_image, "0" * 64)
    proc = wf.snakemake(work, [*DEMO, str(bad), "--sdm", "apptainer", "--cores", "2", PARSE_TARGET], timeout=300)
    assert proc.returncode != 0
    assert f"{core_image} has sha256" in proc.stderr + proc.stdout, (proc.stdout + proc.stderr)[-3000:]
    assert not (work / "results").exists(), "a job ran although the image does not match its pin"

    good = _pin_overlay(tmp_path / "images.yaml", core_image)
    proc = wf.snakemake(
        work,
        [*DEMO, str(good), "--sdm", "apptainer", "--apptainer-args=--cleanenv", "--cores", "2", PARSE_TARGET],
        timeout=900,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    counts = json.loads((work / PARSE_TARGET).read_text())
    assert counts["kept"] > 0, counts
    _ran_in_image(sorted((work / "logs/demo/parse").glob("c*.log")) + sorted((work / "logs/demo/acquire").glob("c*.log")))
