"""Fault injection (marker ``faults``): nothing lost silently, every failure named, every rerun heals.

Faults are injected into the real components: the loopback PMC server fails, trickles and resets;
files change on disk after download; hostile JATS and text go through the real stages; a second
run contends for the same folders; bad configuration is loaded.  Each test asserts the three
promises of docs/reliability.md: no partial output is visible, nothing is lost (every input article
ends as a pair, a rejection with a reason, or a pending retry), and the healed rerun equals an
unfaulted run byte for byte.

The workflow-level cases (Snakemake in a throw-away copy) run on a two-chunk slice of the demo
corpus (``select.max_articles: 5``) served over HTTP by the mock server.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pmcflow_testing import workflow as wf

from pmcflow import repro
from pmcflow.config import ConfigError, load_config
from pmcflow.pmc import stage
from pmcflow.pmc.http import FetchError, HttpClient, HttpSettings
from pmcflow.pmc.mockserver import Fault, MockPMCServer
from pmcflow.pmc.settings import PmcSettings
from pmcflow.retry import pending_by_chunk, retry_stamp
from pmcflow.runlock import LockHeld, RunLock, lock_path

pytestmark = [pytest.mark.faults, pytest.mark.network, pytest.mark.timeout(1500)]

REPO = Path(__file__).resolve().parents[2]
DEMO_CLOUD = REPO / "demo" / "corpus" / "pmc-cloud"
FAST_HTTP = {"rate_limit_per_s": 1000, "retries": 1, "backoff_s": 0.0, "backoff_max_s": 0.0,
             "timeout_s": 5, "deadline_s": 2}  # fmt: skip


def _cloud_cfg(url: str, **more) -> dict:
    over = {"source": {"backend": "cloud", "cloud": {"base_url": url}}, "http": FAST_HTTP}
    from pmcflow.config import deep_merge

    return load_config([REPO / "config" / "demo.yaml"], deep_merge(over, more))


def _acquire_all(cfg: dict, out: Path) -> dict[str, dict]:
    stage.list_articles(PmcSettings.from_config(cfg), str(out / "listing"))
    chunks = sorted(json.loads((out / "listing" / "chunks.json").read_text())["chunks"])
    return {
        ch: stage.acquire_chunk(
            PmcSettings.from_config(cfg), ch, str(out / "listing" / "listing.parquet"), str(out / "acquire" / ch), "pmc",
            transfer_path=out / "transfer" / f"{ch}.json",
        )
        for ch in chunks
    }  # fmt: skip


# ------------------------------------------------------------------------------ transport faults
def test_trickling_server_is_cut_by_the_transfer_deadline(tmp_path: Path) -> None:
    """A server that sends a few bytes every 50 ms never trips the per-read timeout; the deadline does."""
    (tmp_path / "a.bin").write_bytes(os.urandom(20000))
    with MockPMCServer(tmp_path, [Fault("trickle", "a.bin", count=-1, delay_s=0.05)]) as srv:
        client = HttpClient(replace(HttpSettings.from_section({}), rate_limit_per_s=None, retries=1, backoff_s=0, timeout_s=5, deadline_s=0.5))
        t0 = time.monotonic()
        with pytest.raises(FetchError) as ei:
            client.download(f"{srv.url}/a.bin", tmp_path / "out.bin")
        elapsed = time.monotonic() - t0
    assert ei.value.reason == "deadline_exceeded" and ei.value.transient
    assert elapsed < 3, f"two attempts of 0.5 s each took {elapsed:.1f} s"
    assert not (tmp_path / "out.bin").exists()


def test_connection_reset_is_transient_and_a_later_attempt_heals(tmp_path: Path) -> None:
    data = os.urandom(5000)
    (tmp_path / "a.bin").write_bytes(data)
    settings = replace(HttpSettings.from_section({}), rate_limit_per_s=None, retries=1, backoff_s=0, timeout_s=5)
    with MockPMCServer(tmp_path, [Fault("reset", "a.bin", count=-1)]) as srv:
        with pytest.raises(FetchError) as ei:
            HttpClient(settings).download(f"{srv.url}/a.bin", tmp_path / "x.bin")
    assert ei.value.reason == "http_error" and ei.value.transient
    with MockPMCServer(tmp_path, [Fault("reset", "a.bin", count=1)]) as srv:
        got = HttpClient(settings).download(f"{srv.url}/a.bin", tmp_path / "y.bin")
    assert got.size == len(data) and (tmp_path / "y.bin").read_bytes() == data


# ------------------------------------------------------------------------------- pending retries
OUTAGE = [
    Fault("status", "PMC3460867.1/*.xml", count=-1, status=503),  # the article XML: 503s
    Fault("reset", "PMC3339583.1/*.jpg", count=-1),  # one of its figures: connection resets
    Fault("trickle", "metadata/PMC2599765.1.json", count=-1, delay_s=0.2, trickle_bytes=8),  # trickles
]
OUTAGE_UIDS = {"PMC3460867.1", "PMC3339583.1", "PMC2599765.1"}


def test_outage_becomes_pending_and_the_rerun_fetches_exactly_those(tmp_path: Path, monkeypatch) -> None:
    """Transient failures are pending (not rejections); the rerun downloads only what they miss and
    its tables are byte-identical to an acquisition that never saw a fault."""
    clean, faulted = tmp_path / "clean", tmp_path / "faulted"
    for d in (clean, faulted):
        d.mkdir()
    with MockPMCServer(DEMO_CLOUD) as srv:
        cfg = _cloud_cfg(srv.url)
        monkeypatch.chdir(clean)
        expected = _acquire_all(cfg, clean / "out")

        monkeypatch.chdir(faulted)
        for f in OUTAGE:
            srv.add_fault(f)
        first = _acquire_all(cfg, faulted / "out")
        pending = {r["item_id"]: r["reason"] for ch in first for r in
                   pq.read_table(faulted / "out" / "acquire" / ch / "pending.parquet").to_pylist()}  # fmt: skip
        assert set(pending) == OUTAGE_UIDS
        assert set(pending.values()) <= {"http_error", "deadline_exceeded"}
        for ch, rec in first.items():  # nothing lost: in = kept + rejected + pending
            assert rec["in"] == rec["kept"] + sum(rec["rejected"].values()) + sum(rec["pending"].values())
            assert rec["rejected"] == expected[ch]["rejected"]  # a transient failure is never a rejection
        assert pending_by_chunk(faulted / "out") == {ch: sum(r["pending"].values()) for ch, r in first.items()
                                                     if r["pending"]}  # fmt: skip

        srv.clear()
        # `pmcflow retry-failed`: the same call as the rule's, for the chunks with pending articles.
        second = stage.retry_failed(dict(cfg, paths={"results": "out", "resources": ".", "logs": "out/logs"}))
    assert second == {"c000002": 0, "c000003": 0}
    for ch in expected:
        for name in ("articles.parquet", "rejections.parquet", "media_rejections.parquet", "pending.parquet",
                     "counts.json"):  # fmt: skip
            a = (clean / "out" / "acquire" / ch / name).read_bytes()
            b = (faulted / "out" / "acquire" / ch / name).read_bytes()
            assert a == b, f"{ch}/{name} differs from the unfaulted acquisition"
    # Only what the pending articles missed was downloaded again; the rest came from the verified cache.
    t = json.loads((faulted / "out" / "logs" / "acquire" / "c000003.transfer.json").read_text())
    assert t["http.files_cached"] > 0 and t["http.files_downloaded"] >= 1


def test_retry_stamp_is_touched_only_while_articles_are_pending(tmp_path: Path) -> None:
    counts = tmp_path / "acquire" / "c000002" / "counts.json"
    counts.parent.mkdir(parents=True)
    counts.write_text(json.dumps({"in": 2, "kept": 2, "rejected": {}, "pending": {}}))
    stamp = Path(retry_stamp(tmp_path, "c000002"))
    assert stamp.stat().st_mtime == 0  # created old: never makes a finished chunk out of date
    retry_stamp(tmp_path, "c000002")
    assert stamp.stat().st_mtime == 0
    counts.write_text(json.dumps({"in": 2, "kept": 1, "rejected": {}, "pending": {"http_error": 1}}))
    retry_stamp(tmp_path, "c000002")
    touched = stamp.stat().st_mtime
    assert touched >= counts.stat().st_mtime > 0
    retry_stamp(tmp_path, "c000002")  # a second plan (dry run, then run) changes nothing
    assert stamp.stat().st_mtime == touched


# ---------------------------------------------------------------------------------------- locks
def test_second_writer_is_refused_with_the_owner_named_and_stale_locks_are_replaced(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys,time; from pmcflow.runlock import RunLock; "
         f"RunLock({str(tmp_path)!r}, 'results folder').acquire(); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(LockHeld, match=rf"pid {holder.pid} on .*`pmcflow unlock "):
            RunLock(tmp_path, "results folder").acquire()
        # The CLI: one line, exit 1, nothing written.
        proc = subprocess.run(
            [sys.executable, "-m", "pmcflow.cli", "acquire-chunk", "--chunk", "c000001", "--listing", "x",
             "--out", str(tmp_path / "o"), "--cache", str(tmp_path)],
            capture_output=True, text=True,
        )  # fmt: skip
        assert proc.returncode == 1 and "in use by another pmcflow run" in proc.stderr, proc.stderr
        assert not (tmp_path / "o").exists()
    finally:
        holder.kill()
        holder.wait()
    lock = RunLock(tmp_path, "results folder").acquire()  # the owner is dead: stale, replaced
    assert lock.replaced_stale and lock.replaced_stale["pid"] == holder.pid
    lock.release()
    assert not lock_path(tmp_path).exists()


# ---------------------------------------------------------------------------------- bad config
@pytest.mark.parametrize(
    ("override", "key"),
    [
        ({"shard": {"splits": {"train": 0.5, "val": 0.1, "test": 0.1}}}, r"shard\.splits: the fractions sum to 0\.7"),
        ({"train": {"batch_size": 0}}, r"train\.batch_size: 0 is less than the minimum of 1"),
        ({"train": {"epochs": -2}}, r"train\.epochs: -2 is less than the minimum of 1"),
        ({"select": {"date_form": "2020"}}, r"select\.date_form: unknown key"),
        ({"select": {"date_from": "2021-02-30"}}, r"select\.date_from: '2021-02-30': day is out of range"),
        ({"select": {"date_from": "2021", "date_to": "2020-06"}}, r"select\.date_to: 2020-06-30 is before"),
        ({"evaluate": {"ci": 1.5}}, r"evaluate\.ci: 1\.5 is greater than or equal to the maximum of 1"),
        ({"train": {"device": "cpu", "precision": "amp"}}, r"train\.precision: 'amp' needs a GPU"),
        ({"source": {"local": {"root": "no/such/mirror"}}}, r"source\.local\.root: no/such/mirror does not exist"),
        ({"detector": {"params": {"ultralytics": {"epochs": 0}}}}, r"detector\.params\.ultralytics\.epochs"),
    ],
)
def test_bad_config_fails_at_load_naming_the_key(override: dict, key: str, monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    with pytest.raises(ConfigError, match=key):
        load_config([REPO / "config" / "demo.yaml"], override)


# --------------------------------------------------------------------------- hostile input, in-process
def _hostile_corpus(root: Path) -> dict[str, str]:
    """A copy of the demo cloud bucket with hostile articles (md5s in the metadata updated)."""
    shutil.copytree(DEMO_CLOUD, root)
    edits: dict[str, str] = {}

    def edit(uid: str, fn) -> None:
        xml = root / uid / f"{uid}.xml"
        new = fn(xml.read_text(encoding="utf-8"))
        xml.write_text(new, encoding="utf-8")
        md5 = hashlib.md5(new.encode("utf-8")).hexdigest()
        for meta in (root / uid / f"{uid}.json", root / "metadata" / f"{uid}.json"):
            text = meta.read_text(encoding="utf-8")
            meta.write_text(re.sub(rf"({re.escape(uid)}\.xml\?md5=)[0-9a-f]{{32}}", rf"\g<1>{md5}", text))

    def first_caption(text: str, body: str) -> str:
        """The first figure's caption replaced by one paragraph holding ``body``."""
        from lxml import etree

        tree = etree.fromstring(text.encode("utf-8"))
        cap = tree.find(".//fig/caption")
        for child in list(cap):
            cap.remove(child)
        etree.SubElement(cap, "p").text = body
        return etree.tostring(tree, encoding="unicode")

    edit("PMC99990002.1", lambda t: first_caption(t, "overlong caption text " * 50000))
    edits["PMC99990002.1"] = "caption_too_long"
    edit("PMC99990003.1", lambda t: t.replace("<article-title>", "<article-title>\x00", 1))
    edits["PMC99990003.1"] = "xml_malformed"
    edit("PMC99990004.1", lambda t: first_caption(t, "."))
    edits["PMC99990004.1"] = "caption_uninformative"
    # C1 control characters, a CR and a lone non-character in an otherwise fine caption: normalised.
    edit("PMC99990005.1", lambda t: re.sub(r"(<caption>\s*<title>)", "\\1Ctl\u0085\u009b\r\n", t, count=1))
    edits["PMC99990005.1"] = "normalised"
    return edits


