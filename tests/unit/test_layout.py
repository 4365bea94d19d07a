"""The results layout (pmcflow.layout) is the one spelling of where outputs live under the results
folder: the rules, `pmcflow outputs` and the report loader take their paths from it."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from pmcflow import closure, outputs
from pmcflow import layout as L
from pmcflow import tables as T
from pmcflow.report import load

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "pmcflow"
WILDCARDS = {"chunk", "split", "shard", "run", "baseline"}


def _templates() -> dict[str, str]:
    """Every path the module spells: its string constants and its functions at their defaults."""
    folders = {"SHARDS", "ENCODERS", "DEMO_BENCHMARKS", "EVALUATION", "REPORTS"}
    out = {
        n: v for n, v in vars(L).items() if n.isupper() and isinstance(v, str) and ("/" in v or n in folders)
    }
    out.update(
        {
            f"{n}()": getattr(L, n)()
            for n in ("encoder_dir", "evaluation_dir", "baseline_dir", "baseline_model")
        }
    )
    out.update({"report_html(x)": L.report_html("x"), "detector_pr(a, b)": L.detector_pr("a", "b")})
    out["detector_metrics(a, b)"] = L.detector_metrics("a", "b")
    out.update({f"counts({s})": L.counts(s) for s in L.STAGE_DIRS})
    out.update({f"chunk_counts({s})": L.chunk_counts(s) for s in L.CHUNKED})
    return out


def _top_folders() -> set[str]:
    return {t.split("/")[0] for t in _templates().values()}


def test_templates_are_relative_snakemake_paths_under_the_documented_folders() -> None:
    doc = L.__doc__ or ""
    for name, template in _templates().items():
        assert template and not template.startswith("/") and not template.endswith("/"), name
        assert "//" not in template and "\\" not in template, name
        assert set(re.findall(r"\{(\w+)\}", template)) <= WILDCARDS, name
        # the module docstring lists the tree: every top folder (or the <stage> line) is in it
        top = template.split("/")[0]
        assert f"{top}/" in doc or (top in L.CHUNKED and "<stage>/<chunk>/" in doc), (name, top)


def test_paths_resolve_as_documented() -> None:
    assert L.chunk_file("parse", "figures.parquet", "c000001") == "parse/c000001/figures.parquet"
    assert L.SUBFIGURES == "decompose/{chunk}/subfigures.parquet"
    assert L.CROPS.format(chunk="c000007") == "decompose/c000007/crops"
    assert L.counts("list") == "listing/counts.json"
    assert L.counts("shard") == "shards/counts.json"
    assert L.rejections("filter") == "filter/rejections.parquet"
    assert L.stage_file("acquire", L.PENDING) == "acquire/pending.parquet"
    assert L.SHARD_CHUNK == "shard_chunks/{chunk}"
    assert L.SHARD_MANIFEST == "shards/manifest.json"
    assert L.SYNTH_SHARD == "synth/{split}/shard-{shard}"
    assert L.detector_metrics("shipped", "demo") == "detector/eval/eval_shipped_demo.json"
    assert L.detector_pr("yolo-trained", "synthetic_holdout") == (
        "detector/eval/pr_yolo-trained_synthetic_holdout.parquet"
    )
    assert L.encoder_file(L.ENCODER_TRAIN, "tiny") == "encoders/tiny/train.json"
    assert L.evaluation_file(L.baseline_dir("hub"), "metrics_json") == "evaluation/baselines/hub/metrics.json"
    assert L.baseline_model() == "evaluation/baselines/{baseline}/model"
    assert L.report_html("dataset") == "reports/dataset.html"
    assert L.shown(L.ENRICHED) == "enrich/<chunk>/enriched.parquet"
    assert L.shown(L.SYNTH_SHARD) == "synth/<split>/shard-<shard>"
    assert L.chunk_glob(L.DATASET) == "filter/c*/dataset.parquet"
    # the report loader names a model by run or as baseline:<name>; both land in the layout's folders
    assert load.evaluation_dir("tiny") == L.evaluation_dir("tiny") == "evaluation/tiny"
    assert load.evaluation_dir("baseline:hub") == L.baseline_dir("hub")


def test_the_stage_funnels_take_their_files_from_the_layout() -> None:
    stages = list(L.STAGE_DIRS)
    assert [s for s, _, _ in outputs.STAGES] == stages == [s.stage for s in load.STAGES]
    assert [c for _, c, _ in outputs.STAGES] == [L.counts(s) for s in stages]
    assert [s.counts for s in load.STAGES] == [L.counts(s) for s in stages]
    assert {s: rels[0] for s, rels in load.REJECTION_FILES.items()} == {s: L.rejections(s) for s in stages}
    assert load.REJECTION_FILES["acquire"][1] == L.stage_file("acquire", L.MEDIA_REJECTIONS)
    assert load.MODEL_STAGES["detector training"] == L.DETECTOR_TRAIN
    assert load.MODEL_STAGES["encoder training"] == L.shown(L.encoder_file(L.ENCODER_TRAIN))
    # what `pmcflow outputs` shows for a stage is the layout's template, as people read it
    shown = {s: o for s, _, o in outputs.STAGES}
    assert shown["acquire"] == L.shown(L.ACQUIRED)
    assert shown["parse"] == "parse/<chunk>/{articles,figures,mentions}.parquet"
    assert shown["decompose"].startswith(L.shown(L.SUBFIGURES))


def _string_literals(text: str) -> list[str]:
    return re.findall(r'f?"((?:[^"\\\n]|\\.)*)"', text)


def test_no_rule_spells_a_results_path() -> None:
    """rules/*.smk build every results path with results_path(_LAYOUT...): a literal path (or RESULTS
    itself, outside common.smk's definitions) fails here, so a rename touches the layout only."""
    folders = "|".join(sorted(map(re.escape, _top_folders())))
    spelled = re.compile(rf"^(?:\{{RESULTS\}}/|(?:{folders})/)|\.(?:parquet|npz|html|json)$")
    files = [*sorted((REPO / "rules").glob("*.smk")), REPO / "Snakefile"]
    assert len(files) > 10
    for smk in files:
        text = smk.read_text(encoding="utf-8")
        for lit in _string_literals(text):
            if lit.startswith(("{LOGS}/", "{RESOURCES}/")) or lit == "{RESULTS}/{rel}":
                continue  # logs, downloads; common.smk's results_path()
            assert not spelled.search(lit), f"{smk.name}: results path spelled in a rule: {lit!r}"
        if smk.name == "common.smk":
            assert text.count("{RESULTS}") == 1  # results_path() alone
        elif smk.name != "Snakefile":
            assert "RESULTS" not in text, f"{smk.name}: RESULTS used directly; use results_path(_LAYOUT...)"


def test_the_rules_load_it_without_pmcflow_installed() -> None:
    """common.smk loads layout.py by file (_stdlib_module): it imports the standard library only."""
    tree = ast.parse((SRC / "layout.py").read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
    spec = importlib.util.spec_from_file_location("_pmcflow_layout", SRC / "layout.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.DATASET == L.DATASET and mod.counts("shard") == L.counts("shard")
    assert '_LAYOUT = _stdlib_module("layout")' in (REPO / "rules" / "common.smk").read_text(encoding="utf-8")


def test_the_stages_writing_named_outputs_reach_it() -> None:
    """A stage writes the outputs its rule names (tables.stage_outputs); their file names, for a CLI
    given a folder, come from RULE_OUTPUTS. So those stages' code reaches layout.py: editing it reruns
    them (a changed name changes what they write), as editing schema.py does."""

    def reach(*entries: Path) -> set[str]:
        return {p.relative_to(SRC).as_posix() for p in closure.closure(SRC, list(entries))}

    scripts = {p.stem: p for p in (REPO / "scripts").glob("*.py")}
    for rule in L.RULE_OUTPUTS:
        script = {"evaluate_baseline": "evaluate_encoder"}.get(rule, rule)  # one script, two rules
        assert "layout.py" in reach(scripts[script]), rule
    for notebook in sorted((REPO / "notebooks").glob("*.ipynb")):
        assert "layout.py" in reach(REPO / "scripts" / "report.py", notebook), notebook.name


@pytest.mark.parametrize("loader", ["articles", "dataset"])
def test_the_report_loader_reads_every_chunk_the_layout_names(tmp_path: Path, loader: str) -> None:
    template = {"articles": L.ARTICLES, "dataset": L.DATASET}[loader]
    for i, chunk in enumerate(("c000001", "c000042")):
        path = tmp_path / template.format(chunk=chunk)
        path.parent.mkdir(parents=True)
        pl.DataFrame({"uid": [f"{chunk}/{i}"]}).write_parquet(path)
    (tmp_path / "elsewhere").mkdir()
    pl.DataFrame({"uid": ["not a chunk"]}).write_parquet(tmp_path / "elsewhere" / Path(template).name)
    df = getattr(load, loader)(load.Results(results_dir=tmp_path, workdir=tmp_path))
    assert df is not None and df["uid"].to_list() == ["c000001/0", "c000042/1"]


def test_outputs_reads_the_counts_the_layout_names(tmp_path: Path) -> None:
    for stage in ("list", "shard"):
        path = tmp_path / L.counts(stage)
        path.parent.mkdir(parents=True)
        T.write_counts(path, T.counts_record(stage, 5, 4, {"bad": 1}))
    rows = outputs.collect(tmp_path)
    assert [r["stage"] for r in rows] == ["list", "shard"]
    assert rows[1]["outputs"].startswith(str(tmp_path / L.SHARDS))


def _declared_outputs(rule: str) -> dict[str, str]:
    """The ``output:`` of ``rule`` in rules/*.smk, each path as the layout template it names."""

    def template(expr: str) -> str:
        expr = re.sub(r"^directory\((.*)\)$", r"\1", expr)
        inner = re.fullmatch(r"results_path\((.*)\)", expr)
        assert inner, (rule, expr)
        return eval(inner.group(1), {"_LAYOUT": L})  # noqa: S307 - our own rule text

    for smk in sorted((REPO / "rules").glob("*.smk")):
        lines = smk.read_text(encoding="utf-8").splitlines()
        head = [i for i, ln in enumerate(lines) if re.fullmatch(rf"\s*(?:rule|checkpoint) {rule}:", ln)]
        if not head:
            continue
        i = next(j for j in range(head[0] + 1, len(lines)) if lines[j].strip() == "output:")
        indent = len(lines[i]) - len(lines[i].lstrip())
        out: dict[str, str] = {}
        for ln in lines[i + 1 :]:
            if ln.strip() and len(ln) - len(ln.lstrip()) <= indent:
                break
            entry = ln.split("#")[0].strip().rstrip(",")
            if m := re.fullmatch(r"\*\*evaluation_outputs\((.*)\)", entry):  # rules/common.smk
                folder = eval(m.group(1), {"_LAYOUT": L})  # noqa: S307
                out |= {k: L.evaluation_file(folder, k) for k in L.EVALUATION_FILES}
            elif entry:
                name, expr = entry.split("=", 1)
                out[name] = template(expr)
        return out
    raise AssertionError(f"no rule {rule}")


@pytest.mark.parametrize("rule", sorted(L.RULE_OUTPUTS))
def test_a_rule_declares_the_outputs_its_stage_writes(rule: str) -> None:
    """RULE_OUTPUTS is what the rule declares, name for name and path for path: the stage writes
    exactly the rule's outputs (tables.stage_outputs), and a folder given to its CLI holds them."""
    assert _declared_outputs(rule) == L.RULE_OUTPUTS[rule]
    folder = L.outputs_in(rule, "some/dir")
    assert set(folder) == set(L.RULE_OUTPUTS[rule])
    # one folder holds them all, each under its own name
    assert len({p.rsplit("/", 1)[1] for p in folder.values()}) == len(folder)
    assert {p.rsplit("/", 1)[0] for p in L.RULE_OUTPUTS[rule].values()} == {
        L.RULE_OUTPUTS[rule][next(iter(folder))].rsplit("/", 1)[0]
    }


def test_stage_outputs_takes_the_rule_outputs_or_a_folder(tmp_path: Path) -> None:
    named = {k: tmp_path / "x" / f"{k}.bin" for k in L.RULE_OUTPUTS["filter_chunk"]}
    assert T.stage_outputs("filter_chunk", named) == named
    assert (tmp_path / "x").is_dir()  # the outputs' folder is made
    assert T.stage_outputs("filter_chunk", tmp_path / "f") == {
        "dataset": tmp_path / "f" / "dataset.parquet",
        "rejections": tmp_path / "f" / "rejections.parquet",
        "counts": tmp_path / "f" / "counts.json",
    }
    with pytest.raises(ValueError, match=r"missing \['counts'\]"):
        T.stage_outputs("filter_chunk", {k: v for k, v in named.items() if k != "counts"})
    with pytest.raises(ValueError, match=r"not written by the stage \['extra'\]"):
        T.stage_outputs("filter_chunk", {**named, "extra": tmp_path / "e"})


def test_write_stage_writes_counts_last_and_only_reconciled_records(tmp_path: Path) -> None:
    out = T.stage_outputs("parse_chunk", tmp_path)
    rej = T.Rejections("parse", "c000001")
    rej.add("a.1", "bad_xml", "no body")
    record = T.counts_record("parse", 2, 1, rej.by_reason(), chunk="c000001")
    got = T.write_stage(
        out,
        record,
        tables={n: ([{"x": i}], pa.schema([("x", pa.int64())])) for i, n in enumerate(("articles", "figures", "mentions"))},
        rejections={"rejections": rej},
    )
    assert got == record == T.read_counts(out["counts"])
    assert [T.read_rows(out[n]) for n in ("articles", "mentions")] == [[{"x": 0}], [{"x": 2}]]
    assert [r["reason"] for r in T.read_rows(out["rejections"])] == ["bad_xml"]
    mtimes = {k: p.stat().st_mtime_ns for k, p in out.items()}
    assert mtimes["counts"] == max(mtimes.values())
    with pytest.raises(T.CountsMismatch):
        T.counts_record("parse", 3, 1, rej.by_reason())
