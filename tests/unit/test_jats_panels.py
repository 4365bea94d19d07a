"""Panel-letter grammar of figure references (pmcflow.jats.panels_from_text and xref tails)."""

from __future__ import annotations

import pytest
from lxml import etree

from pmcflow import jats
from pmcflow.jats import panels_from_text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Forms named in the brief.
        ("Fig. 2B", ["b"]),
        ("Figure 2b", ["b"]),
        ("Figures 1C–E", ["c", "d", "e"]),
        ("2A,B", ["a", "b"]),
        ("2A and B", ["a", "b"]),
        ("(Figure 3A–C)", ["a", "b", "c"]),
        ("Figure 1—figure supplement 1A", ["a"]),
        ("Fig. 4 B-D", ["b", "c", "d"]),
        ("Figure 5Aii", ["a"]),
        ("2A", ["a"]),
        # Real xref texts from the fixtures (file in the comment).
        ("Figure 2C–F", ["c", "d", "e", "f"]),  # elife-02833-v2
        ("Figure 3B,C", ["b", "c"]),  # elife-02833-v2
        ("Figure 3H–K", ["h", "i", "j", "k"]),  # elife-02833-v2: range through "i"
        ("Figure1—figure supplement 1C", ["c"]),  # elife-02833-v2: no space after "Figure"
        ("Figure 1–figure supplement 2", []),  # elife-02833-v2: en dash, no panel
        ("Figure 1—figure supplement 5A and B", ["a", "b"]),  # elife02935
        ("Figure 2I–K,M–O", ["i", "j", "k", "m", "n", "o"]),  # elife05502
        ("Figure 7E–G,I,J", ["e", "f", "g", "i", "j"]),  # elife05502
        ("Figure 3C,D,H,I", ["c", "d", "h", "i"]),  # elife05502
        ("Figure 1A,B–F", ["a", "b", "c", "d", "e", "f"]),  # elife06726
        ("Figure 2—figure supplement 1A,B", ["a", "b"]),  # elife06726
        ("Appendix Figure 1B,C", ["b", "c"]),  # elife04490
        ("Figure 3A\u2013C", ["a", "b", "c"]),  # pone.0046493 (<bold>3A&#x02013;C</bold>)
        ("Figures 4 and 5C", ["c"]),  # elife00007, rid="fig4 fig5"
        ("Figure1—figure supplement 1A,2", ["a"]),  # eLife rid="fig1s1 fig1s2" (README)
        ("3B", ["b"]),  # 1471-2180-11-174: "Figure <xref>3B</xref>"
        # No panels.
        ("Figure 2", []),
        ("Fig.\u00a01", []),
        ("Figures 2 and 3", []),
        ("Figures 1–3", []),
        ("Figures 4, 7, and 8", []),
        ("Figure 10", []),
        ("Figure 2—figure supplement 1", []),
        ("Figure 2ii", []),  # roman numeral panel: not a letter
        ("Figure 3 and Table 1", []),
        ("Supplementary Figure", []),
        ("", []),
        # More real-world shapes.
        ("Figure S1A", ["a"]),
        ("Figure 2A-2C", ["a", "b", "c"]),
        ("Figure 2a–c", ["a", "b", "c"]),
        ("Figure 2(a)", ["a"]),
        ("Fig. 2 (A and B)", ["a", "b"]),
        ("Figure 2, panel C", ["c"]),
        ("Figure 2A, 3B", ["a", "b"]),
        ("Figure 2A & B", ["a", "b"]),
        ("Figure 2A/B", ["a", "b"]),
        ("Fig. 2Ai–iii", ["a"]),
        ("Figure 5A(ii)", ["a"]),
        ("Figures 2B, C, and E–G", ["b", "c", "e", "f", "g"]),
        ("Figure 2a–i", ["a", "b", "c", "d", "e", "f", "g", "h", "i"]),
        ("Figure 2D, 2E", ["d", "e"]),
        # Letters only (a separate xref naming a panel of the figure referenced before it).
        ("B", ["b"]),
        ("(C–E)", ["c", "d", "e"]),
        ("b and c", ["b", "c"]),
        ("Fig", []),
    ],
)
def test_panels_from_text(text: str, expected: list[str]) -> None:
    assert panels_from_text(text) == expected


def test_panels_are_lower_sorted_unique() -> None:
    assert panels_from_text("Figure 2C, A, C and b") == ["a", "b", "c"]


def _panels_of_xrefs(xml: str) -> list[list[str]]:
    parsed = jats.parse_bytes(
        f'<article><body><sec><title>S</title><p>{xml}</p></sec><fig id="f2"/><fig id="f3"/></body></article>'.encode()
    )
    return [m["panels"] for m in parsed.mentions]