def _run_chain(cfg: dict, out: Path) -> dict[str, dict]:
    from pmcflow.decompose.settings import DecomposeSettings
    from pmcflow.decompose.stage import decompose_chunk
    from pmcflow.enrich.settings import EnrichSettings
    from pmcflow.enrich.stage import enrich_chunk
    from pmcflow.filter.checks import FilterSettings
    from pmcflow.filter.stage import filter_chunk, phash_chunk
    from pmcflow.jats import ParseSettings, parse_chunk

    counts = _acquire_all(cfg, out)
    ch = next(iter(counts))
    a, p, d, e, f = (out / s / ch for s in ("acquire", "parse", "decompose", "enrich", "filter"))
    recs = {"acquire": counts[ch]}
    recs["parse"] = parse_chunk(ParseSettings.from_config(cfg), ch, str(a / "articles.parquet"), str(p))
    recs["decompose"] = decompose_chunk(DecomposeSettings.from_config(cfg), ch, str(p / "figures.parquet"), str(d))
    recs["enrich"] = enrich_chunk(EnrichSettings.from_config(cfg), ch, str(d / "subfigures.parquet"), str(p / "figures.parquet"),
                                  str(p / "mentions.parquet"), str(p / "articles.parquet"), str(e))  # fmt: skip
    phash_chunk(FilterSettings.from_config(cfg), ch, e / "enriched.parquet", f / "phash.parquet")
    recs["filter"] = filter_chunk(FilterSettings.from_config(cfg), ch, e / "enriched.parquet", f, phash_path=f / "phash.parquet")
    return recs


