"""Filter stage: licence codes, every rejection reason, pHash, corpus-wide duplicates, counts."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from pmcflow import licenses as L
from pmcflow import schema as S
from pmcflow import tables as T
from pmcflow.filter import checks as C
from pmcflow.filter.checks import FilterSettings
from pmcflow.filter.phash import cluster_duplicates, hamming, near_pairs, phash_hex, popcount64
from pmcflow.filter.stage import filter_chunk, find_duplicates, phash_chunk, summarize

CAPTION = "Axial CT of the chest showing a ground-glass opacity in the right lower lobe."


def _texture(seed: int, size: tuple[int, int] = (160, 120)) -> Image.Image:
    """A smooth random image (structure at several scales, like a photograph)."""
    rng = np.random.default_rng(seed)
    w, h = size
    acc = np.zeros((h, w), dtype=np.float64)
    for cells, weight in ((4, 1.0), (8, 0.5), (16, 0.25)):
        small = Image.fromarray((rng.random((cells, cells)) * 255).astype(np.uint8), "L")
        acc += weight * np.asarray(small.resize((w, h), Image.Resampling.BICUBIC), dtype=np.float64)
    acc = (acc - acc.min()) / (np.ptp(acc) or 1.0) * 255
    grey = acc.astype(np.uint8)
    return Image.fromarray(np.stack([grey, 255 - grey, grey // 2 + 60], axis=-1), "RGB")


def _row(uid: str, crop: Path | str | None, **kw: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "subfigure_uid": uid,
        "figure_uid": uid.rsplit("/", 1)[0],
        "article_uid": uid.split("/", 1)[0],
        "pmcid": uid.split(".", 1)[0],
        "version": 1,
        "chunk": "c0",
        "crop_path": str(crop) if crop else None,
        "crop_width": 160,
        "crop_height": 120,
        "license_code": "CC BY",
        "is_retracted": False,
        "caption": CAPTION,
        "subcaption": CAPTION,
    }
    row.update(kw)
    return row


def _cfg(**filter_kw: Any) -> dict[str, Any]:
    f: dict[str, Any] = {"modality": {"enabled": False}}
    f.update(filter_kw)
    return {"seed": 1, "filter": f}


# ----------------------------------------------------------------------------------------------
# licence codes and caption checks
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("CC BY", "CC BY"),
        ("cc-by", "CC BY"),
        ("CC BY 4.0", "CC BY"),
        ("cc_by_nc_nd", "CC BY-NC-ND"),
        ("CC BY-NC-SA", "CC BY-NC-SA"),
        ("cc0", "CC0"),
        ("CC-0", "CC0"),
        ("https://creativecommons.org/licenses/by-sa/4.0/", "CC BY-SA"),
        ("http://creativecommons.org/publicdomain/zero/1.0/", "CC0"),
        (" no-cc  code ", "NO-CC CODE"),
        ("", None),
        (None, None),
    ],
)
def test_license_normalisation(raw: str | None, norm: str | None) -> None:
    assert L.normalise(raw) == norm


def test_license_defaults_and_config() -> None:
    s = C.FilterSettings.from_config({})
    assert s.licenses == frozenset({"CC0", "CC BY", "CC BY-SA", "CC BY-ND"})
    assert C.check_license("cc-by-4.0", s) is None
    assert C.check_license("CC BY-NC", s) is not None
    assert C.check_license(None, s) is not None
    assert C.FilterSettings.from_config({"filter": {"licenses": []}}).licenses is None
    s2 = C.FilterSettings.from_config({"filter": {"licenses": ["cc-by-nc"]}})
    assert C.check_license("CC BY-NC", s2) is None and C.check_license("CC BY", s2) is not None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "caption_empty"),
        ("(A) CT scan", "caption_too_short"),
        ("p < 0.05 ; n = 12 ; 3.4 ± 0.2 mm", "caption_few_words"),
        ("Values 12.5/13.7/14.1/15.9 and 22.1/23.4/24.8 versus 33.0/35.2 mm", "caption_not_text"),
        (CAPTION, None),
    ],
)
def test_caption_checks(text: str, reason: str | None) -> None:
    got = C.check_caption(text, C.FilterSettings.from_config({}))
    assert (got[0] if got else None) == reason


def test_modality_decision() -> None:
    s = C.FilterSettings.from_config({"filter": {"modality": {"min_score": 0.5}}})
    assert C.check_modality("radiology", 0.9, s) is None
    assert C.check_modality("plot", 0.9, s)[0] == "modality_dropped"  # type: ignore[index]
    assert C.check_modality("radiology", 0.3, s)[0] == "modality_low_confidence"  # type: ignore[index]
    assert C.check_modality("newclass", 0.9, s)[0] == "modality_not_kept"  # type: ignore[index]


# ----------------------------------------------------------------------------------------------
# pHash
# ----------------------------------------------------------------------------------------------


def test_phash_properties() -> None:
    a = _texture(1, (320, 240))
    assert len(phash_hex(a)) == 16
    assert hamming(phash_hex(a), phash_hex(a.copy())) == 0
    small = a.resize((130, 97), Image.Resampling.BILINEAR)
    buf = io.BytesIO()
    small.save(buf, "JPEG", quality=40)
    recompressed = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    assert hamming(phash_hex(a), phash_hex(recompressed)) <= 4
    others = [hamming(phash_hex(a), phash_hex(_texture(s, (320, 240)))) for s in range(2, 12)]
    assert min(others) > 10 and np.mean(others) > 20


def test_popcount_and_pairs_match_bruteforce() -> None:
    rng = np.random.default_rng(0)
    base = rng.integers(0, 2**63, size=60, dtype=np.uint64)
    # plant neighbours at distance 1..8 so that band collisions and misses both occur
    flips = [base[k] ^ np.uint64(sum(1 << int(b) for b in rng.choice(64, size=k % 8 + 1, replace=False))) for k in range(60)]
    h = np.unique(np.concatenate([base, np.array(flips, dtype=np.uint64)]))
    ii, jj, dd = near_pairs(h, 6)
    got = set(zip(ii.tolist(), jj.tolist(), strict=True))
    want = {
        (i, j)
        for i in range(h.size)
        for j in range(i + 1, h.size)
        if (int(h[i]) ^ int(h[j])).bit_count() <= 6
    }
    assert got == want and len(want) > 30
    assert dd.tolist() == [(int(h[i]) ^ int(h[j])).bit_count() for i, j in zip(ii, jj, strict=True)]
    assert popcount64(np.array([0, 1, 2**64 - 1], dtype=np.uint64)).tolist() == [0, 1, 64]


def test_leader_clusters_are_deterministic_and_tight() -> None:
    h = np.array([0b0, 0b111, 0b111111, 0b0, 0xFFFF_FFFF_0000_0000], dtype=np.uint64)
    uids = ["d", "b", "a", "c", "e"]
    dups = cluster_duplicates(uids, h, 4)
    # a=0b111111 is first (smallest uid) -> representative; b (0b111) is 3 from a -> duplicate;
    # c (0) is 3 from b but 6 from a -> its own representative (no chaining); d == c exactly.
    assert [(d.subfigure_uid, d.duplicate_of, d.distance) for d in dups] == [("b", "a", 3), ("d", "c", 0)]
    perm = [4, 2, 0, 3, 1]
    again = cluster_duplicates([uids[k] for k in perm], h[perm], 4)
    assert again == dups


# ----------------------------------------------------------------------------------------------
# the stage
# ----------------------------------------------------------------------------------------------


def _write_enriched(path: Path, rows: list[dict[str, Any]]) -> Path:
    T.write_table(rows, S.ENRICHED, path)
    return path


def test_every_reason_and_counts_reconcile(tmp_path: Path) -> None:
    crops = tmp_path / "crops"
    crops.mkdir()
    good = crops / "good.png"
    _texture(1).save(good)
    tiny = crops / "tiny.png"
    _texture(2, (40, 30)).save(tiny)
    broken = crops / "broken.png"
    broken.write_bytes(good.read_bytes()[:200])
    rows = [
        _row("PMC1.1/f1/s0", good),
        _row("PMC1.1/f1/s1", good, license_code="CC BY-NC"),
        _row("PMC1.1/f1/s2", good, is_retracted=True),
        _row("PMC1.1/f1/s3", tiny, crop_width=40, crop_height=30),
        _row("PMC1.1/f1/s4", tiny, crop_width=None, crop_height=None),  # size known only after decoding
        _row("PMC1.1/f1/s5", broken),
        _row("PMC1.1/f1/s6", crops / "missing.png"),
        _row("PMC1.1/f1/s7", good, subcaption="", caption=""),
        _row("PMC1.1/f1/s8", good, subcaption="see text", caption=None),
    ]
    enriched = _write_enriched(tmp_path / "enriched.parquet", rows)
    rec = filter_chunk(FilterSettings.from_config(_cfg()), "c0", enriched, tmp_path / "out")
    assert rec["in"] == 9 and rec["kept"] == 1
    assert rec["rejected"] == {
        "license_not_allowed": 1,
        "retracted": 1,
        "crop_too_small": 2,
        "crop_unreadable": 2,
        "caption_empty": 1,
        "caption_too_short": 1,
    }
    ds = pq.read_table(tmp_path / "out" / "dataset.parquet")
    assert ds.schema.names == S.DATASET.names
    kept = ds.to_pylist()[0]
    assert kept["subfigure_uid"] == "PMC1.1/f1/s0" and kept["phash"] == phash_hex(Image.open(good))
    rej = T.read_rows(tmp_path / "out" / "rejections.parquet")
    assert len(rej) == 8 and all(r["stage"] == "filter" and r["detail"] for r in rej)
    assert T.read_counts(tmp_path / "out" / "counts.json")["kept"] == 1
    summary = summarize([tmp_path / "out" / "counts.json"]).to_pylist()
    assert summary[0]["reason"] == "license_not_allowed" and summary[-1] == {"reason": "kept", "count": 1, "share_of_in": 1 / 9}


def test_empty_and_all_filtered_chunks(tmp_path: Path) -> None:
    empty = _write_enriched(tmp_path / "empty.parquet", [])
    rec = filter_chunk(FilterSettings.from_config(_cfg()), "c0", empty, tmp_path / "e")
    assert rec["in"] == 0 and rec["kept"] == 0 and rec["rejected"] == {}
    assert pq.read_table(tmp_path / "e" / "dataset.parquet").num_rows == 0
    phash_chunk(FilterSettings.from_config(_cfg()), "c0", empty, tmp_path / "e" / "phash.parquet")
    assert find_duplicates(FilterSettings.from_config(_cfg()), [tmp_path / "e" / "phash.parquet"], tmp_path / "dups.parquet")["duplicates"] == 0

    allbad = _write_enriched(
        tmp_path / "bad.parquet", [_row(f"PMC2.1/f1/s{k}", None, license_code="CC BY-NC-ND") for k in range(3)]
    )
    rec = filter_chunk(FilterSettings.from_config(_cfg()), "c1", allbad, tmp_path / "b", duplicates_path=tmp_path / "dups.parquet")
    assert rec == {"stage": "filter", "in": 3, "kept": 0, "rejected": {"license_not_allowed": 3}, "chunk": "c1",
                   "extra": {"dedup_scope.corpus": 1}}
    assert pq.read_table(tmp_path / "b" / "dataset.parquet").schema.names == S.DATASET.names


def test_duplicates_across_chunks(tmp_path: Path) -> None:
    crops = tmp_path / "crops"
    crops.mkdir()
    base = _texture(7, (300, 220))
    base.save(crops / "orig.png")
    base.resize((150, 110), Image.Resampling.BILINEAR).save(crops / "copy.jpg", quality=60)
    _texture(8, (300, 220)).save(crops / "other.png")
    base.save(crops / "nc.png")
    chunk_a = [_row("PMC9.1/f1/s0", crops / "copy.jpg"), _row("PMC9.1/f1/s1", crops / "other.png")]
    # PMC1 sorts first but is non-commercial: it must not become the representative.
    chunk_b = [_row("PMC5.1/f2/s0", crops / "orig.png"), _row("PMC1.1/f1/s0", crops / "nc.png", license_code="CC BY-NC")]
    paths = {}
    for name, rows in (("a", chunk_a), ("b", chunk_b)):
        enr = _write_enriched(tmp_path / f"{name}.parquet", rows)
        phash_chunk(FilterSettings.from_config(_cfg()), name, enr, tmp_path / name / "phash.parquet")
        paths[name] = enr
    stats = find_duplicates(FilterSettings.from_config(_cfg()), [tmp_path / n / "phash.parquet" for n in "ba"], tmp_path / "dups.parquet")
    assert stats["hashes"] == 3 and stats["duplicates"] == 1
    dups = T.read_rows(tmp_path / "dups.parquet")
    assert len(dups) == 1
    assert dups[0]["subfigure_uid"] == "PMC9.1/f1/s0" and dups[0]["duplicate_of"] == "PMC5.1/f2/s0"
    assert (dups[0]["chunk"], dups[0]["duplicate_of_chunk"]) == ("a", "b") and dups[0]["distance"] <= 6
    # same result whatever the chunk order
    find_duplicates(FilterSettings.from_config(_cfg()), [tmp_path / n / "phash.parquet" for n in "ab"], tmp_path / "dups2.parquet")
    assert T.read_rows(tmp_path / "dups2.parquet") == dups

    rec_a = filter_chunk(FilterSettings.from_config(_cfg()), "a", paths["a"], tmp_path / "a", duplicates_path=tmp_path / "dups.parquet",
                         phash_path=tmp_path / "a" / "phash.parquet")
    rec_b = filter_chunk(FilterSettings.from_config(_cfg()), "b", paths["b"], tmp_path / "b", duplicates_path=tmp_path / "dups.parquet")
    assert rec_a["rejected"] == {"near_duplicate": 1} and rec_a["kept"] == 1
    assert rec_b["rejected"] == {"license_not_allowed": 1} and rec_b["kept"] == 1
    rej = T.read_rows(tmp_path / "a" / "rejections.parquet")
    assert "PMC5.1/f2/s0" in rej[0]["detail"]
    merged = T.merge_counts("filter", [rec_a, rec_b])
    assert merged["in"] == 4 and merged["kept"] == 2

    # without a duplicates file the search is chunk-local: chunk a alone has no duplicate
    rec_local = filter_chunk(FilterSettings.from_config(_cfg()), "a", paths["a"], tmp_path / "a_local")
    assert rec_local["kept"] == 2 and rec_local["extra"]["dedup_scope.chunk"] == 1

