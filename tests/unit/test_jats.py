"""The JATS parse stage: fixtures, text, metadata, safety, media, chunk stage and CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lxml import etree

from pmcflow import jats
from pmcflow import schema as S
from pmcflow.jats import JatsError, parse_bytes, parse_file, resolve_media
from pmcflow.licenses import from_jats as normalise_license
from pmcflow.tables import read_counts

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "jats"
FIXTURE_FILES = sorted(p for p in FIXTURES.iterdir() if p.suffix in {".xml", ".nxml"})


def _independent_counts(path: Path) -> tuple[int, int, list[str]]:
    """<fig> count, fig-xref count and xref texts -- straight lxml, namespace-agnostic."""
    tree = etree.parse(str(path), etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False))
    figs = tree.xpath("//*[local-name()='fig']")
    xrefs = tree.xpath("//*[local-name()='xref'][@ref-type='fig']")
    texts = [" ".join("".join(x.itertext()).split()) for x in xrefs]
    return len(figs), len(xrefs), texts


def _article(body: str, front: str = "", attrs: str = 'article-type="research-article"') -> bytes:
    return (
        f'<article xmlns:xlink="http://www.w3.org/1999/xlink" {attrs}><front><article-meta>{front}'
        f"</article-meta></front><body>{body}</body></article>"
    ).encode()


# --------------------------------------------------------------------------------------
# Every fixture: every <fig> and every fig xref is recovered
# --------------------------------------------------------------------------------------
def test_fixture_set_is_complete() -> None:
    assert len(FIXTURE_FILES) == 14
    assert (FIXTURES / "README.md").is_file()


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_fixture_counts_match_independent_lxml(path: Path) -> None:
    n_figs, n_xrefs, texts = _independent_counts(path)
    parsed = parse_file(path)
    assert len(parsed.figures) == n_figs == parsed.article["n_figures"]
    assert len(parsed.mentions) == n_xrefs == parsed.article["n_mentions"]
    assert [m["text"] for m in parsed.mentions] == texts
    assert [m["ordinal"] for m in parsed.mentions] == list(range(n_xrefs))
    assert [f["ordinal"] for f in parsed.figures] == list(range(n_figs))
    # Every mention has a paragraph containing its own text, and (real files) resolves to a figure.
    for m in parsed.mentions:
        assert m["text"] in m["paragraph"]
        assert m["figure_ids"]
    ids = [f["figure_id"] for f in parsed.figures]
    assert len(set(ids)) == len(ids)
    # No doubled spaces, no leading/trailing whitespace anywhere.
    for s in [f["caption"] or "" for f in parsed.figures] + [m["paragraph"] for m in parsed.mentions]:
        assert "  " not in s and s == s.strip()
    # n_mentions per figure adds up to the number of (mention, target) links.
    linked = sum(len(jats._Linker(parsed.figures).targets(m["figure_ids"])) for m in parsed.mentions)
    assert sum(f["n_mentions"] for f in parsed.figures) == linked


EXPECTED_META = {
    # file: (pmcid, pmid, doi, pub_date, year, license_code, journal)
    "1471-2180-11-174.nxml": ("PMC3166277", "21810267", "10.1186/1471-2180-11-174", "2011-08-02", 2011, "CC BY",
                              "BMC Microbiology"),
    "PMC2775662.xml": ("PMC2775662", None, "10.1155/2008/789026", None, None, "CC BY", "Advances in Bioinformatics"),
    "PMC3339583.xml": ("PMC3339583", "22558545", "10.1007/s13205-011-0034-4", "2011-11-03", 2011, "CC BY",
                       "3 Biotech"),
    "ehp-116-1694.nxml": ("PMC2599765", "19079722", "10.1289/ehp.11570", "2008-08-01", 2008, "PD",
                          "Environmental Health Perspectives"),
    "elife02935.xml": (None, None, "10.7554/eLife.02935", "2014-10-01", 2014, "CC0", "eLife"),
    "elife00007.xml": (None, None, "10.7554/eLife.00007", None, 2012, "CC BY", "eLife"),
    "pone.0046493.nxml": ("PMC3460867", "23029536", "10.1371/journal.pone.0046493", "2012-09-28", 2012, "CC BY",
                          "PLoS ONE"),
    "PMC156895_oai.nxml": ("PMC156895", "12729465", "10.1186/1471-2121-4-4", "2003-05-02", 2003, None,
                           "BMC Cell Biology"),
    # PLOS's own XML: http DTD system id, no named entity reference (rejected as malformed once)
    "journal.pone.0002554.xml": (None, None, "10.1371/journal.pone.0002554", "2008-07-02", 2008, "CC BY",
                                 "PLoS ONE"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED_META))
def test_fixture_metadata(name: str) -> None:
    pmcid, pmid, doi, pub_date, year, lic, journal = EXPECTED_META[name]
    art = parse_file(FIXTURES / name).article
    assert art["pmcid"] == pmcid
    assert art["doi"] == doi
    if pmid is not None:
        assert art["pmid"] == pmid
    if pub_date is not None:
        assert art["pub_date"] == pub_date
    if year is not None:
        assert art["year"] == year
    assert art["license_code"] == lic
    assert art["journal"] == journal
    assert art["version"] == 1
    assert art["article_type"] == "research-article"
    assert art["is_retracted"] is False and art["retraction_source"] is None
    assert art["article_uid"] == (f"{pmcid}.1" if pmcid else None)


def test_fixture_article_keys_are_schema_columns() -> None:
    parsed = parse_file(FIXTURES / "pone.0046493.nxml")
    assert set(parsed.article) == set(S.ARTICLES.names)
    assert set(parsed.figures[0]) == set(S.FIGURES.names)
    assert set(parsed.mentions[0]) == set(S.MENTIONS.names)


def test_oai_envelope_with_default_namespace() -> None:
    parsed = parse_file(FIXTURES / "PMC156895_oai.nxml")
    assert parsed.article["title"].startswith("Wnt/Wingless signaling through β-catenin")
    assert [f["figure_id"] for f in parsed.figures] == ["F1", "F2", "F3", "F4", "F5"]
    assert parsed.figures[0]["graphics"] == ["1471-2121-4-4-1"]
    assert parsed.figures[0]["caption"].startswith("The expression of Wg dual receptors and their activities")
    first = parsed.mentions[0]
    assert (first["text"], first["panels"], first["figure_ids"]) == ("1A", ["a"], ["F1"])
    assert first["section"] == "Wg and its receptors Arr and DFz2 can activate LEF-dependent transcription"
    assert "(Figure 1A), we detected" in first["paragraph"]


def test_oai_envelope_pmcid_from_header_when_article_has_none() -> None:
    xml = (
        b'<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><GetRecord><record><header>'
        b"<identifier>oai:pubmedcentral.nih.gov:424242</identifier></header><metadata>"
        b'<article xmlns="https://jats.nlm.nih.gov/ns/archiving/1.3/"><front><article-meta><title-group>'
        b"<article-title>T</article-title></title-group></article-meta></front><body><p>see "
        b'<xref ref-type="fig" rid="f1">Figure 1C</xref></p><fig id="f1"><caption><p>Cap.</p></caption></fig>'
        b"</body></article></metadata></record></GetRecord></OAI-PMH>"
    )
    parsed = parse_bytes(xml)
    assert parsed.article["pmcid"] == "PMC424242"
    assert parsed.mentions[0]["panels"] == ["c"]
    assert parsed.figures[0]["caption"] == "Cap."
    assert parsed.mentions[0]["figure_uids"] == ["PMC424242.1/f1"]


def test_elife_figure_supplements_and_groups() -> None:
    parsed = parse_file(FIXTURES / "elife02935.xml")
    by_id = {f["figure_id"]: f for f in parsed.figures}
    assert by_id["fig1"]["parent_figure_id"] is None
    for sup in ("fig1s1", "fig1s2", "fig1s3", "fig1s4", "fig1s5"):
        assert by_id[sup]["parent_figure_id"] == "fig1"
        assert by_id[sup]["fig_group_id"] == by_id["fig1"]["fig_group_id"] is not None
    assert by_id["fig5s3"]["parent_figure_id"] == "fig5"
    assert by_id["fig6"]["fig_group_id"] is None  # a figure without supplements is not grouped
    assert by_id["fig1s1"]["label"] == "Figure 1—figure supplement 1."
    # eLife's "DOI: http://dx.doi.org/..." caption lines are not caption text.
    assert all("dx.doi.org" not in (f["caption"] or "") for f in parsed.figures)
    assert by_id["fig1"]["caption_title"] == "Mitochondrial somatic substitutions identified from 1675 Tumor–Normal pairs."
    assert by_id["fig1"]["caption"].startswith(by_id["fig1"]["caption_title"] + " mtDNA genes and intergenic")
    m = next(m for m in parsed.mentions if m["text"] == "Figure 1—figure supplement 5A and B")
    assert m["panels"] == ["a", "b"] and m["figure_ids"] == ["fig1s5"]


def test_multi_rid_mentions() -> None:
    parsed = parse_file(FIXTURES / "elife00007.xml")
    m = next(m for m in parsed.mentions if m["text"] == "Figures 4 and 5C")
    assert m["figure_ids"] == ["fig4", "fig5"]
    assert m["panels"] == ["c"]
    m = next(m for m in parsed.mentions if m["text"] == "Figures 1–3")
    assert m["figure_ids"] == ["fig1", "fig2", "fig3"] and m["panels"] == []


def test_nested_markup_in_xrefs_and_paragraphs() -> None:
    parsed = parse_file(FIXTURES / "pone.0046493.nxml")
    m = next(m for m in parsed.mentions if m["text"] == "Figure 3A–C")
    assert m["panels"] == ["a", "b", "c"]
    assert m["section"] == "Mass spectrometry analyses"  # the innermost titled section
    ehp = parse_file(FIXTURES / "ehp-116-1694.nxml")
    first = ehp.mentions[0]
    assert first["paragraph"].startswith("We observed decreased plasma T4 levels in both sexes after dietary PBDE-47 "
                                         "exposure (p = 0.002; Figure 1).")
    assert ehp.figures[2]["caption"].startswith("Dietary PBDE-47 exposure elevated mRNA levels for TRα in females (A)")


# --------------------------------------------------------------------------------------
# Text: whitespace-correct
# --------------------------------------------------------------------------------------
def test_paragraph_text_keeps_inline_and_separates_blocks() -> None:
    body = (
        "<sec><title>Res<italic>ults</italic></title><p>Text <italic>in</italic>side<sup>2</sup>  and\n"
        '<xref ref-type="fig" rid="f1">Fig.&#160;1<bold>B</bold></xref>.<list><list-item><p>one</p></list-item>'
        "<list-item><p>two</p></list-item></list>end <fig id=\"f1\"><label>Figure 1</label><caption><title>T"
        "</title><p>cap</p></caption></fig>after<table-wrap><table><tr><td>cell</td></tr></table></table-wrap>"
        "</p></sec>"
    )
    parsed = parse_bytes(_article(body))
    m = parsed.mentions[0]
    assert m["text"] == "Fig. 1B"
    assert m["panels"] == ["b"]
    assert m["paragraph"] == "Text inside2 and Fig. 1B. one two end after"
    assert m["section"] == "Results"
    assert parsed.figures[0]["caption"] == "T cap"


def test_caption_title_and_paragraphs() -> None:
    body = (
        '<fig id="f1"><label>Figure 1.</label><caption><title>Title with <italic>E. coli</italic>.</title>'
        "<p>First <bold>(A)</bold> part.</p><p>Second<sup>*</sup>.</p></caption>"
        '<graphic xlink:href="a.tif"/></fig>'
    )
    f = parse_bytes(_article(body)).figures[0]
    assert f["label"] == "Figure 1."
    assert f["caption_title"] == "Title with E. coli."
    assert f["caption"] == "Title with E. coli. First (A) part. Second*."


def test_mentions_in_captions_tables_and_titles_are_kept() -> None:
    body = (
        '<sec><title>See <xref ref-type="fig" rid="f1">Figure 1</xref></title><p>x</p></sec>'
        '<fig id="f1"><caption><p>As in <xref ref-type="fig" rid="f2">Figure 2D</xref>.</p></caption></fig>'
        '<fig id="f2"/><table-wrap><table><tr><td>Fig. <xref ref-type="fig" rid="f2">2</xref></td></tr>'
        "</table></table-wrap>"
    )
    parsed = parse_bytes(_article(body))
    assert [m["text"] for m in parsed.mentions] == ["Figure 1", "Figure 2D", "2"]
    assert [m["paragraph"] for m in parsed.mentions] == ["See Figure 1", "As in Figure 2D.", "Fig. 2"]
    assert parsed.mentions[1]["panels"] == ["d"]
    indexes = [m["paragraph_index"] for m in parsed.mentions]
    assert indexes == sorted(indexes) and len(set(indexes)) == 3


# --------------------------------------------------------------------------------------
# Figures: ids, groups, supplements, placement
# --------------------------------------------------------------------------------------
def test_missing_ids_and_captions() -> None:
    body = '<p>text</p><fig><graphic xlink:href="g1"/></fig><fig id="f2"><label>Figure 2</label></fig><fig id="f2"/>'
    figs = parse_bytes(_article(body)).figures
    assert [f["figure_id"] for f in figs] == ["fig-auto-0", "f2", "fig-auto-2"]
    assert [f["figure_id_synthetic"] for f in figs] == [True, False, True]
    assert figs[0]["caption"] is None and figs[0]["label"] is None and figs[0]["caption_title"] is None
    assert figs[0]["graphics"] == ["g1"]
    assert figs[1]["caption"] is None and figs[1]["graphics"] == []


def test_fig_group_caption_and_group_rid() -> None:
    body = (
        '<p>See <xref ref-type="fig" rid="g1">Figure 1</xref> and <xref ref-type="fig" rid="f1b">Figure 1B</xref>'
        ' and <xref ref-type="fig" rid="nope">Figure 9</xref>.</p>'
        '<fig-group id="g1"><label>Figure 1</label><caption><p>Group caption.</p></caption>'
        '<fig id="f1a"><caption><p>Part a.</p></caption><graphic xlink:href="x1a"/></fig>'
        '<fig id="f1b"><graphic xlink:href="x1b"/></fig></fig-group>'
    )
    parsed = parse_bytes(_article(body, front='<article-id pub-id-type="pmc">123</article-id>'))
    a, b = parsed.figures
    assert a["fig_group_id"] == b["fig_group_id"] == "g1"
    assert a["caption"] == "Group caption. Part a."
    assert b["caption"] == "Group caption."
    m_group, m_b, m_missing = parsed.mentions
    assert m_group["figure_uids"] == ["PMC123.1/f1a", "PMC123.1/f1b"]
    assert m_b["figure_uids"] == ["PMC123.1/f1b"] and m_b["panels"] == ["b"]
    assert m_missing["figure_ids"] == ["nope"] and m_missing["figure_uids"] == []
    assert (a["n_mentions"], b["n_mentions"]) == (1, 2)


def test_child_fig_outside_group_and_figures_everywhere() -> None:
    body = (
        '<sec><p>a</p><fig id="fig1"><caption><p>One.</p></caption></fig>'
        '<fig id="fig1s1" specific-use="child-fig"><caption><p>Sup.</p></caption></fig></sec>'
        '<boxed-text><caption><title>Box 1</title></caption><fig id="bx1"/></boxed-text>'
        '<sec sec-type="supplementary-material"><supplementary-material><fig id="sm1"/></supplementary-material></sec>'
    )
    xml = _article(body).replace(b"</body>", b'</body><back><app-group><app><fig id="app1"/></app></app-group></back>')
    figs = parse_bytes(xml).figures
    assert [f["figure_id"] for f in figs] == ["fig1", "fig1s1", "bx1", "sm1", "app1"]
    assert figs[1]["parent_figure_id"] == "fig1"
    assert figs[1]["fig_group_id"] is None


def test_graphics_with_alternatives() -> None:
    body = (
        '<fig id="f1"><alternatives><graphic xlink:href="f1.tif"/><graphic xlink:href="f1-web"/></alternatives>'
        "</fig>"
    )
    f = parse_bytes(_article(body), media_names=["f1.jpg", "F1-WEB.PNG"]).figures[0]
    assert f["graphics"] == ["f1.tif", "f1-web"]
    assert f["graphic_paths"] == ["f1.jpg", "F1-WEB.PNG"]


_TEX_DOC = (
    "\\documentclass[12pt]{minimal} \\usepackage{amsmath} \\usepackage{upgreek} "
    "\\setlength{\\oddsidemargin}{-69pt} \\begin{document}$${{FWF}}_{{salt}}^{\\prime}$$\\end{document}"
)


def test_formula_alternatives_read_as_the_formula_not_a_latex_preamble() -> None:
    # the shape of Springer Nature / Europe PMC captions: <alternatives> with the TeX rendering
    # (a whole LaTeX document) first, MathML second -- read the MathML, never the preamble
    mml = (
        '<mml:math xmlns:mml="http://www.w3.org/1998/Math/MathML"><mml:msubsup><mml:mi>FWF</mml:mi>'
        "<mml:mi>salt</mml:mi><mml:mo>′</mml:mo></mml:msubsup></mml:math>"
    )
    cap = (
        f'<p>Comparison across the section. a <inline-formula><alternatives><tex-math id="M1">{_TEX_DOC}'
        f'</tex-math>{mml}<inline-graphic xlink:href="x.gif"/></alternatives></inline-formula>. '
        f'b <inline-formula><tex-math id="M2">{_TEX_DOC}</tex-math></inline-formula>. c Both.</p>'
    )
    body = f'<fig id="f1"><label>Fig. 9</label><caption>{cap}</caption><graphic xlink:href="f9"/></fig>'
    f = parse_bytes(_article(body)).figures[0]
    assert f["caption"] == (
        "Comparison across the section. a FWFsalt′. b {{FWF}}_{{salt}}^{\\prime}. c Both."
    )
    assert "documentclass" not in f["caption"]


# --------------------------------------------------------------------------------------
# Media resolution
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("href", "names", "expected"),
    [
        ("pone.0046493.g001", ["pone.0046493.g001.gif", "pone.0046493.g001.jpg", "pone.0046493.g001.tif"],
         "pone.0046493.g001.jpg"),
        ("pone.0046493.g001", ["pone.0046493.g001.tif", "pone.0046493.g001.gif"], "pone.0046493.g001.gif"),
        ("x.gif", ["x.gif", "x.jpg"], "x.gif"),  # exact match first
        ("x.tif", ["x.jpg"], "x.jpg"),  # same stem, other extension
        ("figures/x", ["x.jpg"], "x.jpg"),
        ("ELIFE02935FS001", ["elife02935fs001.jpg"], "elife02935fs001.jpg"),  # case-insensitive
        ("elife02935fs001", ["ELIFE02935FS001.JPG", "elife02935fs001.tif"], "elife02935fs001.tif"),  # exact case first
        ("pone.0046493.g002", ["pone.0046493.g001.jpg"], None),
        ("", ["a.jpg"], None),
    ],
)
def test_resolve_media(href: str, names: list[str], expected: str | None) -> None:
    assert resolve_media(href, names) == expected


def test_media_dir_listing(tmp_path: Path) -> None:
    (tmp_path / "pone.0046493.g001.jpg").write_bytes(b"x")
    (tmp_path / "pone.0046493.g001.gif").write_bytes(b"x")
    parsed = parse_file(FIXTURES / "pone.0046493.nxml", media_dir=str(tmp_path))
    assert parsed.figures[0]["graphic_paths"] == [str(tmp_path / "pone.0046493.g001.jpg")]
    assert parsed.figures[1]["graphic_paths"] == [None]


# --------------------------------------------------------------------------------------
# Metadata: dates, licences, retraction, versions
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("dates", "expected"),
    [
        # Only an epub date (pubmed_parser crashes on this one).
        ('<pub-date pub-type="epub"><day>3</day><month>11</month><year>2011</year></pub-date>', ("2011-11-03", 2011)),
        ('<pub-date pub-type="ppub"><month>12</month><year>2008</year></pub-date>'
         '<pub-date pub-type="epub"><day>1</day><month>8</month><year>2008</year></pub-date>', ("2008-08-01", 2008)),
        ('<pub-date pub-type="collection"><year>2012</year></pub-date>', ("2012", 2012)),
        ('<pub-date pub-type="collection"><year>2013</year></pub-date>'
         '<pub-date pub-type="epub"><month>Dec</month><year>2012</year></pub-date>', ("2012-12", 2012)),
        ('<pub-date date-type="pub" publication-format="electronic"><day>01</day><month>10</month><year>2014</year>'
         "</pub-date>", ("2014-10-01", 2014)),
        ('<pub-date pub-type="epub" iso-8601-date="2020-02-29"><year>2020</year></pub-date>', ("2020-02-29", 2020)),
        ('<pub-date pub-type="ppub"><day>31</day><month>2</month><year>2019</year></pub-date>', ("2019-02", 2019)),
        ('<pub-date pub-type="ppub"><season>Jan-Feb</season><year>2019</year></pub-date>', ("2019", 2019)),
        ('<pub-date pub-type="pmc-release"><day>5</day><month>5</month><year>2015</year></pub-date>',
         ("2015-05-05", 2015)),
        ("", (None, None)),
    ],
)
def test_pub_date(dates: str, expected: tuple[str | None, int | None]) -> None:
    art = parse_bytes(_article("", front=dates)).article
    assert (art["pub_date"], art["year"]) == expected


@pytest.mark.parametrize(
    ("hrefs", "types", "texts", "expected"),
    [
        (["http://creativecommons.org/licenses/by/4.0/"], [], [], "CC BY"),
        (["https://creativecommons.org/licenses/by-nc-nd/3.0/igo/"], [], [], "CC BY-NC-ND"),
        (["http://creativecommons.org/licenses/by-nc-sa/4.0"], [], [], "CC BY-NC-SA"),
        (["http://creativecommons.org/licenses/by-sa/4.0/"], [], [], "CC BY-SA"),
        (["http://creativecommons.org/licenses/by-nd/4.0/"], [], [], "CC BY-ND"),
        (["http://creativecommons.org/licenses/by-nc/2.5/uk/"], [], [], "CC BY-NC"),
        (["http://creativecommons.org/publicdomain/zero/1.0/"], [], [], "CC0"),
        (["http://creativecommons.org/publicdomain/mark/1.0/"], ["public-domain"], [], "PD"),
        ([], ["cc-by-nc-nd"], [], "CC BY-NC-ND"),
        ([], ["CC BY 4.0"], [], "CC BY"),
        ([], ["cc0"], [], "CC0"),
        ([], ["open-access"], ["This is an open-access article distributed under the terms of the Creative Commons "
                               "Attribution License, which permits unrestricted use"], "CC BY"),
        ([], [], ["Distributed under a Creative Commons Attribution-NonCommercial-ShareAlike 4.0 licence."],
         "CC BY-NC-SA"),
        ([], [], ["Creative Commons Attribution Non-Commercial License which permits non-commercial use"], "CC BY-NC"),
        ([], [], ["licensed under CC BY-NC-ND 4.0"], "CC BY-NC-ND"),
        # BMC: a CC BY link and a CC0 data waiver in the same text; the licence is CC BY.
        ([], [], ["The Creative Commons Public Domain Dedication waiver "
                  "(http://creativecommons.org/publicdomain/zero/1.0/) applies to the data.",
                  "http://creativecommons.org/licenses/by/4.0/"], "CC BY"),
        ([], [], ["This article is a US Government work and is in the public domain in the USA."], "PD"),
        (["http://www.elsevier.com/open-access/userlicense/1.0/"], ["open-access"], ["Elsevier user license"], None),
        ([], [], ["Copyright 2003 the authors; verbatim copying is permitted."], None),
    ],
)
def test_normalise_license(hrefs, types, texts, expected) -> None:
    code, url = normalise_license(hrefs, types, texts)
    assert code == expected
    if hrefs:
        assert url == hrefs[0]


def test_license_from_ali_license_ref() -> None:
    front = (
        '<permissions xmlns:ali="http://www.niso.org/schemas/ali/1.0/"><license>'
        '<ali:license_ref specific-use="textmining">https://creativecommons.org/licenses/by-nc/4.0/</ali:license_ref>'
        "<license-p>Some text.</license-p></license></permissions>"
    )
    art = parse_bytes(_article("", front=front)).article
    assert art["license_code"] == "CC BY-NC"
    assert art["license_url"] == "https://creativecommons.org/licenses/by-nc/4.0/"


def test_unknown_license_keeps_url() -> None:
    front = '<permissions><license xlink:href="https://example.org/lic"><license-p>Custom.</license-p></license></permissions>'
    art = parse_bytes(_article("", front=front)).article
    assert art["license_code"] is None and art["license_url"] == "https://example.org/lic"


@pytest.mark.parametrize(
    ("attrs", "front", "source"),
    [
        ('article-type="retraction"', "", "jats-article-type"),
        ('article-type="research-article"',
         '<related-article related-article-type="retraction-forward" xlink:href="10.1/x" ext-link-type="doi"/>',
         "jats-related-article"),
        ('article-type="correction"',
         '<related-article related-article-type="retracted-article" xlink:href="10.1/x" ext-link-type="doi"/>',
         "jats-related-article"),
        ('article-type="research-article"',
         "<title-group><article-title>RETRACTED: A study of things</article-title></title-group>", "title"),
        ('article-type="research-article"',
         "<title-group><article-title>Retracted publications in biomedicine</article-title></title-group>", None),
        ('article-type="research-article"',
         '<related-article related-article-type="corrected-article" xlink:href="10.1/x"/>', None),
    ],
)
def test_retraction_signals(attrs: str, front: str, source: str | None) -> None:
    art = parse_bytes(_article("", front=front, attrs=attrs)).article
    assert art["retraction_source"] == source
    assert art["is_retracted"] is (source is not None)


def test_ids_and_versions() -> None:
    front = (
        '<article-id pub-id-type="pmcid">PMC0042</article-id><article-id pub-id-type="pmid">77</article-id>'
        '<article-id pub-id-type="doi">10.1/abc</article-id>'
    )
    art = parse_bytes(_article("", front=front)).article
    assert (art["pmcid"], art["version"], art["article_uid"], art["pmid"], art["doi"]) == (
        "PMC42", 1, "PMC42.1", "77", "10.1/abc")
    art = parse_bytes(_article("", front='<article-id pub-id-type="pmcid-ver">PMC42.3</article-id>')).article
    assert (art["pmcid"], art["version"]) == ("PMC42", 3)
    art = parse_bytes(_article("", front=front), pmcid="99", version=2).article
    assert (art["pmcid"], art["version"], art["article_uid"]) == ("PMC99", 2, "PMC99.2")


# --------------------------------------------------------------------------------------
# Safety and errors
# --------------------------------------------------------------------------------------
XXE = b"""<?xml version="1.0"?>
<!DOCTYPE article [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<article><front><article-meta><title-group><article-title>&xxe;</article-title></title-group></article-meta></front></article>"""

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<article><body><p>&lol9;</p></body></article>"""


@pytest.mark.parametrize("data", [XXE, BILLION_LAUGHS], ids=["xxe", "billion-laughs"])
def test_entity_declarations_are_refused(data: bytes) -> None:
    with pytest.raises(JatsError) as exc:
        parse_bytes(data)
    assert exc.value.reason == "xml_unsafe_dtd"
    assert "entit" in exc.value.detail


def test_entity_declaration_hidden_after_markup_in_subset_is_refused() -> None:
    # "<b" inside a comment ends the cheap pre-scan early; the post-parse check still refuses.
    data = b'<!DOCTYPE article [<!-- <b> --><!ENTITY e "boom">]><article>&e;</article>'
    with pytest.raises(JatsError) as exc:
        parse_bytes(data)
    assert exc.value.reason == "xml_unsafe_dtd"


def test_external_dtd_reference_is_fine_and_not_loaded() -> None:
    data = (b'<!DOCTYPE article PUBLIC "-//NLM//DTD JATS (Z39.96) Journal Archiving and Interchange DTD v1.0 '
            b'20120330//EN" "http://127.0.0.1:9/JATS-archivearticle1.dtd"><article><body><p>&mdash;x</p></body>'
            b"</article>")
    parsed = parse_bytes(data)
    assert parsed.article["n_figures"] == 0


@pytest.mark.parametrize(
    "system_id",
    [b"http://dtd.nlm.nih.gov/publishing/3.0/journalpublishing3.dtd", b"http://127.0.0.1:9/JATS.dtd"],
)
def test_external_http_dtd_without_entity_references_parses(system_id: bytes) -> None:
    # The DOCTYPE of every PLOS article (allofplos starter corpus); with no named entity in the
    # text, libxml2 once tried to fetch the DTD and the article was rejected as malformed.
    data = (b'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE article\n  PUBLIC "-//NLM//DTD Journal '
            b'Publishing DTD v3.0 20080202//EN" "' + system_id + b'">\n<article xml:lang="EN"><body>'
            b'<fig id="f1"><label>Figure 1</label><caption><p>(A) x. (B) y.</p></caption>'
            b'<graphic xmlns:xlink="http://www.w3.org/1999/xlink" xlink:href="f1"/></fig></body></article>')
    parsed = parse_bytes(data)
    assert parsed.article["n_figures"] == 1
    assert parsed.figures[0]["caption"] == "(A) x. (B) y."


def test_dtd_beside_the_process_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "JATS.dtd").write_text('<!ATTLIST article article-type CDATA "injected">\n')
    monkeypatch.chdir(tmp_path)
    parsed = parse_bytes(b'<!DOCTYPE article PUBLIC "x" "JATS.dtd"><article><body><p>a</p></body></article>')
    assert parsed.article["article_type"] is None