def test_hostile_jats_and_text_each_become_one_counted_rejection(tmp_path: Path, monkeypatch) -> None:
    """A 1 MB caption, a NUL byte and ``<caption>.</caption>``: one counted rejection each, with its
    reason; the chunk's other articles give exactly the pairs they give without them; control
    characters are normalised away before tables and shards."""
    from pmcflow.shard import shard_dataset

    bucket = tmp_path / "bucket"
    edits = _hostile_corpus(bucket)
    pmcids = ["PMC99990001", *[u.split(".")[0] for u in edits]]
    results = {}
    with MockPMCServer(bucket) as srv:
        for name, ids in (("hostile", pmcids), ("clean", pmcids[:1])):
            (tmp_path / name).mkdir()
            monkeypatch.chdir(tmp_path / name)
            cfg = _cloud_cfg(srv.url, source={"cloud": {"listing": "pmcids", "pmcids": ids}},
                             enrich={"summary": {"backend": "extractive"}})  # fmt: skip
            results[name] = _run_chain(cfg, Path("out"))
    rec = results["hostile"]
    ch = rec["acquire"]["chunk"]
    rej = {s: pq.read_table(tmp_path / "hostile" / "out" / s / ch / "rejections.parquet").to_pylist()
           for s in ("parse", "decompose")}  # fmt: skip
    assert [(r["item_id"], r["reason"]) for r in rej["parse"]] == [("PMC99990003.1", "xml_malformed")]
    by_reason = {r["reason"]: r for r in rej["decompose"]}
    assert by_reason["caption_too_long"]["item_id"].startswith("PMC99990002.1/")
    assert by_reason["caption_uninformative"]["item_id"].startswith("PMC99990004.1/")
    assert rec["decompose"]["rejected"]["caption_too_long"] == 1
    assert rec["decompose"]["rejected"]["caption_uninformative"] == 1
    for stage_rec in rec.values():  # counts reconcile at every stage
        assert stage_rec["in"] == stage_rec["kept"] + sum(stage_rec["rejected"].values()) + sum(
            (stage_rec.get("pending") or {}).values())

    # The untouched article: the same dataset rows, byte for byte, as in a chunk without the others.
    def rows_of(name: str, uid: str) -> list[dict]:
        t = pq.read_table(tmp_path / name / "out" / "filter" / ch / "dataset.parquet").to_pylist()
        return [r for r in t if r["article_uid"] == uid]

    assert rows_of("hostile", "PMC99990001.1") == rows_of("clean", "PMC99990001.1") != []

    # Normalised text: no control character in any table or shard text.
    assert rec["parse"]["extra"]["text_normalised"] >= 1
    ds = tmp_path / "hostile" / "out" / "filter" / ch / "dataset.parquet"
    control = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
    for row in pq.read_table(ds).to_pylist():
        for k in ("caption", "subcaption", "summary", "shared_text"):
            assert not control.search(row[k] or ""), (k, row[k])
    figs = pq.read_table(tmp_path / "hostile" / "out" / "parse" / ch / "figures.parquet").to_pylist()
    ctl = [f["caption_title"] for f in figs if (f["caption_title"] or "").startswith("Ctl")]
    assert ctl and not control.search(ctl[0]), ctl
    monkeypatch.chdir(tmp_path / "hostile")
    m = shard_dataset({"splits": {"train": 1.0}}, 1, [str(ds)], str(tmp_path / "shards"))
    index = pq.read_table(tmp_path / "shards" / "index.parquet").to_pylist()
    assert m["n_samples"] == len(index) > 0 and not any(control.search(r["text"]) for r in index)


