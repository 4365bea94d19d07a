"""Rerun triggers are derived from the code: edit one module (or one config key) of a finished demo
run, and exactly the rules whose code reaches it rerun, with their descendants; nothing else.

A dry run cannot plan past a checkpoint that is about to rerun, so the cases avoid modules that
reach ``list_articles`` (the acquisition package); ``test_reruns.py`` runs that path for real.
The expectations below are written by hand from what each stage runs (they are not computed with
``pmcflow.closure``, the code under test). The descendants of a rule come from Snakemake itself:
``snakemake -n --forcerun RULE`` plans that rule and everything downstream of it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pmcflow_testing import workflow as wf

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

REPO = Path(__file__).resolve().parents[2]
CONFIG = ["--configfile", "config/demo.yaml", "config/ci.yaml"]
FILTER_RULES = {"phash_chunk", "find_duplicates", "filter_chunk"}
DETECTOR_RULES = {"train_detector", "evaluate_detector"}
REPORTS = {"report_dataset", "report_detector", "report_enrichment", "report_training"}

# module (under src/pmcflow) -> the rules whose own code runs it. The cases the hand-kept lists
# used to miss come first (issue: partial reruns miss code changes).
CASES: dict[str, set[str]] = {
    # open_clip's sample order is set here, so it decides the weights.
    # The reports reach it too: the dataset report reads the encoder's training settings
    # (report/load.py imports encoders.train, which reaches launch, shard and enrich code).
    # A baseline's evaluation loads its model with encoders/model.py, not the trainer: it stays.
    "encoders/launch.py": {"train_encoder"} | REPORTS,
    # the evaluation suite: evaluation, training (it scores checkpoints with it) and the reports.
    # Zero-shot modality filtering loads its model through encoders/model.py, so filtering does not
    # rerun when evaluation (or launch.py, or the shard reader) changes.
    "encoders/suite.py": {"train_encoder", "evaluate_encoder", "evaluate_baseline"} | REPORTS,
    # the embedding analysis between the evaluated models is its rule's alone
    "encoders/compare.py": {"compare_embeddings"},
    # the renderer draws panel letters; decompose reads caption letters with the enrich splitter
    "synth/labels.py": {"render_shard", "render_merge"},
    "enrich/rules.py": {"decompose_chunk", "enrich_subcaptions", "enrich_chunk"},
    # the splitter's panel-boundary weights: shipped data it opens, reached wherever the splitter is
    "data/caption_boundaries.json": {"decompose_chunk", "enrich_subcaptions", "enrich_chunk"},
    # the JATS parser is the parse stage's alone
    "jats.py": {"parse_chunk"},
    "detect/images.py": {"decompose_chunk"} | DETECTOR_RULES | FILTER_RULES,
    # a prompt file is data the enrich stage opens, not an import
    "data/prompts/subcaption_fig7.txt": {"enrich_subcaptions", "enrich_chunk"} | REPORTS,
    # the shard writer is imported by training and evaluation to read the shards back
    "shard.py": {"shard_chunk", "shard", "train_encoder", "evaluate_encoder"} | REPORTS,
    "report/plots.py": REPORTS,
    # each stage's own module: its rules, and only those (plus the reports where they read it)
    "decompose/stage.py": {"decompose_chunk"},
    "enrich/stage.py": {"enrich_subcaptions", "enrich_chunk"},
    "filter/stage.py": FILTER_RULES,
    # training (evaluation imports its scoring); the evaluation stage is evaluation's alone, so
    # editing how detectors are scored or merged by panel letter never retrains one
    "detect/stage.py": DETECTOR_RULES,
    "detect/eval_stage.py": {"evaluate_detector"},
    "decompose/lettermerge.py": {"decompose_chunk", "evaluate_detector"},
    "synth/render.py": {"render_shard", "render_merge"},
    "synth/canvas.py": {"render_shard", "render_merge"},
    # the dataset report reads the encoder's training settings through encoders/train.py
    "encoders/train.py": {"train_encoder"} | REPORTS,
    "encoders/evaluate.py": {"train_encoder", "evaluate_encoder", "evaluate_baseline"} | REPORTS,
    # a stage's settings class is its rules' alone: the decompose section's class is read by
    # decomposition and by the detector's evaluation (letter merging), nothing else
    "decompose/settings.py": {"decompose_chunk", "evaluate_detector"},
    # the evaluate section's classes: evaluation, training (it scores checkpoints), the embedding
    # comparison and the reports; filtering and sharding stay
    "encoders/settings.py": {"train_encoder", "evaluate_encoder", "evaluate_baseline", "compare_embeddings"}
    | REPORTS,
    # used by no rule: nothing reruns
    "repro.py": set(),
}


@pytest.fixture(scope="module")
def work(demo_run, tmp_path_factory):
    """A finished demo run of this module's own (the session's run, copied with its mtimes and
    Snakemake's metadata): the cases edit its code and outputs."""
    work = wf.clone_run(demo_run, tmp_path_factory.mktemp("triggers") / "wf")
    assert wf.dry_run(work, CONFIG) == [], "a finished DAG must plan nothing"
    return work


_FORCED: dict[str, set[str]] = {}