def test_undeclared_html_entities_become_characters() -> None:
    data = (b'<!DOCTYPE article PUBLIC "x" "JATS.dtd"><article><body><p>a&mdash;b <xref ref-type="fig" rid="f">'
            b"Fig&nbsp;1</xref></p></body></article>")
    m = parse_bytes(data).mentions[0]
    assert m["paragraph"] == "a\u2014b Fig 1"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"<article><body><p>unclosed</body></article>", "xml_malformed"),
        (b"<article><body>", "xml_malformed"),
        (b"not xml at all", "xml_malformed"),
        (b"", "xml_empty"),
        (b"   \n", "xml_empty"),
        (b"<html><body/></html>", "not_jats"),
    ],
)
def test_bad_input_raises_jats_error(data: bytes, reason: str) -> None:
    with pytest.raises(JatsError) as exc:
        parse_bytes(data)
    assert exc.value.reason == reason
    assert exc.value.detail


def test_size_limit(tmp_path: Path) -> None:
    data = (FIXTURES / "pone.0046493.nxml").read_bytes()
    with pytest.raises(JatsError) as exc:
        parse_bytes(data, max_bytes=1000)
    assert exc.value.reason == "xml_too_large"
    with pytest.raises(JatsError) as exc:
        parse_file(FIXTURES / "pone.0046493.nxml", max_bytes=1000)
    assert exc.value.reason == "xml_too_large"
    with pytest.raises(JatsError) as exc:
        parse_file(tmp_path / "missing.xml")
    assert exc.value.reason == "xml_unreadable"