def test_changed_cache_is_caught_when_read_not_only_when_fetched(tmp_path: Path, monkeypatch) -> None:
    from pmcflow.jats import ParseSettings, parse_chunk

    monkeypatch.chdir(tmp_path)
    with MockPMCServer(DEMO_CLOUD) as srv:
        cfg = _cloud_cfg(srv.url, source={"cloud": {"listing": "pmcids", "pmcids": ["PMC99990001", "PMC99990002"]}})
        ch = next(iter(_acquire_all(cfg, Path("out"))))
    arts = pq.read_table(f"out/acquire/{ch}/articles.parquet").to_pylist()
    xml = Path(arts[0]["xml_path"])
    xml.write_bytes(xml.read_bytes().replace(b"<article", b"<article ", 1))  # same XML, other bytes
    image = Path(arts[1]["media"][0]["path"])
    image.write_bytes(image.read_bytes()[:-10])
    rec = parse_chunk(ParseSettings.from_config(cfg), ch, f"out/acquire/{ch}/articles.parquet", "out/parse")
    assert rec["rejected"] == {"checksum_mismatch": 1}
    assert rec["kept"] == 1 and rec["extra"]["media_checksum_mismatch"] == 1
    rows = pq.read_table("out/parse/rejections.parquet").to_pylist()
    assert rows[0]["item_id"] == arts[0]["article_uid"] and "recorded when it was downloaded" in rows[0]["detail"]