def _with_descendants(work: Path, rules: set[str]) -> set[str]:
    keys: set[str] = set()
    for rule in sorted(rules):
        if rule not in _FORCED:
            _FORCED[rule] = {j.key for j in wf.dry_run(work, [*CONFIG, "--forcerun", rule])}
            assert any(k.split("[")[0] == rule for k in _FORCED[rule]), (rule, _FORCED[rule])
        keys |= _FORCED[rule]
    return keys


@pytest.mark.parametrize("module", sorted(CASES))
def test_editing_a_module_reruns_exactly_its_stages(work, module):
    path = work / "src" / "pmcflow" / module
    original = path.read_bytes()
    try:
        path.write_bytes(original + (b"\n# edited\n" if path.suffix == ".py" else b"\n"))
        planned = wf.dry_run(work, CONFIG)
    finally:
        path.write_bytes(original)
    expected = _with_descendants(work, CASES[module])
    got = {j.key for j in planned}
    assert got == expected, {"missing": sorted(expected - got), "extra": sorted(got - expected)}
    assert all("params" in j.reason.lower() or "updated" in j.reason.lower() for j in planned), planned
    assert wf.dry_run(work, CONFIG) == []  # reverting the edit reverts the plan


def test_every_rule_hashes_its_own_script(repo_root):
    """Each rule's `code` param names the rule's own script (and a report, its notebook)."""
    import re

    for smk in sorted((repo_root / "rules").glob("*.smk")):
        text = smk.read_text()
        for block in re.split(r"(?m)^(?=(?:rule|checkpoint) |    rule:)", text):
            m = re.search(r'script:\s*\n\s*"\.\./(scripts/\w+\.py)"', block)
            if not m:
                continue
            code = re.search(r"code=code_version\(([^)]*)\)", block)
            assert code, f"{smk.name}: a rule running {m.group(1)} has no code param"
            assert code.group(1).split(",")[0].strip().strip('"') == m.group(1), (smk.name, code.group(1))


@pytest.mark.parametrize(
    ("overlay", "rules"),
    [
        # read by acquisition only; it used to be missing from acquire_chunk's params
        ("source:\n  media_types: [jpg, png]\n", {"acquire_chunk"}),
        ("source:\n  verify_images: false\n", {"acquire_chunk"}),
        # rendering, detector training, the split and encoder training are seeded; filtering is
        # not (the zero-shot classifier has its own filter.modality.openclip.seed), so it stays
        (
            "seed: 7\n",
            {
                "render_shard",
                "train_detector",
                "evaluate_detector",
                "shard_chunk",
                "shard",
                "train_encoder",
                "evaluate_encoder",
                "demo_benchmarks",
            },
        ),
        # a baseline is evaluated on its own: the trained runs' evaluations stay
        (
            "evaluate:\n  baselines:\n    untrained: {model: tiny-vit-bpe, note: reworded}\n",
            {"evaluate_baseline"},
        ),
    ],
)
def test_a_config_key_reruns_the_stages_that_read_it(work, tmp_path, overlay, rules):
    extra = tmp_path / "overlay.yaml"
    extra.write_text(overlay)
    planned = {j.key for j in wf.dry_run(work, [*CONFIG, str(extra)])}
    expected = _with_descendants(work, rules)
    assert planned == expected, {"missing": sorted(expected - planned), "extra": sorted(planned - expected)}


def test_a_changed_chunk_reshards_only_that_chunk(work):
    """Shards are written per chunk: new rows for one chunk re-shard that chunk alone; the global
    step (links, sizes.json, index, manifest) and what reads the shards follow."""
    import pyarrow.parquet as pq

    datasets = sorted((work / "results/demo/filter").glob("c*/dataset.parquet"))
    assert len(datasets) >= 2
    target = datasets[-1]
    st, original = target.stat(), target.read_bytes()
    try:  # as if filter had rewritten the chunk with one row fewer (a touch alone is not a change)
        table = pq.read_table(target)
        pq.write_table(table.slice(0, table.num_rows - 1), target)
        planned = wf.dry_run(work, CONFIG)
    finally:
        target.write_bytes(original)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    chunks = sorted(j.key for j in planned if j.rule == "shard_chunk")
    assert chunks == [f"shard_chunk[chunk={target.parent.name}]"], chunks
    assert {"shard", "train_encoder"} <= {j.rule for j in planned}
    assert wf.dry_run(work, CONFIG) == []


def test_chunk_scope_dedup_needs_no_corpus_job(work, tmp_path):
    """filter.dedup.scope is read by the workflow: chunk scope plans no find_duplicates job."""
    extra = tmp_path / "scope.yaml"
    extra.write_text("filter:\n  dedup:\n    scope: chunk\n")
    planned = wf.dry_run(work, [*CONFIG, str(extra)])
    rules = {j.rule for j in planned}
    assert "find_duplicates" not in rules and "filter_chunk" in rules, sorted(rules)
    chunks = {j.key for j in planned if j.rule == "phash_chunk"}
    assert {
        j.key.replace("filter_chunk", "phash_chunk") for j in planned if j.rule == "filter_chunk"
    } == chunks