# --------------------------------------------------------------------------------------
# parse_chunk
# --------------------------------------------------------------------------------------
def _acquired_row(uid: str, xml_path: str, media: list[dict] | None = None, **kw) -> dict:
    pmcid, version = uid.rsplit(".", 1)
    row = {
        "article_uid": uid, "pmcid": pmcid, "version": int(version), "chunk": "c0000", "source": "local",
        "source_url": None, "pmid": None, "doi": None, "citation": None, "license_code": None,
        "is_retracted": None, "xml_path": xml_path, "xml_md5": None, "media": media or [], "metadata_json": None,
    }
    row.update(kw)
    return row


def _write_acquired(path: Path, rows: list[dict]) -> None:
    pq.write_table(pa.Table.from_pylist(rows, schema=S.ACQUIRED), path)


def test_parse_chunk_round_trip(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_bytes(b"<article><body>")
    media = [
        {"name": "pone.0046493.g001.jpg", "path": "resources/m/pone.0046493.g001.jpg", "md5": "x", "size": 1},
        {"name": "pone.0046493.g001.gif", "path": "resources/m/pone.0046493.g001.gif", "md5": "y", "size": 1},
        {"name": "pone.0046493.g002.jpg", "path": "resources/m/pone.0046493.g002.jpg", "md5": "z", "size": 1},
    ]
    rows = [
        _acquired_row("PMC3460867.2", str(FIXTURES / "pone.0046493.nxml"), media, pmid="23029536"),
        _acquired_row("PMC4000001.1", str(FIXTURES / "elife02935.xml"), license_code="CC BY", is_retracted=True,
                      pmid="25271376", doi="10.7554/eLife.02935"),
        _acquired_row("PMC4000002.1", str(bad)),
        _acquired_row("PMC4000003.1", str(tmp_path / "missing.xml")),
        _acquired_row("PMC3460867.2", str(FIXTURES / "pone.0046493.nxml")),
        _acquired_row("PMC4000004.1", str(FIXTURES / "ehp-116-1694.nxml")),  # the XML says PMC2599765
    ]
    acquired = tmp_path / "acquired.parquet"
    _write_acquired(acquired, rows)
    out = tmp_path / "out"
    cfg = {"parse": {"max_xml_mb": 64, "verify_checksums": False}}  # the media md5s are fake
    record = jats.parse_chunk(jats.ParseSettings.from_config(cfg), "c0000", str(acquired), str(out))

    assert record["in"] == 6 and record["kept"] == 3
    assert record["rejected"] == {"duplicate_article": 1, "xml_malformed": 1, "xml_unreadable": 1}
    assert read_counts(out / "counts.json") == record
    assert record["extra"]["mentions"] == 10 + 56 + 6
    assert record["extra"]["pmcid_mismatch"] == 1  # counted; the ACQUIRED row's pmcid wins
    assert record["extra"]["figures"] == 4 + 19 + 3

    arts = pq.read_table(out / "articles.parquet")
    assert arts.schema.equals(S.ARTICLES)
    a = {r["article_uid"]: r for r in arts.to_pylist()}
    pone, elife = a["PMC3460867.2"], a["PMC4000001.1"]
    assert (pone["version"], pone["chunk"], pone["license_code"], pone["is_retracted"]) == (2, "c0000", "CC BY", False)
    assert (elife["pmcid"], elife["license_code"], elife["is_retracted"], elife["retraction_source"]) == (
        "PMC4000001", "CC BY", True, "metadata")
    assert elife["license_url"] == "http://creativecommons.org/publicdomain/zero/1.0/"  # from the XML
    assert elife["pmid"] == "25271376"

    figs = pq.read_table(out / "figures.parquet")
    assert figs.schema.equals(S.FIGURES)
    f = {r["figure_uid"]: r for r in figs.to_pylist()}
    assert len(f) == 4 + 19 + 3
    assert "PMC4000004.1/f1-ehp-116-1694" in f
    g1 = f["PMC3460867.2/pone-0046493-g001"]
    assert g1["graphic_paths"] == ["resources/m/pone.0046493.g001.jpg"]
    assert f["PMC3460867.2/pone-0046493-g003"]["graphic_paths"] == [None]
    assert record["extra"]["graphics_unresolved"] == 2 + 19 + 3

    ments = pq.read_table(out / "mentions.parquet")
    assert ments.schema.equals(S.MENTIONS)
    m = ments.to_pylist()
    assert m[0]["mention_uid"] == "PMC3460867.2/m0"
    assert m[0]["figure_uids"] == ["PMC3460867.2/pone-0046493-g001"]
    assert all(u in f for r in m for u in r["figure_uids"])

    rej = pq.read_table(out / "rejections.parquet").to_pylist()
    assert {(r["item_id"], r["reason"]) for r in rej} == {
        ("PMC4000002.1", "xml_malformed"), ("PMC4000003.1", "xml_unreadable"), ("PMC3460867.2", "duplicate_article")}
    assert all(r["stage"] == "parse" and r["chunk"] == "c0000" for r in rej)


def test_parse_chunk_size_limit_from_config(tmp_path: Path) -> None:
    acquired = tmp_path / "acquired.parquet"
    _write_acquired(acquired, [_acquired_row("PMC3460867.1", str(FIXTURES / "pone.0046493.nxml"))])
    record = jats.parse_chunk(jats.ParseSettings.from_section({"max_xml_mb": 0.01}), "c1", str(acquired), str(tmp_path / "o"))
    assert record["rejected"] == {"xml_too_large": 1} and record["kept"] == 0


def test_parse_chunk_empty(tmp_path: Path) -> None:
    acquired = tmp_path / "acquired.parquet"
    _write_acquired(acquired, [])
    out = tmp_path / "out"
    record = jats.parse_chunk(jats.ParseSettings.from_section({}), "c0001", str(acquired), str(out))
    assert (record["in"], record["kept"], record["rejected"]) == (0, 0, {})
    for name, schema in (("articles", S.ARTICLES), ("figures", S.FIGURES), ("mentions", S.MENTIONS),
                         ("rejections", S.REJECTIONS)):
        t = pq.read_table(out / f"{name}.parquet")
        assert t.num_rows == 0 and t.schema.equals(schema)


def test_cli_parse_chunk(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    acquired = tmp_path / "acquired.parquet"
    _write_acquired(acquired, [_acquired_row("PMC2599765.1", str(FIXTURES / "ehp-116-1694.nxml"))])
    out = tmp_path / "out"
    rc = jats.cli_parse_chunk(["--set", "parse.max_xml_mb=8", "--chunk", "c7", "--acquired", str(acquired),
                               "--out", str(out)])
    assert rc == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["kept"] == 1 and printed["chunk"] == "c7"
    assert pq.read_table(out / "figures.parquet").num_rows == 3


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------
def test_cli_prints_one_json_per_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_bytes(b"<article>")
    rc = jats.cli([str(FIXTURES / "pone.0046493.nxml"), str(bad), str(FIXTURES / "elife02935.xml")])
    captured = capsys.readouterr()
    assert rc == 1
    assert "bad.xml" in captured.err and "xml_malformed" in captured.err
    lines = [json.loads(x) for x in captured.out.splitlines()]
    assert len(lines) == 4 + 19
    first = lines[0]
    assert list(first) == ["pmcid", "figure_id", "label", "caption", "graphics", "mentions"]
    assert first["pmcid"] == "PMC3460867" and first["figure_id"] == "pone-0046493-g001"
    assert first["graphics"] == ["pone.0046493.g001"]
    assert first["mentions"] == [
        {"text": "Figure 1A", "figure_ids": ["pone-0046493-g001"], "panels": ["a"]},
        {"text": "Figure 1B", "figure_ids": ["pone-0046493-g001"], "panels": ["b"]},
    ]
    elife = [x for x in lines if x["pmcid"] is None]
    parsed = jats.parse_file(FIXTURES / "elife02935.xml")
    linker = jats._Linker(parsed.figures)
    assert sum(len(x["mentions"]) for x in elife) == sum(len(linker.targets(m["figure_ids"])) for m in parsed.mentions)
    sup = next(x for x in elife if x["figure_id"] == "fig1s5")
    assert {"text": "Figure 1—figure supplement 5A and B", "figure_ids": ["fig1s5"], "panels": ["a", "b"]} in sup[
        "mentions"]


def test_cli_all_good_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert jats.cli([str(FIXTURES / "ehp-116-1694.nxml")]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_cli_via_main_entry(capsys: pytest.CaptureFixture[str]) -> None:
    from pmcflow.cli import main

    assert main(["jats", str(FIXTURES / "PMC2775662.xml")]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