def test_one_failing_item_costs_one_rejection_not_the_chunk(tmp_path: Path, monkeypatch) -> None:
    """A subcaption model that crashes on one figure's input (injected into the real rules backend)."""
    from pmcflow.enrich import subcaption
    from pmcflow.enrich.settings import EnrichSettings
    from pmcflow.enrich.stage import enrich_rows
    from pmcflow.tables import Rejections

    sub = [{"subfigure_uid": f"A.1/f{i}/s0", "figure_uid": f"A.1/f{i}", "article_uid": "A.1", "pmcid": "A",
            "panel_label": None, "crop_path": None} for i in range(3)]  # fmt: skip
    figs = [{"figure_uid": f"A.1/f{i}", "figure_id": f"f{i}", "caption": f"Caption number {i} of a figure.",
             "caption_title": None, "label": f"Figure {i}"} for i in range(3)]  # fmt: skip
    arts = [{"article_uid": "A.1", "doi": None, "pmid": None, "license_code": "CC BY", "is_retracted": False}]
    real = subcaption.RulesSubcaptioner.extract

    def crashes_on_f1(self, requests):
        if any(r.group == "A.1/f1" for r in requests):
            raise MemoryError("injected: the model ran out of memory on this input")
        return real(self, requests)

    monkeypatch.setattr(subcaption.RulesSubcaptioner, "extract", crashes_on_f1)
    rej = Rejections("enrich", "c0")
    rows = enrich_rows(EnrichSettings.from_section({}), sub, figs, [], arts, rej)
    assert [r["subfigure_uid"] for r in rows] == ["A.1/f0/s0", "A.1/f2/s0"]
    assert [(r["item_id"], r["reason"]) for r in rej.rows] == [("A.1/f1/s0", "subcaption_error")]
    assert "MemoryError" in rej.rows[0]["detail"]