@pytest.mark.parametrize(
    ("xml", "expected"),
    [
        # Letters glued to the xref: accepted.
        ('(<xref ref-type="fig" rid="f2">Figure 2</xref>B)', [["b"]]),
        ('see <xref ref-type="fig" rid="f2">Figure 2</xref>B.', [["b"]]),
        ('(Figs. <xref ref-type="fig" rid="f3">3</xref>a, b and <xref ref-type="fig" rid="f2">2</xref>)',
         [["a", "b"], []]),  # PMC3339583.xml
        ('(<xref ref-type="fig" rid="f2">Fig. 2</xref>A–C)', [["a", "b", "c"]]),
        # After a comma or space: only when closed by a bracket / semicolon, or 2+ letters.
        ('(<xref ref-type="fig" rid="f2">Fig. 2</xref>, C and D)', [["c", "d"]]),
        ('(<xref ref-type="fig" rid="f2">Fig. 2</xref> B)', [["b"]]),
        ('(<xref ref-type="fig" rid="f2">Fig. 2</xref>, C and D, arrows)', [["c", "d"]]),
        ('<xref ref-type="fig" rid="f2">Figure 2</xref>, a significant increase', [[]]),
        ('<xref ref-type="fig" rid="f2">Figure 2</xref> A. thaliana plants', [[]]),
        ('<xref ref-type="fig" rid="f2">Figure 2</xref>, B cells were', [[]]),
        ('(<xref ref-type="fig" rid="f2">Figure 2</xref>, i.e. all)', [[]]),
        ('in <xref ref-type="fig" rid="f2">Figure 2</xref> and <xref ref-type="fig" rid="f3">3</xref>', [[], []]),
        ('<xref ref-type="fig" rid="f2">Figure 2</xref>and more', [[]]),
        # Continuing a list that the xref started.
        ('(<xref ref-type="fig" rid="f2">Figure 2A</xref>, B)', [["a", "b"]]),
        ('(<xref ref-type="fig" rid="f2">Figure 2A</xref> and B)', [["a", "b"]]),
        ('(<xref ref-type="fig" rid="f2">Figure 2A</xref>–C)', [["a", "b", "c"]]),
        ('<xref ref-type="fig" rid="f2">Figure 2A</xref>, B cells', [["a"]]),
        ('(<xref ref-type="fig" rid="f2">Figure 2A</xref>, <xref ref-type="fig" rid="f3">Figure 3B</xref>)',
         [["a"], ["b"]]),
        # Separate xrefs for panels.
        ('(Figure <xref ref-type="fig" rid="f2">2A</xref> and <xref ref-type="fig" rid="f2">B</xref>)',
         [["a"], ["b"]]),
        # Nested markup inside the xref.
        ('(<xref ref-type="fig" rid="f2">Figure <bold>3A&#x02013;C</bold></xref>)', [["a", "b", "c"]]),
        ('(<xref ref-type="fig" rid="f2"><italic>Figure 2</italic></xref><italic>:</italic>)', [[]]),
    ],
)
def test_xref_tail_panels(xml: str, expected: list[list[str]]) -> None:
    assert _panels_of_xrefs(xml) == expected


def test_fixture_tail_panels_pmc3339583(fixture_dir) -> None:
    parsed = jats.parse_file(fixture_dir / "PMC3339583.xml")
    fig3 = [m for m in parsed.mentions if m["figure_ids"] == ["Fig3"]]
    assert fig3[0]["text"] == "3"
    assert fig3[0]["panels"] == ["a", "b"]
    assert "(Figs. 3a, b and 4)" in fig3[0]["paragraph"]


@pytest.fixture()
def fixture_dir(repo_root):
    return repo_root / "tests" / "fixtures" / "jats"


def test_every_panel_xref_in_fixtures_gets_its_letter(fixture_dir) -> None:
    """An xref whose own text ends in '<digit><Letter>' must always yield that letter."""
    import re

    for path in sorted(fixture_dir.glob("*.*xml")):
        parsed = jats.parse_file(path)
        for m in parsed.mentions:
            hit = re.search(r"\d([A-Za-z])$", m["text"])
            if hit:
                assert hit.group(1).lower() in m["panels"], (path.name, m["text"], m["panels"])


def test_xref_panels_internal_shape() -> None:
    el = etree.fromstring(b'<p>(<xref ref-type="fig" rid="f">Fig. 2</xref>, C and D)</p>')
    xref = el[0]
    inside, tail = jats._xref_panels(jats.text_of(xref), xref.tail, True)
    assert inside == [] and tail == ["c", "d"]
