"""Chunking, citation dates and article selection (pmcflow.chunks, pmcflow.pmc.select)."""

from __future__ import annotations

from datetime import date

import pytest

from pmcflow.chunks import chunk_digest, chunk_manifest, chunk_of, pmcid_number
from pmcflow.licenses import normalise
from pmcflow.pmc.select import Selection, citation_date, parse_bound


def test_chunk_of_is_stateless_and_stable():
    assert chunk_of(13900, 10000) == "c000001"
    assert chunk_of(9999, 10000) == "c000000"
    assert chunk_of(12904753, 10000) == "c001290"
    assert chunk_of(5, 1) == "c000005"
    with pytest.raises(ValueError):
        chunk_of(1, 0)
    assert pmcid_number("PMC13900") == 13900 and pmcid_number("13900") == 13900
    with pytest.raises(ValueError):
        pmcid_number("PMCX")


def test_chunk_digest_ignores_row_order_and_sees_changes():
    rows = [
        {"article_uid": "PMC1.1", "key": "metadata/PMC1.1.json", "license_code": None, "is_retracted": None,
         "chunk": "c000000"},
        {"article_uid": "PMC2.1", "key": "metadata/PMC2.1.json", "license_code": "CC BY", "is_retracted": False,
         "chunk": "c000000"},
    ]
    assert chunk_digest(rows) == chunk_digest(list(reversed(rows)))
    changed = [dict(rows[0]), dict(rows[1], license_code="CC BY-NC")]
    assert chunk_digest(changed) != chunk_digest(rows)
    man = chunk_manifest(rows + [dict(rows[0], article_uid="PMC20001.1", chunk="c000002")])
    assert list(man) == ["c000000", "c000002"] and man["c000000"]["n"] == 2


@pytest.mark.parametrize(
    ("citation", "start", "end"),
    [
        ("Breast Cancer Res. 2001 Nov 2; 3(1):55-60", date(2001, 11, 2), date(2001, 11, 2)),
        ("J Neurol Surg Rep. 2026 Feb 13; 87(1):e17-e18", date(2026, 2, 13), date(2026, 2, 13)),
        ("Lancet. 2021 Jan 27 6-12 February; 397(10273):452-455", date(2021, 1, 27), date(2021, 1, 27)),
        ("BMC Med. 2020 Aug 25; 18:225", date(2020, 8, 25), date(2020, 8, 25)),
        ("Some J. 2019 Dec; 5(4):1-2", date(2019, 12, 1), date(2019, 12, 31)),
        ("Some J. 2019 Dec-Jan; 5(4):1-2", date(2019, 12, 1), date(2019, 12, 31)),
        ("Some J. 2018 Spring; 12:1", date(2018, 1, 1), date(2018, 12, 31)),
        ("3 Biotech. 2012 Mar 7; 2(1):1-10", date(2012, 3, 7), date(2012, 3, 7)),
    ],
)
def test_citation_date(citation, start, end):
    span = citation_date(citation)
    assert span is not None and (span.start, span.end) == (start, end)


def test_citation_without_date():
    assert citation_date(None) is None
    assert citation_date("") is None
    assert citation_date("Unknown journal; 3(1):55-60") is None


def test_bounds_and_license_normalisation():
    assert parse_bound("") is None
    b = parse_bound("2020-02")
    assert b is not None and (b.start, b.end) == (date(2020, 2, 1), date(2020, 2, 29))
    for bad in ("2020/01", "2020-13", "2021-02-30", "20"):
        with pytest.raises(ValueError):
            parse_bound(bad)
    assert normalise(" cc-by-nc ") == "CC BY-NC"
    assert normalise("CC0") == "CC0"
    assert normalise("NO-CC CODE") == "NO-CC CODE"
    assert normalise("") is None


def test_selection_checks():
    sel = Selection.from_config(
        {"licenses": ["CC0", "CC BY"], "include_retracted": False, "date_from": "2001-11", "date_to": "2020"}
    )
    ok = "Breast Cancer Res. 2001 Nov 2; 3(1):55-60"
    assert sel.check(license_code="CC BY", is_retracted=False, citation=ok) is None
    assert sel.check(license_code="cc-by", is_retracted=None, citation=ok) is None
    assert sel.check(license_code="CC BY-NC", citation=ok)[0] == "license_not_selected"
    assert sel.check(license_code=None, citation=ok)[0] == "license_not_selected"
    assert sel.check(license_code="CC BY", is_retracted=True, citation=ok)[0] == "retracted"
    assert sel.check(license_code="CC BY", citation="X. 2001 Oct 31; 1:1")[0] == "out_of_date_range"
    assert sel.check(license_code="CC BY", citation="X. 2021 Jan 1; 1:1")[0] == "out_of_date_range"
    assert sel.check(license_code="CC BY", citation="X. 2001; 1:1") is None  # the year overlaps
    assert sel.check(license_code="CC BY", citation="no date here")[0] == "date_unknown"
    # Unknown facts are skipped, not guessed.
    assert sel.check(license_known=False, retraction_known=False, date_known=False) is None
    every = Selection.from_config({})
    assert every.check(license_code=None, is_retracted=False, citation=None) is None
    assert Selection.from_config({"include_retracted": True}).check(is_retracted=True) is None


def test_listing_selection_and_filter_agree_on_every_spelling() -> None:
    """select.licenses and filter.licenses normalise the same way: a versioned or URL spelling is
    kept by both or by neither (the listing used to refuse "CC BY 4.0" that the filter kept)."""
    from pmcflow.filter import checks as C

    sel = Selection.from_config({"licenses": ["CC BY"]})
    filt = C.FilterSettings.from_config({"filter": {"licenses": ["CC BY"]}})
    for code in ("CC BY", "cc-by-4.0", "CC BY 4.0", "https://creativecommons.org/licenses/by/4.0/", "CC BY-NC"):
        kept_at_listing = sel.check(license_code=code) is None
        kept_at_filter = C.check_license(code, filt) is None
        assert kept_at_listing == kept_at_filter == (code != "CC BY-NC"), code