@pytest.mark.parametrize(
    ("summary", "reason"),
    [
        ("The method is described at https://example.org/tool and in the supplement.", "summary_url"),
        ("I'm sorry, but the provided context does not mention this subfigure.", "summary_refusal"),
        ("Die Abbildung zeigt die Verteilung der Zellen in den verschiedenen Gruppen nach zwei Wochen "
         "Behandlung mit dem Wirkstoff.", "summary_not_english"),
        (None, "summary_prompt_echo"),
        ("Mice treated with the compound show fewer lesions than controls in the distal colon.", None),
    ],
)
def test_summary_quality_gates(summary: str | None, reason: str | None) -> None:
    from pmcflow.enrich.prompts import load_prompt
    from pmcflow.enrich.validate import summary_gate

    instructions = load_prompt("summary").instructions
    if summary is None:  # an answer that repeats the prompt's own instructions
        words = instructions.split()
        summary = " ".join(words[10:24])
    got = summary_gate(summary, instructions)
    assert (got[0] if got else None) == reason


# ----------------------------------------------------------------------------- workflow level
RES = "results/demo"
TARGETS = [f"{RES}/shards", f"{RES}/filter/counts.json", f"{RES}/acquire/counts.json"]
SKIP = ("logs/", ".snakemake/")


@pytest.fixture(scope="module")
def faults_workflow(tmp_path_factory):
    """A workflow copy on a two-chunk slice of the demo corpus served by the mock server, and the
    snapshot of an unfaulted run (taken while a second run tries the same results folder)."""
    work = wf.copy_workflow(REPO, tmp_path_factory.mktemp("faults") / "wf")
    srv = MockPMCServer(DEMO_CLOUD).start()
    overlay = work / "config" / "faults.yaml"
    http = ", ".join(f"{k}: {v}" for k, v in FAST_HTTP.items())
    overlay.write_text(
        "select: {max_articles: 5}\n"
        f"source: {{backend: cloud, cloud: {{base_url: '{srv.url}'}}}}\n"
        f"http: {{{http}}}\n"
        "detector: {train: false}\n"
    )
    config = ["--configfile", "config/demo.yaml", "config/faults.yaml"]
    try:
        yield work, srv, config
    finally:
        srv.close()


def _reset(work: Path) -> None:
    for d in ("results", "resources", "logs", ".snakemake"):
        shutil.rmtree(work / d, ignore_errors=True)


def _run(work: Path, config: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return wf.snakemake(work, ["--cores", "2", *args, *TARGETS, *config], timeout=900)


def _dangling(work: Path) -> list[str]:
    """Crop paths in the final dataset tables that point to nothing."""
    bad = []
    for ds in (work / RES / "filter").glob("c*/dataset.parquet"):
        for r in pq.read_table(ds, columns=["crop_path"]).to_pylist():
            if r["crop_path"] and not (work / r["crop_path"]).is_file():
                bad.append(r["crop_path"])
    return bad


@pytest.mark.slow
def test_workflow_outage_killed_rerun_and_concurrent_run(faults_workflow, tmp_path: Path) -> None:
    """One unfaulted run (while a second working directory tries the same results folder), then:
    an outage healed by the next plain run; decompose killed mid-rerun and healed; a deleted crop
    refused by the shard rule.  Every healed state equals the unfaulted snapshot byte for byte."""
    work, srv, config = faults_workflow
    _reset(work)

    # 1. The unfaulted run; a second working directory pointed at the same results/ must not start.
    other = wf.copy_workflow(work, tmp_path / "other")
    (other / "config" / "faults.yaml").write_text(
        (work / "config" / "faults.yaml").read_text() + f"paths: {{results: '{work / RES}'}}\n"
    )
    log = work / "clean.log"
    with open(log, "w") as fh:
        main = subprocess.Popen([wf.SNAKEMAKE, "--cores", "2", *TARGETS, *config], cwd=work,
                                env=wf.run_env(work), stdout=fh, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not lock_path(work / RES).exists() and time.monotonic() < deadline and main.poll() is None:
            time.sleep(0.2)
        t0 = time.monotonic()
        second = wf.snakemake(other, ["--cores", "1", *TARGETS, *config], timeout=300)
        assert second.returncode != 0, "a second run on the same results folder must not start"
        assert "in use by another pmcflow run" in second.stdout + second.stderr
        assert time.monotonic() - t0 < 120
        assert main.wait(timeout=900) == 0, log.read_text()[-5000:]
    finally:
        if main.poll() is None:
            main.kill()
    assert not lock_path(work / RES).exists(), "the lock is released when the run ends"
    assert "no article is pending a retry" in log.read_text()
    expected = repro.snapshot(work / RES, SKIP)
    assert any(p.startswith("shards/") for p in expected)

    # 2. An outage: the run succeeds, names what is pending; the next plain run heals it.
    _reset(work)
    for f in OUTAGE:
        srv.add_fault(f)
    try:
        proc = _run(work, config)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
        assert re.search(r"3 article\(s\) in 2 chunk\(s\) failed for a transient reason", proc.stdout + proc.stderr)
    finally:
        srv.clear()
    plan = wf.dry_run(work, [*TARGETS, *config])
    assert {j.key for j in plan if j.rule == "acquire_chunk"} == {"acquire_chunk[chunk=c000002]",
                                                                   "acquire_chunk[chunk=c000003]"}  # fmt: skip
    proc = _run(work, config)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    assert "no article is pending a retry" in proc.stdout + proc.stderr
    diff = repro.differences(expected, repro.snapshot(work / RES, SKIP))
    assert not diff, f"the healed run differs from the unfaulted one: {diff}"
    assert wf.dry_run(work, [*TARGETS, *config]) == [], "healed: nothing left to do"

    # 3. decompose_chunk forced to rerun and killed mid-job (seeded point: 1.5 s into the job).
    cmd = [wf.SNAKEMAKE, "--cores", "2", "--forcerun", "decompose_chunk", *TARGETS, *config]
    with open(work / "killed.log", "w") as fh:
        run = subprocess.Popen(cmd, cwd=work, env=wf.run_env(work), stdout=fh, stderr=subprocess.STDOUT,
                               start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while "rule decompose_chunk:" not in (work / "killed.log").read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.5)
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=60)
    assert not _dangling(work) or wf.dry_run(work, ["--rerun-incomplete", *TARGETS, *config]), (
        "dangling crop pointers and a workflow that calls itself up to date"
    )
    wf.snakemake(work, ["--unlock", *config], timeout=120)
    proc = _run(work, config)  # the profile's plain run (rerun-incomplete, as profiles/default)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    assert not _dangling(work)
    # (--forcerun also scheduled a few jobs outside the targets, e.g. the parse summary, that the
    # killed run finished: complete extra outputs, compared only for what the targets need.)
    got = repro.snapshot(work / RES, SKIP)
    assert set(expected) <= set(got)
    diff = repro.differences(expected, {k: got[k] for k in expected})
    assert not diff, f"after the killed rerun: {diff}"

    # 4. A crop deleted behind the workflow's back (the folder stays): the shard job refuses, loudly.
    pointed = [(ds.parent.name, r["crop_path"]) for ds in sorted((work / RES / "filter").glob("c*/dataset.parquet"))
               for r in pq.read_table(ds, columns=["crop_path"]).to_pylist()]  # fmt: skip
    chunk, crop = pointed[0][0], work / pointed[0][1]
    crop.unlink()  # one that a dataset row points to
    proc = wf.snakemake(work, ["--cores", "1", "--forcerun", "shard_chunk", f"{RES}/shards", *config],
                        timeout=600)  # fmt: skip
    assert proc.returncode != 0
    assert "DanglingPointer" in proc.stdout + proc.stderr and "point to crops" in proc.stdout + proc.stderr
    # The chunk's shards are not left half-written under their final name.
    assert not (work / RES / "shard_chunks" / chunk).exists()
