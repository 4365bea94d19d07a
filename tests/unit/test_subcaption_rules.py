"""Rule splitter: label styles, things that must not split, bad input."""

from __future__ import annotations

import pytest

from pmcflow.enrich.rules import (
    Segment,
    assign,
    assign_detailed,
    lead_segments,
    panel_segments,
    shared_text,
    split_caption,
)


def labelled(caption: str, title: str | None = None) -> list[tuple[list[str], str]]:
    return [(s.labels, s.text) for s in split_caption(caption, title) if s.labels]


def split_verbatim(caption: str) -> list[Segment]:
    """``split_caption(caption)``, checked to join back to the caption (nothing dropped or added)."""
    segments = split_caption(caption)
    assert " ".join(s.text for s in segments) == caption, segments
    return segments


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        (
            "Title. (A) Western blot. (B) Quantification.",
            [(["a"], "(A) Western blot."), (["b"], "(B) Quantification.")],
        ),
        (
            "Title. A, Schematic of the assay. B, Western blot. C, quantification of B.",
            [
                (["a"], "A, Schematic of the assay."),
                (["b"], "B, Western blot."),
                (["c"], "C, quantification of B."),
            ],
        ),
        (
            "Title. A. Confocal images. B. Growth of E. coli cells. C. Summary.",
            [(["a"], "A. Confocal images."), (["b"], "B. Growth of E. coli cells."), (["c"], "C. Summary.")],
        ),
        (
            "Title. a–c Confocal images of organoids. d Quantification of a–c.",
            [(["a", "b", "c"], "a–c Confocal images of organoids."), (["d"], "d Quantification of a–c.")],
        ),
        (
            "Title. (A–C) Images of cells. (D) Quantification.",
            [(["a", "b", "c"], "(A–C) Images of cells."), (["d"], "(D) Quantification.")],
        ),
        (
            "Title. (A and B) Survival curves. (C, E) Histology. (F) Summary.",
            [
                (["a", "b"], "(A and B) Survival curves."),
                (["c", "e"], "(C, E) Histology."),
                (["f"], "(F) Summary."),
            ],
        ),
        (
            "Title. A) Control. B) Treated. C) Merged.",
            [(["a"], "A) Control."), (["b"], "B) Treated."), (["c"], "C) Merged.")],
        ),
        (
            "Title. E. and F. Co-immunoprecipitation of LAG3. G. Quantification.",
            [(["e", "f"], "E. and F. Co-immunoprecipitation of LAG3."), (["g"], "G. Quantification.")],
        ),
        (
            "Title. 1. First panel. 2. Second panel. 3. Third panel.",
            [(["1"], "1. First panel."), (["2"], "2. Second panel."), (["3"], "3. Third panel.")],
        ),
        (
            "Title. Left panel: H&E staining. Right panel: IHC for CD3.",
            [(["left"], "Left panel: H&E staining."), (["right"], "Right panel: IHC for CD3.")],
        ),
    ],
)
def test_label_styles(caption: str, expected: list[tuple[list[str], str]]) -> None:
    assert labelled(caption) == expected


def test_inline_trailing_labels_make_one_joint_segment() -> None:
    segs = split_caption(
        "MRI of the brain. Axial (A) and coronal (B) T2 images show a lesion. (C) Histology."
    )
    assert segs[0] == Segment([], "MRI of the brain.")
    assert segs[1] == Segment(["a", "b"], "Axial (A) and coronal (B) T2 images show a lesion.")
    assert segs[2] == Segment(["c"], "(C) Histology.")


def test_leading_labels_in_one_sentence_split_at_each_marker() -> None:
    # the label-wise convention of the PMC development set (human annotation): one segment per
    # labelled clause, split at the marker, even inside one sentence
    segs = labelled("Title. (A) IgG and (B) IgM responses in plasma. (C) Neutralisation.")
    assert segs[:2] == [(["a"], "(A) IgG and"), (["b"], "(B) IgM responses in plasma.")]


def test_clause_level_label_without_conjunction_splits() -> None:
    segs = labelled(
        "Fig. (A) ATP synthesis. (B) Intracellular lactate (C) external acidification. (D) Calcium."
    )
    assert (["b"], "(B) Intracellular lactate") in segs
    assert (["c"], "(C) external acidification.") in segs


def test_roman_numerals() -> None:
    # the caption's first two labels, each before its phrase and joined by "and", open a clause each
    # ("Cells" is the lead); with a verb after them they are one description ("… were counted")
    assert labelled("Cells (i) untreated and (ii) treated. (iii) Quantification.") == [
        (["i"], "(i) untreated and"),
        (["ii"], "(ii) treated."),
        (["iii"], "(iii) Quantification."),
    ]
    assert labelled("Cells (i) untreated and (ii) treated were counted. (iii) Quantification.")[0] == (
        ["i", "ii"],
        "Cells (i) untreated and (ii) treated were counted.",
    )


def test_roman_subitems_inside_letter_panels_do_not_win() -> None:
    caption = (
        "Viability. (A) Cells were treated; (i) PANC-1 with drug; (ii) NHF with drug; (iii) PANC-1 with "
        "vehicle (B) Trypan blue assay of Jurkat cells."
    )
    segs = labelled(caption)
    assert [s[0] for s in segs] == [["a"], ["b"]]
    assert "(iii) PANC-1" in segs[0][1]


@pytest.mark.parametrize(
    "caption",
    [
        "Expression of IL-6 in mice (n = 3) and rats (p < 0.05) shown in (Figure 2A) as fold change (a.u.).",
        "Cytokine levels (pg/ml) were measured at 4 °C (mean ± SD; n = 5) in IL-6 and TNF-α knockout mice.",
        "A Western blot of p53. B cells were isolated from spleens.",  # article "A", "B cells"
        "Adenosine (A) levels were measured.",  # a lone inline letter is an abbreviation
    ],
)
def test_does_not_split_non_labels(caption: str) -> None:
    segs = split_caption(caption)
    assert len(segs) == 1 and segs[0].labels == []


def test_cross_references_inside_panels_stay_inside() -> None:
    segs = labelled(
        "Title. (A) Control cells. (B) Same as in (A) but treated (n = 4). (C) Quantification of (B)."
    )
    assert [s[0] for s in segs] == [["a"], ["b"], ["c"]]
    assert segs[1][1] == "(B) Same as in (A) but treated (n = 4)."


def test_lead_text_is_kept_as_unlabelled_first_segment() -> None:
    segs = split_caption("TFEB clears lysosomes. Shared lead text here. A. Images. B. Counts.")
    assert segs[0] == Segment([], "TFEB clears lysosomes. Shared lead text here.")
    assert lead_segments(segs) == ["TFEB clears lysosomes. Shared lead text here."]


def test_title_is_separated_from_unlabelled_pre_label_text() -> None:
    segs = split_caption("Fig. A. Brain homogenates. B. Cultures.", title="Fig.")
    assert segs == [
        Segment([], "Fig."),
        Segment(["a"], "A. Brain homogenates."),
        Segment(["b"], "B. Cultures."),
    ]


def test_no_labels_gives_one_unlabelled_segment() -> None:
    assert split_caption("Representative H&E section of the liver.") == [
        Segment([], "Representative H&E section of the liver.")
    ]


def test_labels_without_text_join_the_next_segment() -> None:
    segs = labelled("Title. (A) (B) Western blots of X. (C) Quantification.")
    assert segs[0] == (["a", "b"], "(A) (B) Western blots of X.")


def test_trailing_label_without_text_joins_previous() -> None:
    segs = labelled("Title. (A) First panel. (B) Second panel. (C)")
    assert segs[-1][0] == ["b", "c"]


def test_unbalanced_parentheses() -> None:
    segs = labelled("Title. (A Conceptual model of the pathway. (B) Simulations (n = 300. (C) Data.")
    assert [s[0] for s in segs] == [["a"], ["b"], ["c"]]
    assert split_caption("Foo (A) bar (B") == [Segment([], "Foo (A) bar (B")]


def test_non_latin_text() -> None:
    segs = split_caption("免疫组化染色。(A) 对照组。(B) 治疗组。")
    assert [s.labels for s in segs] == [[], ["a"], ["b"]]
    assert split_caption("Иммуногистохимия печени (n = 4).") == [
        Segment([], "Иммуногистохимия печени (n = 4).")
    ]


def test_empty_and_whitespace() -> None:
    assert split_caption("") == []
    assert split_caption("  \n\t ") == []


def test_segments_are_verbatim_substrings_of_normalised_caption() -> None:
    caption = "Title.\n(A)  Foo\tbar.  (B) Baz (p < 0.05)."
    norm = " ".join(caption.split())
    for s in split_caption(caption):
        assert s.text in norm


def test_very_long_caption_completes_and_keeps_everything() -> None:
    # ~7,000 tokens with many label-like and parenthesised tokens (regex backtracking bait);
    # the timing itself is measured in benchmarks/bench_enrich.py.
    unit = "(A) Cells (n = 3) in (B and C) were (p < 0.05) A. B, C) IL-6 (a.u.) (((( "
    caption = "Title. " + unit * 500 + "(D) End."
    segs = split_caption(caption)
    assert segs
    assert sum(len(s.text.split()) for s in segs) == len(caption.split())


def test_assign_maps_letters_and_falls_back_to_full_caption() -> None:
    caption = "Title. (A) Foo. (B–C) Bar."
    segs = split_caption(caption)
    assert assign(segs, ["a", "c", "B"]) == {"a": "(A) Foo.", "c": "(B–C) Bar.", "b": "(B–C) Bar."}
    d = assign_detailed(segs, ["d"], caption=caption)
    assert d["d"].text == caption and d["d"].source == "fallback-full" and d["d"].reason == "label_not_found"
    assert d["d"].shared_text == ""
    assert assign_detailed(segs, ["a"], caption=caption)["a"].shared_text == "Title."


def test_assign_by_ordinal_for_roman_or_position_labels() -> None:
    segs = split_caption("Title. Left panel: H&E. Right panel: IHC.")
    assert assign(segs, ["a", "b", "c"]) == {
        "a": "Left panel: H&E.",
        "b": "Right panel: IHC.",
        "c": "Title. Left panel: H&E. Right panel: IHC.",
    }


def test_assign_no_labels() -> None:
    segs = split_caption("Just one description.")
    d = assign_detailed(segs, ["a"])
    assert d["a"].source == "fallback-full" and d["a"].reason == "no_labels"


# ---------------------------------------------------------------------------------------------
# Patterns from real PMC captions that the splitter once missed (issue: subcaptions on real
# captions). One case per pattern; each names what must come out.
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        pytest.param(
            "Liver anatomy. A segments IX–X, lateral view. B segments II–III, medial view.",
            [(["a"], "A segments IX–X, lateral view."), (["b"], "B segments II–III, medial view.")],
            id="bare-upper-before-lowercase-word",
        ),
        pytest.param(
            "Embryos. a Top views at stage 10. b corresponding side views. c Quantification of length.",
            [
                (["a"], "a Top views at stage 10."),
                (["b"], "b corresponding side views."),
                (["c"], "c Quantification of length."),
            ],
            id="bare-lower-before-lowercase-word",
        ),
        pytest.param(
            "Effect of X. A Western blot of lysates. B Quantification of bands (n = 3).",
            [(["a"], "A Western blot of lysates."), (["b"], "B Quantification of bands (n = 3).")],
            id="two-bare-upper-letters",
        ),
        pytest.param(
            # Nature-family grid captions: a bare list names a row and a column of panels at once
            "Ocean section. a–c Control. d–f Anomalies. a, d Salinity. b, e Temperature. c, f Density (σ0).",
            [
                (["a", "b", "c"], "a–c Control."),
                (["d", "e", "f"], "d–f Anomalies."),
                (["a", "d"], "a, d Salinity."),
                (["b", "e"], "b, e Temperature."),
                (["c", "f"], "c, f Density (σ0)."),
            ],
            id="bare-lists-of-grid-panels",
        ),
        pytest.param(
            "Records. a Climate to 400 kyr. b Climate to 800 kyr. c, j Ice-rafted debris. d, k Benthic δ13C. "
            "e, l Sea level.",
            [
                (["a"], "a Climate to 400 kyr."),
                (["b"], "b Climate to 800 kyr."),
                (["c", "j"], "c, j Ice-rafted debris."),
                (["d", "k"], "d, k Benthic δ13C."),
                (["e", "l"], "e, l Sea level."),
            ],
            id="bare-lists-interleaved",
        ),
        pytest.param(
            "Water masses. a Probability map. b Same as a for inflows. c Temperature (°C), d absolute "
            "salinity (g kg−1), and e age (days). The medium term (until 2300).",
            [
                (["a"], "a Probability map."),
                (["b"], "b Same as a for inflows."),
                (["c"], "c Temperature (°C),"),
                (["d"], "d absolute salinity (g kg−1), and"),
                (["e"], "e age (days). The medium term (until 2300)."),
            ],
            id="bare-lower-letters-listed-in-a-sentence",
        ),
        pytest.param(
            "Lagrangian trajectories. a Randomly selected trajectories following Arctic outflow and b Atlantic "
            "inflow. The pathways are marked with different colors.",
            [
                (["a"], "a Randomly selected trajectories following Arctic outflow and"),
                (["b"], "b Atlantic inflow. The pathways are marked with different colors."),
            ],
            id="lone-bare-a-opening-a-sentence-with-listed-b",
        ),
        pytest.param(
            "As Fig. 2, but for JJA. b, c, d Spatial patterns of 200 hPa zonal wind, precipitation, and 700 hPa "
            "zonal wind in JJA.",
            [(["b", "c", "d"], "b, c, d Spatial patterns of 200 hPa zonal wind, precipitation, and 700 hPa zonal wind in JJA.")],
            id="lone-bare-list-of-panels",
        ),
        pytest.param(
            "Plateau warming. a–h Decomposition of a temperature difference into processes due to b surface "
            "albedo, c water vapor, and d cloud.",
            [
                (
                    ["a", "b", "c", "d", "e", "f", "g", "h"],
                    "a–h Decomposition of a temperature difference into processes due to b surface albedo, c water "
                    "vapor, and d cloud.",
                )
            ],
            id="lone-bare-range-of-panels",
        ),
        pytest.param(
            "In panels (A) through (D), the strength of the AMOC is shown before and after collapse. In panels "
            "(E) through (H) the surface temperature is shown at the same points.",
            [
                (["a", "b", "c", "d"], "In panels (A) through (D), the strength of the AMOC is shown before and after collapse."),
                (["e", "f", "g", "h"], "In panels (E) through (H) the surface temperature is shown at the same points."),
            ],
            id="bracketed-range-with-through",
        ),
        pytest.param(
            "Records. a Climate to 400 kyr. b Climate to 800 kyr. c, f Ice-rafted debris. d, g SST at Site "
            "U1542 (this study). e Mg/Ca-derived SST from the Southwest Pacific.",
            [
                (["a"], "a Climate to 400 kyr."),
                (["b"], "b Climate to 800 kyr."),
                (["c", "f"], "c, f Ice-rafted debris."),
                (["d", "g"], "d, g SST at Site U1542 (this study)."),
                (["e"], "e Mg/Ca-derived SST from the Southwest Pacific."),
            ],
            id="grid-row-panel-between-rows-and-columns",
        ),
        pytest.param(
            "Venn diagram. (a) A network. (b) Intersections: a is the families in A, c is the families in C.",
            [(["a"], "(a) A network."), (["b"], "(b) Intersections: a is the families in A, c is the families in C.")],
            id="listed-letter-that-is-a-variable",
        ),
        pytest.param(
            "Braincase slices. A, slice YZ 386; B, slice YZ 637; C, as B, but through the pillar.",
            [(["a"], "A, slice YZ 386;"), (["b"], "B, slice YZ 637;"), (["c"], "C, as B, but through the pillar.")],
            id="comma-label-before-a-word-list",
        ),
        pytest.param(
            "Cell growth. (a.) Control cells. (b.) Treated cells.",
            [(["a"], "(a.) Control cells."), (["b"], "(b.) Treated cells.")],
            id="dotted-in-brackets",
        ),
        pytest.param(
            "Histology. A1 Low magnification. A2 High magnification. B Quantification of area.",
            [(["a"], "A1 Low magnification. A2 High magnification."), (["b"], "B Quantification of area.")],
            id="sub-labels-bare",
        ),
        pytest.param(
            "Histology. (A1) Low magnification; (A2) high magnification. (B) Quantification.",
            [(["a"], "(A1) Low magnification; (A2) high magnification."), (["b"], "(B) Quantification.")],
            id="sub-labels-in-brackets",
        ),
        pytest.param(
            "Cortex. (a) Overview of the brain. (b1–b4) Serial sections of the cortex. (c) Counts.",
            [
                (["a"], "(a) Overview of the brain."),
                (["b"], "(b1–b4) Serial sections of the cortex."),
                (["c"], "(c) Counts."),
            ],
            id="sub-label-range",
        ),
        pytest.param(
            "Staining. A,C Wild-type mice. B,D Knockout mice.",
            [(["a", "c"], "A,C Wild-type mice."), (["b", "d"], "B,D Knockout mice.")],
            id="interleaved-label-lists",
        ),
        pytest.param(
            "Skull in dorsal (A), ventral (B) and lateral (C) views. Scale bar 1 cm.",
            [(["a", "b", "c"], "Skull in dorsal (A), ventral (B) and lateral (C) views. Scale bar 1 cm.")],
            id="labels-after-the-phrase",
        ),
        pytest.param(
            "Cells were treated with drug (1 mg/ml) for 2 h. (A) Control. (B) Treated (2–4 days).",
            [(["a"], "(A) Control."), (["b"], "(B) Treated (2–4 days).")],
            id="numbers-are-not-labels",
        ),
    ],
)
def test_real_caption_patterns(caption: str, expected: list[tuple[list[str], str]]) -> None:
    assert labelled(caption) == expected


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        # PLOS ONE 10.1371/journal.pone.0087236 (CC BY), figures 2, 14 and 47: "A, x; and B, y"
        (
            "Three-dimensional digital reconstruction of skeleton of Beelzebufo ampinga. A, dorsal view; and "
            "B, right lateral view (with left limbs removed for visual clarity). See Figure 1 for sources.",
            [
                (["a"], "A, dorsal view; and"),
                (["b"], "B, right lateral view (with left limbs removed for visual clarity). See Figure 1 for sources."),
            ],
        ),
        (
            "Maxilla. A, labial; and B, lingual views of left maxilla, FMNH PR 2510. C, labial; and D, lingual "
            "views of right maxilla, UA 9635. E, labial; F, lingual; and G, dorsolingual views of right maxilla.",
            [
                (["a"], "A, labial; and"),
                (["b"], "B, lingual views of left maxilla, FMNH PR 2510."),
                (["c"], "C, labial; and"),
                (["d"], "D, lingual views of right maxilla, UA 9635."),
                (["e"], "E, labial;"),
                (["f"], "F, lingual; and"),
                (["g"], "G, dorsolingual views of right maxilla."),
            ],
        ),
        (
            "Skull of Beelzebufo. (A) Dorsal view; and (B) ventral view. (C) Lateral view.",
            [(["a"], "(A) Dorsal view; and"), (["b"], "(B) ventral view."), (["c"], "(C) Lateral view.")],
        ),
        # Nutrients 10.3390/nu10101503 figure 8 (CC BY): a comma after the conjunction
        (
            "Kinetic analysis of the inhibitory activity against α-amylase from porcine pancreas. (A) Wheat "
            "α-AI; and, (B) Buckwheat α-AI.",
            [(["a"], "(A) Wheat α-AI; and,"), (["b"], "(B) Buckwheat α-AI.")],
        ),
    ],
)
def test_a_conjunction_after_a_semicolon_opens_the_next_panel(
    caption: str, expected: list[tuple[list[str], str]]
) -> None:
    assert labelled(caption) == expected


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        # PLOS ONE 10.1371/journal.pone.0078921 figure 6 (CC BY): dotted labels listed after commas
        (
            "PCA for classification of control and asthma groups. A. Total % variance plot, B. Loadings of "
            "factor 1, C. Loadings of factor 2, D. Loadings of factor 3, E. 3D scatter plot.",
            [
                (["a"], "A. Total % variance plot,"),
                (["b"], "B. Loadings of factor 1,"),
                (["c"], "C. Loadings of factor 2,"),
                (["d"], "D. Loadings of factor 3,"),
                (["e"], "E. 3D scatter plot."),
            ],
        ),
        # PLOS ONE 10.1371/journal.pone.0118238 figure 8 (CC BY): a colon label before a lower-case word
        (
            "Parameter regime for a source-driven system with c = 1 and β = 0.1. A: the region in green "
            "corresponds to pairs leading to flux that increase along the vein. B: the region in gray "
            "corresponds to the reverse case.",
            [
                (["a"], "A: the region in green corresponds to pairs leading to flux that increase along the vein."),
                (["b"], "B: the region in gray corresponds to the reverse case."),
            ],
        ),
    ],
)
def test_listed_and_colon_markers(caption: str, expected: list[tuple[list[str], str]]) -> None:
    assert labelled(caption) == expected


def test_bracketed_ranges_and_a_label_after_an_abbreviation() -> None:
    # PLOS ONE 10.1371/journal.pone.0117949 figure 1 (CC BY), shortened: "(a)–(d)" is a to d
    caption = (
        "Comparison of exact and numerical solutions. Results in (a)–(d) correspond to D = 1, results in "
        "(e)–(h) correspond to D = 2, and results in (i)–(l) correspond to D = 3."
    )
    found = sorted({lab for s in split_caption(caption) for lab in s.labels})
    assert found == list("abcdefghijkl")
    # PLOS Comput Biol 10.1371/journal.pcbi.1004453 figure 1 (CC BY), shortened: "Fig. C." fills the gap
    caption = (
        "Radial patterns. A. Combined reporter expression. B. Representative image, shown in S1A Fig. "
        "C. Motion patterns follow the expected radial angle. D. Distributions of angular alignment."
    )
    assert [s.labels for s in split_caption(caption) if s.labels] == [["a"], ["b"], ["c"], ["d"]]
    # a range beside its own first label: "Panels (B)–(F) …" may still read as "(B)"
    assert labelled("Spectra. (A) NaCl. (B)–(F) KCl at five doses.") == [
        (["a"], "(A) NaCl."), (["b", "c", "d", "e", "f"], "(B)–(F) KCl at five doses.")
    ]


def test_panels_named_with_the_word_panel() -> None:
    # PLOS ONE 10.1371/journal.pone.0055490 figure 2 (CC BY), shortened
    caption = (
        "TMEM154 SNP maps and median-joining networks. Panel A, genomic map of TMEM154: orange arrows, "
        "untranslated regions. Panel B, high resolution map of TMEM154 regions. Panel C, median-joining "
        "network of haplotypes."
    )
    assert labelled(caption) == [
        (["a"], "Panel A, genomic map of TMEM154: orange arrows, untranslated regions."),
        (["b"], "Panel B, high resolution map of TMEM154 regions."),
        (["c"], "Panel C, median-joining network of haplotypes."),
    ]
    assert [s.labels for s in split_caption("Symptom changes. In panels A–J, scores are shown per patient.")] == [
        [], ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]
    ]
    # in a caption with label markers, such a sentence is a note inside the panel it follows
    caption = "Profiles. (A) ChIP-seq profiles. (B) CTCF sites. Panels A and B, unsorted nuclei."
    assert labelled(caption) == [(["a"], "(A) ChIP-seq profiles."), (["b"], "(B) CTCF sites. Panels A and B, unsorted nuclei.")]
    # "Panels B, G, and I were …" is no "Panels B, G," marker
    assert labelled("Preparation. Panels B, G, and I were prepared from unsorted nuclei.") == []


@pytest.mark.parametrize(
    "caption",
    [
        # a numbered scale from 0 (PLOS ONE 10.1371/journal.pone.0026358 figure 3, CC BY)
        "CFS symptom changes. The scales on Y-axes were 0–6 (0: Major worsening; 1: Moderate worsening; "
        "2: Slight worsening; 3: No change; 4: Slight improvement).",
        "Growth of strains. Cultures of E. coli, B. subtilis, S. aureus were grown overnight.",
        "Scoring. 0) no staining, 1) weak staining, 2) strong staining.",
    ],
)
def test_scales_and_species_lists_are_not_labels(caption: str) -> None:
    assert labelled(caption) == []


@pytest.mark.parametrize(
    "caption",
    [
        # "and" after a comma, or a name after "; and": no panel marker
        "Mice were fed a control diet, and B, the treated group, a high-fat diet.",
        "Lymphocytes were sorted; and B cells were counted by flow cytometry.",
        "Phylogenetic tree of isolates. Bootstrap values (1000 replicates). Segments IX–X are shown.",
        "Overview of the cohort. A total of 120 patients were included. B cells were not counted.",
        "Kinetics of uptake (2–4 h) at 37 °C in medium (1 mg/ml).",
        # letters the caption calls letters: significance groups and names of places in the image
        # (MDPI Molecules 10.3390/molecules26133814 figure 1, PLOS ONE 10.1371/journal.pone.0070598
        # figure 2, both CC BY)
        "Dry matter content (%) of nine species. Different letters (a–c) indicate significant differences "
        "between means at p ≤ 0.0001.",
        "Residence time of Mälaren. Lake basins are identified by letters (A–F), with lake sites (white diamonds).",
        # eLife 10.7554/eLife.04490 figure 13 (CC BY)
        "Transcript levels. a,b Different letters indicate significant differences (p < 0.01) in Tukey HSD tests.",
        # after a colon a sentence may go on with the article "a" before a name
        "Vector design. Schematic: a Cre-dependent AAV vector was injected into the striatum.",
    ],
)
def test_things_that_are_not_labels(caption: str) -> None:
    assert labelled(caption) == []


def test_a_caption_that_lost_markers_has_its_labelled_segments_cut_too() -> None:
    # EMBO Mol Med 10.15252/emmm.202012834 figure 5 (CC BY 4.0) as SourceData extracted it: the
    # single-letter markers were lost, the ranges "B-C" and "G-H" kept. The first label is B, so the
    # text lost markers: the B-C segment is cut where the panel-boundary model sees a new panel.
    caption = (
        "CD69 expression in CD3+ T cells upon stimulation with P/I for 12 h. B-C PBMC cells with shNC, shNF45 "
        "or shNF90 lentivirus infection were stimulated with P/I for 12h, then the freshly replaced medium "
        "without P/I after another 24 h culture was harvested for IL-2 and IFN-γ detections by ELISA.(n=3) The "
        "proliferation of shNC, shNF45 or shNF90-infected PBMCs was monitored using a CCK-8 assay. (n = 3) "
        "Confocal images to show the subcellular localization of NFATc2 in CD3+ T cells treated with P/I and "
        "FK506 or CX5461. Scale bar, 10 μm."
    )
    segments = split_verbatim(caption)
    bc = [s for s in segments if s.labels == ["b", "c"]]
    assert len(bc) == 1 and bc[0].text.startswith("B-C PBMC cells") and "Confocal" not in bc[0].text
    assert any(not s.labels and s.text.startswith("Confocal images") for s in segments)


def test_two_sentence_opening_ranges_make_a_chain_across_lost_letters() -> None:
    # The same legend further on: "B-C …" and "G-H …" both open a sentence, each a range before a
    # capitalised word. Two single bare capitals count only as "A … B …" ("A Western blot … B-cell
    # counts"), but two ranges are markers however many letters lie between them.
    caption = (
        "CD69 expression in CD3+ T cells upon stimulation with P/I for 12 h. B-C PBMC cells with shNC, "
        "shNF45 or shNF90 lentivirus infection were stimulated with P/I for 12h. (n = 3) Flow cytometry "
        "analysis of CD69 expression in P/I-stimulated CD3+ T cells treated with or without FK506 or "
        "CX5461. G-H ELISA assays of IL-2 and IFN-γ in CD3+ T cells with the indicated treatments. (n = 3)"
    )
    segments = split_verbatim(caption)
    gh = [s for s in segments if s.labels == ["g", "h"]]
    assert len(gh) == 1 and gh[0].text.startswith("G-H ELISA assays"), segments
    assert [s.labels for s in segments if s.labels][:1] == [["b", "c"]]


def test_letters_named_after_their_phrase_say_how_many_panels_a_segment_lost() -> None:
    # EMBO Mol Med 10.15252/emmm.202013548 figure 1 (CC BY 4.0) as SourceData extracted it: "I." and
    # "K." were lost, "(J)" and "(L)" follow their phrases. The H segment holds four more panels, so
    # its four most likely sentence boundaries are cut, although the model is sure of only two.
    caption = (
        "F. Triglyceride content in liver of Pkd2wt/wt and Pkd2ki/ki male mice in panel A. Relative to "
        "Pkd2wt/wt. G. Glucose tolerance test of the specified genotypes after 16 weeks in HFD. H. Insulin "
        "tolerance test of Pkd2wt/wt and Pkd2ki/ki male mice after 18 weeks in HFD. Triglycerides in "
        "circulation of specified mice after 18 weeks in HFD. free fatty acids (J) in circulation of "
        "specified mice after 18 weeks in HFD. Energy expenditure of mice after 20 weeks in HFD. energy "
        "intake (L) of mice after 20 weeks in HFD."
    )
    segments = split_verbatim(caption)
    h = next(k for k, s in enumerate(segments) if s.labels == ["h"])
    assert segments[h].text.endswith("18 weeks in HFD.") and "Triglycerides" not in segments[h].text
    assert [s.text.split(" ")[0] for s in segments[h + 1 :]] == ["Triglycerides", "free", "Energy", "energy"]
    assert all(not s.labels for s in segments[h + 1 :])
    # the pieces stand for I to L in order, so each of those subfigures gets its own
    got = assign_detailed(segments, "ijkl", caption=caption)
    assert [(a.reason, a.text.split(" ")[0]) for a in got.values()] == [
        ("gap", "Triglycerides"),
        ("gap", "free"),
        ("gap", "Energy"),
        ("gap", "energy"),
    ]


@pytest.mark.parametrize(
    "caption",
    [
        # eLife 10.7554/eLife.04493 figure 3 (CC BY, in the demo corpus): "(v)" and "(d)" abbreviate
        # ventral and dorsal after the capital labels (A) and (B)
        "Dorsal (A) and transverse (B) view of the adult VNS showing a MARCM clone for the T2 lineage 1. The "
        "1B siblings have been pulled anteriorly into T1 where they branch through the ipsilateral leg "
        "neuropil. The 1A siblings are projection neurons with ventral (v) arbor in both the ipsi- and "
        "contralateral leg neuropils and bilateral dorsal (d) arbors that extend into the dorsal, tectulum "
        "neuropil. *: arbor from another lineage. DOI: http://dx.doi.org/10.7554/eLife.04493.009",
        # eLife 10.7554/eLife.06726 figure 3 (CC BY, in the demo corpus): K and L are listed with the
        # segment's own letters, panels the legend describes together, not panels it lost
        "( A – J ) Vegfa signaling was impaired using either ligand MOs ( vegfaa/vegfab MO), chemical "
        "inhibition of Vegfr2 signaling. Confocal projections of Tg(fli1a:EGFP) y1 embryos in dorsal views "
        "at 17 hpf ( A , B , C , G , H , I ), 24 hpf ( F , J , K , L ) and 28 hpf ( D , E ). Control embryos "
        "showed sprouting of the intersegmental vessels ( D , F , K ). DOI: http://dx.doi.org/10.7554/eLife.06726.005",
    ],
)
def test_letters_that_name_no_lost_panel_cut_nothing(caption: str) -> None:
    segments = [s for s in split_caption(caption) if s.text]
    last = max(k for k, s in enumerate(segments) if s.labels)
    assert segments[last].text.endswith(caption[-20:]), segments


def test_a_comma_label_does_not_split_a_bracketed_list() -> None:
    # "(…; d, h)" lists panels d and h; "d," is no marker of its own before "h)"
    caption = (
        "Water properties. A section of salinity (psu; a, e), potential temperature (°C; b, f), potential "
        "density (kg m−3; c, g) and zonal velocity (m s−1; d, h). a–d Control simulation. e–h Anomalies."
    )
    with_d = [s.labels for s in split_caption(caption) if "d" in s.labels]
    assert with_d and all("h" in labels for labels in with_d[:1])


def test_a_list_closing_a_bracket_opens_no_segment() -> None:
    # "(c, h–j)": "h–j)" is the end of the bracket, not a marker listed after a comma
    caption = (
        "Sea level pressure. a, b, d–g Pressure anomalies per decade. The contours in (c, h–j) indicate the "
        "total AMOC."
    )
    segments = split_caption(caption)
    assert not any(s.text.startswith("h–j)") for s in segments)
    assert segments[1].labels[:6] == ["a", "b", "d", "e", "f", "g"]


def test_shared_text_is_kept_apart_from_panel_text() -> None:
    caption = "TFEB clears lysosomes. Shared lead text here. A. Images. B. Counts."
    segs = split_caption(caption)
    assert shared_text(segs) == "TFEB clears lysosomes. Shared lead text here."
    assert [s.text for s in panel_segments(segs)] == ["A. Images.", "B. Counts."]
    # no labels: the body is the one panel segment; a known title is the shared text
    segs = split_caption("Fig. Representative section.", title="Fig.")
    assert shared_text(segs) == "Fig." and panel_segments(segs) == [Segment([], "Representative section.")]
    assert shared_text(split_caption("Representative section.")) == ""


def test_rules_backend_records_why_it_fell_back_and_the_shared_text() -> None:
    from pmcflow.enrich.subcaption import RulesSubcaptioner, SubcaptionRequest

    labelled_caption = "Lead for all panels. (A) Blot. (B) Chart."
    res = RulesSubcaptioner().extract(
        [
            SubcaptionRequest("s0", labelled_caption, "b"),
            SubcaptionRequest("s1", labelled_caption, None),  # alignment gave no letter
            SubcaptionRequest("s2", "One description of every panel.", None),  # caption names none
            SubcaptionRequest("s3", labelled_caption, "c"),
        ]
    )
    assert [(r.source, r.reason) for r in res] == [
        ("rules", None),
        ("fallback-full", "no_panel_label"),
        ("fallback-full", "no_labels"),
        ("fallback-full", "label_not_found"),
    ]
    assert (res[0].text, res[0].shared_text) == ("(B) Chart.", "Lead for all panels.")
    assert res[0].to_row()["shared_text"] == "Lead for all panels." and res[1].shared_text == ""


# Labels placed after the phrases they describe, several per bracket: a letter no segment opens gets
# the sentences that name it (issue 12), not the whole caption.
ENUMERATED = (
    "BMP signaling is epistatic to Toll signaling in Oncopeltus. Expression of twi (A, E, H, L), "
    "sim (B, F, I, M), sog (C, G, J, N, P, R, T, V) in wt embryos (A–C, R, T, V), Toll1-RNAi "
    "embryos (E–G, P), dl1-RNAi embryos (H–J) and Toll1-dpp-RNAi embryos (L–N) monitored by ISH. "
    "The view is ventral (A–C, J, N). Scale bar, 100 µm."
)


def test_mention_sentences_are_the_sentences_naming_the_letter() -> None:
    from pmcflow.enrich.rules import mention_sentences

    first = ENUMERATED.split(". ")[1] + "."
    assert mention_sentences(ENUMERATED, "e") == first  # in "(A, E, H, L)" and "(E–G, P)"
    assert mention_sentences(ENUMERATED, "J") == first + " The view is ventral (A–C, J, N)."  # a range
    assert mention_sentences(ENUMERATED, "z") == ""
    assert mention_sentences("Mice (n = 5) were used. Scale bar (a) 1 mm.", "n") == ""  # not a label list


def test_a_letter_named_only_in_lists_is_assigned_its_sentences() -> None:
    from pmcflow.enrich.rules import Segment, assign_detailed

    segments = [
        Segment([], "BMP signaling is epistatic to Toll signaling in Oncopeltus."),
        Segment(["d"], "x"),
    ]
    got = assign_detailed(segments, ["e", "z"], caption=ENUMERATED)
    assert got["e"].source == "rules" and got["e"].reason == "mention" and got["e"].labels == ["e"]
    assert got["e"].text.startswith("Expression of twi") and got["e"].text in ENUMERATED
    assert got["e"].shared_text == "BMP signaling is epistatic to Toll signaling in Oncopeltus."
    assert got["z"].source == "fallback-full" and got["z"].reason == "label_not_found"


# ---------------------------------------------------------------------------------------------
# Segment boundaries on real captions (issue 12): labels restated outside the increasing chain,
# labels after their phrase one per sentence or clause, label lists before their phrases, and
# bracketed letters that are abbreviations. Invented captions; each names the exact segments.
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        pytest.param(
            "Kinetics. (A–D) Time course in HeLa cells. (A, B) Uptake at 4 °C. (C, D) Uptake at 37 °C. "
            "(E) Summary. (B–E) Data are mean ± SD.",
            [
                (["a", "b", "c", "d"], "(A–D) Time course in HeLa cells."),
                (["a", "b"], "(A, B) Uptake at 4 °C."),
                (["c", "d"], "(C, D) Uptake at 37 °C."),
                (["e"], "(E) Summary."),
                (["b", "c", "d", "e"], "(B–E) Data are mean ± SD."),
            ],
            id="overview-and-note-ranges-restate-labels",
        ),
        pytest.param(
            "Lineages. (A, B) Lineage 3A. (A, B) The 3A cells lie ventrally. (C) Lineage 4B.",
            [
                (["a", "b"], "(A, B) Lineage 3A."),
                (["a", "b"], "(A, B) The 3A cells lie ventrally."),
                (["c"], "(C) Lineage 4B."),
            ],
            id="repeated-marker",
        ),
        pytest.param(
            "Discs. (A) Wing disc. (B) Leg disc. (C) Eye disc. Genotypes: (A) yw; (C) w1118.",
            [
                (["a"], "(A) Wing disc."),
                (["b"], "(B) Leg disc."),
                (["c"], "(C) Eye disc."),
                # the heading before the list's colon introduces it: the first listed panel's
                (["a"], "Genotypes: (A) yw;"),
                (["c"], "(C) w1118."),
            ],
            id="per-panel-list-after-the-last-panel",
        ),
        pytest.param(
            "Brain sections. Dorsal view of the cortex (a). Ventral view of the same cortex (b). "
            "Scale bar 1 mm.",
            [
                (["a"], "Dorsal view of the cortex (a)."),
                (["b"], "Ventral view of the same cortex (b). Scale bar 1 mm."),
            ],
            id="label-after-phrase-one-per-sentence",
        ),
        pytest.param(
            "Growth curves. Cells grew faster in medium X (A), but slower in the presence of drug Y "
            "at 37 °C (B). Data are mean ± SD.",
            [
                (["a"], "Cells grew faster in medium X (A),"),
                (["b"], "but slower in the presence of drug Y at 37 °C (B). Data are mean ± SD."),
            ],
            id="label-after-phrase-one-per-clause",
        ),
        pytest.param(
            "Cells were stained for (A) actin, (B) tubulin and (C) DAPI.",
            [(["a"], "(A) actin,"), (["b"], "(B) tubulin and"), (["c"], "(C) DAPI.")],
            id="labels-before-phrases-in-a-list",
        ),
        pytest.param(
            "Spectra of compound X showing (A) the full range; (B) the low-mass region.",
            [(["a"], "(A) the full range;"), (["b"], "(B) the low-mass region.")],
            id="label-before-phrase-then-leading-label",
        ),
        pytest.param(
            "Levels of (A) IL-6 and (B) TNF protein in serum were measured.",
            [(["a", "b"], "Levels of (A) IL-6 and (B) TNF protein in serum were measured.")],
            id="two-labels-joined-by-and-stay-joint",
        ),
        pytest.param(
            "Samples. (A/B) Spectra in NaCl. (C) Spectra in KCl.",
            [(["a", "b"], "(A/B) Spectra in NaCl."), (["c"], "(C) Spectra in KCl.")],
            id="slash-list",
        ),
        pytest.param(
            "Junctions. (A) Overview. (B) Junctions. Vesicles cluster at the membrane (C, arrows). "
            "(D) Counts.",
            [
                (["a"], "(A) Overview."),
                (["b"], "(B) Junctions."),
                (["c"], "Vesicles cluster at the membrane (C, arrows)."),
                (["d"], "(D) Counts."),
            ],
            id="label-with-a-note-in-its-bracket",
        ),
        pytest.param(
            "Hearts. (A) WT heart. (Ai) Higher magnification of A. (B) KO heart.",
            [(["a"], "(A) WT heart."), (["a"], "(Ai) Higher magnification of A."), (["b"], "(B) KO heart.")],
            id="roman-sub-label",
        ),
        pytest.param(
            "Fields. (A–C) Raw images of cells. (AI–CI) Masks of the same fields. (D) Counts.",
            [
                (["a", "b", "c"], "(A–C) Raw images of cells."),
                (["a", "b", "c"], "(AI–CI) Masks of the same fields."),
                (["d"], "(D) Counts."),
            ],
            id="range-of-sub-labels",
        ),
    ],
)
def test_restated_and_placed_labels(caption: str, expected: list[tuple[list[str], str]]) -> None:
    assert labelled(caption) == expected


@pytest.mark.parametrize(
    ("caption", "lead"),
    [
        ("Cells were stained for (A) actin, (B) tubulin and (C) DAPI.", "Cells were stained for"),
        (
            "Spectra of compound X showing (A) the full range; (B) the low-mass region.",
            "Spectra of compound X showing",
        ),
        ("Analysis of extracts: Heatmaps before (A) and after (B) irradiation.", "Analysis of extracts:"),
    ],
)
def test_text_before_the_first_placed_label_is_shared(caption: str, lead: str) -> None:
    assert shared_text(split_caption(caption)) == lead


@pytest.mark.parametrize(
    "caption",
    [
        "Intestine. (A) Mucosa. (B) Muscle layers: inner circular muscle (C) and outer longitudinal muscle (L).",
        "Intestine. In image (A) the mucosa. Image (B) shows the longitudinal muscle (L) and circular muscle (C).",
        "Fits. (A) Raw data. (B) Fit with its 95% confidence interval (CI).",
    ],
)
def test_abbreviations_in_brackets_are_not_labels(caption: str) -> None:
    assert [lab for labels, _ in labelled(caption) for lab in labels] == ["a", "b"]


def test_assign_gives_the_adjacent_segments_that_name_the_letter() -> None:
    caption = (
        "Kinetics. (A–D) Time course in HeLa cells. (A, B) Uptake at 4 °C. (C, D) Uptake at 37 °C. "
        "(E) Summary. (B–E) Data are mean ± SD."
    )
    got = assign_detailed(split_caption(caption), ["a", "c", "e"], caption=caption)
    # overview and panel are adjacent: one verbatim stretch
    assert got["a"].text == "(A–D) Time course in HeLa cells. (A, B) Uptake at 4 °C."
    # the overview and the note are apart from "(C, D)": the most specific segment alone
    assert got["c"].text == "(C, D) Uptake at 37 °C." and got["c"].labels == ["c", "d"]
    assert got["e"].text == "(E) Summary. (B–E) Data are mean ± SD."
    assert got["e"].labels == ["e", "b", "c", "d"] and got["e"].shared_text == "Kinetics."
    assert all(x.text in caption and x.reason is None for x in got.values())
    glued = "Title. (A) Foo. (B) Bar.(B, C) Note on both. (C) Baz."  # no space between the two
    assert (
        assign_detailed(split_caption(glued), ["b"], caption=glued)["b"].text
        == "(B) Bar.(B, C) Note on both."
    )


# ---------------------------------------------------------------------------------------------
# Mixed label styles: leading labels ("D.", "(B)") with the labels of a gap between them written
# after their phrases ("Energy content (E) per gram …"). Labels that fill the gap, in order, take
# their sentences; a bracketed letter that fills no gap stays in its panel's text. Invented captions.
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        pytest.param(
            "Feeding study. A. Food intake per day. B. Body weight of the mice. Glycogen content (C) per "
            "gram of liver. Lipid content (D) per gram of liver. E. Survival of the mice.",
            [
                (["a"], "A. Food intake per day."),
                (["b"], "B. Body weight of the mice."),
                (["c"], "Glycogen content (C) per gram of liver."),
                (["d"], "Lipid content (D) per gram of liver."),
                (["e"], "E. Survival of the mice."),
            ],
            id="trailing-labels-fill-a-gap-one-per-sentence",
        ),
        pytest.param(
            "Lipids. A. Body weight. B. Liver weight. Plasma triglycerides (C) and free fatty acids (D) "
            "after 8 weeks. E. Energy expenditure.",
            [
                (["a"], "A. Body weight."),
                (["b"], "B. Liver weight."),
                (["c", "d"], "Plasma triglycerides (C) and free fatty acids (D) after 8 weeks."),
                (["e"], "E. Energy expenditure."),
            ],
            id="two-trailing-labels-of-a-gap-in-one-sentence",
        ),
        pytest.param(
            "Kidney function. (A) Urine volume. (B) Creatinine clearance. Plasma urea and sodium (C, D) "
            "after 4 weeks. (E) Histology of the cortex.",
            [
                (["a"], "(A) Urine volume."),
                (["b"], "(B) Creatinine clearance."),
                (["c", "d"], "Plasma urea and sodium (C, D) after 4 weeks."),
                (["e"], "(E) Histology of the cortex."),
            ],
            id="label-list-fills-a-gap-after-a-long-phrase",
        ),
        pytest.param(
            "Ganglion. (A) Overview of the ganglion. (B) Higher magnification. Synapses cluster at the "
            "midline (C, arrow). (D) Counts.",
            [
                (["a"], "(A) Overview of the ganglion."),
                (["b"], "(B) Higher magnification."),
                (["c"], "Synapses cluster at the midline (C, arrow)."),
                (["d"], "(D) Counts."),
            ],
            id="label-with-a-five-letter-note-fills-a-gap",
        ),
    ],
)
def test_trailing_labels_fill_gaps_between_leading_labels(
    caption: str, expected: list[tuple[list[str], str]]
) -> None:
    assert labelled(caption) == expected


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        pytest.param(
            # "(E)" refers to panel E, which has its own leading label: no gap to fill
            "Treatment. A. Control. B. Drug X. C. Drug Y, scored as in (E). E. Scoring scheme. F. Counts.",
            [
                (["a"], "A. Control."),
                (["b"], "B. Drug X."),
                (["c"], "C. Drug Y, scored as in (E)."),
                (["e"], "E. Scoring scheme."),
                (["f"], "F. Counts."),
            ],
            id="reference-to-a-later-labelled-panel",
        ),
        pytest.param(
            # the gap is C; "(A)" is a reference back, not the missing label. The sentence stands
            # where C's would: it leaves B as an unlabelled piece (_lost_count), labelled A nowhere
            "Wound healing. A. Scratch at 0 h. B. Scratch at 24 h. Area measured as in (A) at 48 h. "
            "D. Closure rate.",
            [
                (["a"], "A. Scratch at 0 h."),
                (["b"], "B. Scratch at 24 h."),
                (["d"], "D. Closure rate."),
            ],
            id="reference-back-inside-a-gap",
        ),
        pytest.param(
            # after the last leading label only the next label continues the sequence: "(D)" skips C,
            # so it labels nothing; the sentence that names it leaves B as an unlabelled piece
            "Lipids. A. Body weight. B. Liver weight. Plasma lipids of the same mice (D).",
            [(["a"], "A. Body weight."), (["b"], "B. Liver weight.")],
            id="label-after-the-last-that-skips-one",
        ),
    ],
)
def test_bracketed_letters_that_fill_no_gap_do_not_split(
    caption: str, expected: list[tuple[list[str], str]]
) -> None:
    assert labelled(caption) == expected


def test_a_skipped_letter_gets_the_piece_that_stands_in_its_place() -> None:
    # "(A) … (C) …" skips B; the model cuts the A segment before a second description (>= 0.8)
    caption = (
        "PHD1 and p53. (A) Western blot for p53 in HCT116 cells treated with 5-FU for 8 h. "
        "Western blot for PHD1 in LIM1215 cells silenced for PHD1. (C) Representative images of colonies."
    )
    segs = split_caption(caption, "PHD1 and p53.")
    assert [(s.labels, s.text[:20]) for s in panel_segments(segs)] == [
        (["a"], "(A) Western blot for"),
        ([], "Western blot for PHD"),
        (["c"], "(C) Representative i"),
    ]
    got = assign_detailed(segs, ["a", "b", "c", "d"], caption=caption)
    assert got["b"].text == "Western blot for PHD1 in LIM1215 cells silenced for PHD1."
    assert (got["b"].source, got["b"].reason, got["b"].labels) == ("rules", "gap", ["b"])
    assert got["b"].shared_text == "PHD1 and p53." and got["a"].reason is None
    assert (got["d"].source, got["d"].reason) == ("fallback-full", "label_not_found")
    # counts that disagree (two letters skipped, one piece) assign nothing by position
    wider = [Segment(["a"], "(A) X."), Segment([], "Y."), Segment(["d"], "(D) Z.")]
    out = assign_detailed(wider, ["b", "c"], caption="(A) X. Y. (D) Z.")
    assert {k: v.source for k, v in out.items()} == {"b": "fallback-full", "c": "fallback-full"}


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        (  # PLOS ONE 10.1371/journal.pone.0116586, Fig 1: the sentence enumerates its panels
            "Study sites. Map of research locations (A), and photographs of Atqasuk dry heath (B) and the "
            "Barrow wet meadow (C). Visible in the photographs are the open-top chambers.",
            [
                (["a"], "Map of research locations (A),"),
                (["b"], "and photographs of Atqasuk dry heath (B)"),
                (["c"], "and the Barrow wet meadow (C). Visible in the photographs are the open-top chambers."),
            ],
        ),
        (  # PLOS ONE 10.1371/journal.pone.0115067, Fig 6: clauses after semicolons, the last after "and"
            "Profiles. Dependence of the period on: the rate of synthesis, vs (A); the constant for "
            "degradation, Km (B); the rate of PER degradation, vd (C) and the Michaelis constant for PER "
            "degradation, Kd (D). We compared two models.",
            [
                (["a"], "Dependence of the period on: the rate of synthesis, vs (A);"),
                (["b"], "the constant for degradation, Km (B);"),
                (["c"], "the rate of PER degradation, vd (C)"),
                (["d"], "and the Michaelis constant for PER degradation, Kd (D). We compared two models."),
            ],
        ),
        (  # one description of two panels: the first label's clause opens the sentence
            "Methylation. Two-way clustering of differentially methylated CpG sites for the sex effect (A) "
            "and for the location effect (B). Sample labels indicate their sex.",
            [
                (
                    ["a", "b"],
                    "Two-way clustering of differentially methylated CpG sites for the sex effect (A) and "
                    "for the location effect (B). Sample labels indicate their sex.",
                )
            ],
        ),
        (  # PLOS Comput Biol 10.1371/journal.pcbi.1004156, Fig 1: "(B) and (C) The …" is one description
            "Model. (A) The network structure. (B) and (C) The evolution trajectory of the process. (D) Summary.",
            [
                (["a"], "(A) The network structure."),
                (["b", "c"], "(B) and (C) The evolution trajectory of the process."),
                (["d"], "(D) Summary."),
            ],
        ),
        (  # PLOS ONE 10.1371/journal.pone.0153170, Fig 2: a panel named where its description says what it shows
            "IL-10. Freshly isolated PBMCs were stained for CD19 (A). The scatter plot in B summarizes the "
            "results. PBMCs were stimulated with tacrolimus (C) or CsA (D), as indicated. The bar graphs in E "
            "depict the decline of IL-10 production.",
            [
                (["a"], "Freshly isolated PBMCs were stained for CD19 (A)."),
                (["b"], "The scatter plot in B summarizes the results."),
                (["c", "d"], "PBMCs were stimulated with tacrolimus (C) or CsA (D), as indicated."),
                (["e"], "The bar graphs in E depict the decline of IL-10 production."),
            ],
        ),
    ],
)
def test_enumerated_clauses_joint_markers_and_panels_named_in_a_sentence(
    caption: str, expected: list[tuple[list[str], str]]
) -> None:
    assert labelled(caption, caption.split(". ", 1)[0] + ".") == expected


def test_the_end_of_an_open_bracket_is_not_a_label() -> None:
    # PLOS ONE 10.1371/journal.pone.0160653, Fig 2: "(95% CI)" is no "C)" panel
    caption = (
        "Profiles. A) The probability of a profile was estimated. B) The probability in Europe. C) The "
        "probability in Africa. Error bars (95% CI) were estimated using bootstrapping. D) The likelihood ratio."
    )
    got = labelled(caption, "Profiles.")
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c"], ["d"]]
    assert got[2][1] == "C) The probability in Africa. Error bars (95% CI) were estimated using bootstrapping."


def test_a_label_the_segments_marker_named_is_restated_not_opened() -> None:
    # eLife 10.7554/eLife.05031, Figure 2: "(E)" inside the "(B, C, E)" segment's sentence refers back
    caption = (
        "Ire1. (A) Splicing assay. (B, C) Top: schematic of the mutants as in (A). (D) Schematic of a "
        "chimeric mRNA. (B, C, E) Localization of Ire1 and of U1A decorating either SpRU1A (B, C) or "
        "SL-PGK1 (E) mRNA. ER-stress was induced with DTT. (F) Bar diagrams."
    )
    assert labelled(caption, "Ire1.")[3:] == [
        (
            ["b", "c", "e"],
            "(B, C, E) Localization of Ire1 and of U1A decorating either SpRU1A (B, C) or SL-PGK1 (E) mRNA. "
            "ER-stress was induced with DTT.",
        ),
        (["f"], "(F) Bar diagrams."),
    ]


def test_panel_word_before_a_bracket() -> None:
    # eLife 10.7554/eLife.00013, Figure 3-figure supplement 9: "Panel B (δH …) demonstrates …"
    caption = (
        "Expanded dqfCOSY spectrum. In panel A (δH 1.15-1.65 ppm), H-3 shows correlation to H-4a. Panel B "
        "(δH 2.4-4.0 ppm) demonstrates the correlations between H2-1 and H-2. Panel C (δH 0.75-1.60 ppm) "
        "exhibits correlations in the other methylenes."
    )
    assert [labels for labels, _ in labelled(caption, "Expanded dqfCOSY spectrum.")] == [["a"], ["b"], ["c"]]


# A real legend whose panel labels were lost (EMBO Mol Med, doi 10.15252/emmm.201505492, Figure 5;
# CC BY 4.0, from the SourceData fixture): three panels, described in order, no letter in the text.
LABEL_LESS_TITLE = "PHD1 hydroxylase favors p38α-mediated p53 phosphorylation."
LABEL_LESS_PANELS = [
    "Western blot for p53 pS15, p53, and vinculin (vinc) in HCT116 treated with 300 μM 5-FU upon "
    "silencing of PHD1 and p38α, alone or in combination. Vinculin (vinc) is used as a loading control.",
    "Detection of p53 pS15 and p53 after in vitro phosphorylation by p38α, p38β, or p38γ of "
    "p53immunoprecipitated from cells silenced for a control (SIMA) or PHD1.",
    "Detection by Western blot of p53 and p38 from whole cell extracts (WCE) or after "
    "immunoprecipitation of p53 from cell silenced for a Scr control or siPHD1 and treated for 1 h "
    "with 300 μM 5-FU.",
]
LABEL_LESS = " ".join([LABEL_LESS_TITLE, *LABEL_LESS_PANELS])


def test_a_label_less_caption_goes_to_subfigures_by_order_only_when_the_counts_agree() -> None:
    from pmcflow.enrich.rules import assign_by_order, order_pieces

    def by_order(caption: str, title: str | None, n: int | None, k: int) -> object:
        return assign_by_order(order_pieces(caption, title), n, k)

    got = [by_order(LABEL_LESS, LABEL_LESS_TITLE, 3, k) for k in range(3)]
    assert [a.text for a in got if a] == LABEL_LESS_PANELS
    assert {(a.source, a.reason, a.shared_text) for a in got if a} == {
        ("rules", "reading_order", LABEL_LESS_TITLE)
    }
    # the figure was cut into another number of subfigures: no guess
    assert by_order(LABEL_LESS, LABEL_LESS_TITLE, 2, 0) is None
    assert by_order(LABEL_LESS, LABEL_LESS_TITLE, 4, 0) is None
    assert by_order(LABEL_LESS, LABEL_LESS_TITLE, 3, 3) is None
    assert by_order(LABEL_LESS, LABEL_LESS_TITLE, None, 0) is None
    # a caption that names labels is aligned by its labels, not by order
    assert by_order("Lead. (A) Blot of X in cells. (B) Counts of Y.", None, 2, 0) is None
    # a boundary the model is in doubt about (p = 0.50 before "This figure presents"): no guess,
    # although its 0.5 threshold cuts this body into as many pieces as there are subfigures
    doubtful = (
        "VAFs of phased somatic mtDNA substitutions. This figure presents VAF pairs between co-clonal, "
        "sub-clonal, and different strand mtDNA substitutions. We expect similar VAFs for co-clonal "
        "pairs; lower VAF in sub-clonal mutations compared to clonal ones; and sum of a VAF pair is "
        "equal or less than 1.0."
    )
    title = "VAFs of phased somatic mtDNA substitutions."
    assert len(panel_segments(split_caption(doubtful, title))) == 2
    assert by_order(doubtful, title, 2, 1) is None


def test_rules_backend_matches_a_label_less_caption_by_the_letter_or_reading_order() -> None:
    from pmcflow.enrich.subcaption import RulesSubcaptioner, SubcaptionRequest

    def req(key: str, letter: str | None, n: int | None, order: int | None) -> SubcaptionRequest:
        return SubcaptionRequest(key, LABEL_LESS, letter, title=LABEL_LESS_TITLE, n_panels=n, order=order)

    res = RulesSubcaptioner().extract(
        [
            req("s0", None, 3, 2),  # no letter: its reading order
            req("s1", "b", 3, 0),  # a letter read on the image wins over the reading order
            req("s2", "e", 3, 1),  # a letter beyond the count: the reading order
            req("s3", "a", None, None),  # the count is unknown: the full caption, as before
        ]
    )
    assert [(r.source, r.reason) for r in res] == [
        ("rules", "reading_order"),
        ("rules", "reading_order"),
        ("rules", "reading_order"),
        ("fallback-full", "no_labels"),
    ]
    assert [r.text for r in res[:3]] == [LABEL_LESS_PANELS[2], LABEL_LESS_PANELS[1], LABEL_LESS_PANELS[1]]
    assert res[0].shared_text == LABEL_LESS_TITLE and res[3].shared_text == ""


def test_enrich_stage_gives_each_subfigure_its_figure_count_and_reading_order() -> None:
    from pmcflow.enrich.stage import _places

    def sf(uid: str, fig: str, graphic: int, index: int | None) -> dict:
        return {"subfigure_uid": uid, "figure_uid": fig, "graphic_index": graphic, "subfigure_index": index}

    places = _places(
        [
            sf("f1/s1", "f1", 0, 1),
            sf("f1/s0", "f1", 0, 0),
            sf("f1/s2", "f1", 0, 2),
            sf("f2/s0", "f2", 0, 0),
            sf("f3/s0", "f3", 0, 0),  # two graphics: their orders make no one sequence
            sf("f3/g1-s0", "f3", 1, 0),
            sf("f4/s1", "f4", 0, 1),  # a subfigure of the figure is missing: no count
        ]
    )
    assert [places[k] for k in ("f1/s0", "f1/s1", "f1/s2", "f2/s0")] == [(3, 0), (3, 1), (3, 2), (1, 0)]
    assert places["f3/s0"] == places["f3/g1-s0"] == places["f4/s1"] == (None, None)


def _split_sourcedata_legend(figure_id: str) -> list:
    """``split_caption`` of one SourceData dev legend (CC BY 4.0) as the fixture holds it."""
    from pmcflow.enrich.boundaries import fixture_dir
    from pmcflow.enrich.evaluate import load_rows

    rows = load_rows(fixture_dir() / "sourcedata_panel_legends_dev.jsonl")
    row = next(r for r in rows if r["id"] == figure_id)
    return split_caption(row["caption_reconstructed"], row["figure_title"])


def test_places_after_text_that_describes_panels_are_inside_a_panel() -> None:
    # EMBO Mol Med 10.15252/emmm.201404433 figure 4 (CC BY 4.0) as SourceData extracted it: the panel
    # letters were lost, two panels are described before "Left: … Right: …", which name places inside
    # the third one. The legend goes to the panel-boundary model instead of being cut at the places.
    segments = _split_sourcedata_legend("sourcedata:10.15252/emmm.201404433:Figure 4")
    assert not any(s.labels for s in segments), segments
    assert [s.text.split(" ")[:2] for s in segments[1:]] == [["Relative", "mRNA"]] * 2 + [["Relative", "levels"]]
    assert segments[-1].text.endswith("(n = 5, Student's t-test).")


def test_places_named_twice_are_inside_panels_and_a_later_place_continues_its_panel() -> None:
    # EMBO Mol Med 10.15252/emmm.201404433 figure 3 (CC BY 4.0) as SourceData extracted it: the panel
    # letters were lost, and "Left: … Right: …" comes twice, once inside each of the last two panels.
    # A place named twice names no panel: the legend goes to the panel-boundary model, a sentence
    # opening with "Right:" stays in the panel of the "Left:" before it, and each "Left:" opens one.
    segments = _split_sourcedata_legend("sourcedata:10.15252/emmm.201404433:Figure 3")
    assert not any(s.labels for s in segments), segments
    lefts = [s.text for s in segments if s.text.startswith("Left:")]
    assert [t.split(" ")[:3] for t in lefts] == [
        ["Left:", "Representative", "Western"],
        ["Left:", "Representative", "microphotographs"],
    ]
    assert all(t.count("Right:") == 1 for t in lefts), lefts
    assert not any(s.text.startswith("Right:") for s in segments)


def test_places_after_a_lead_still_name_the_panels() -> None:
    # eLife 10.7554/eLife.05502 figure 8 (CC BY, in the demo corpus), shortened: the text before the
    # places is one lead sentence every panel shares, so Left / Center / Right are the panels
    caption = (
        "Dynamics of pattern formation. Each plot shows the concentration of a particular protein species in "
        "space and time. Left: the concentration of NF-κB/Dorsal shows a broad Gaussian profile that decays "
        "to zero with time. Center: starting from a uniform distribution a region of high Sog concentrations "
        "forms where the initial distribution of NF-κB/Dorsal had its maximum. Right: BMP is depleted where "
        "Sog levels are high."
    )
    assert [labels for labels, _ in labelled(caption)] == [["left"], ["center"], ["right"]]


def test_the_first_two_labels_before_their_phrases_joined_by_and_make_two_clauses() -> None:
    # Materials 10, 45 (PMC5344628, CC BY) figure 12: "(a) CS and (b) CS/rosemary …" -- each label
    # opens its panel's clause; the text before the first is the lead every panel shares
    caption = "SEM images of (a) CS and (b) CS/rosemary or clove oil/T80 films at a 2000× magnification."
    segments = split_verbatim(caption)
    assert [(s.labels, s.text) for s in segments] == [
        ([], "SEM images of"),
        (["a"], "(a) CS and"),
        (["b"], "(b) CS/rosemary or clove oil/T80 films at a 2000× magnification."),
    ]


def test_a_pair_of_labels_after_a_labelled_panel_stays_one_description() -> None:
    # eLife 10.7554/eLife.04490 figure 12 (CC BY), shortened: "(B) JA and (C) JA-Ile accumulation"
    # comes after panel A's segment, one description of two panels (the PMC set's gold)
    caption = (
        "Transgene insertions. (A) Southern blot of genomic DNA from multiple lines of lox2/3. All lines "
        "of lox2/3 screened had strong reductions in their induced (B) JA and (C) JA-Ile accumulation "
        "(mean ± SEM, n = 6)."
    )
    assert [labels for labels, _ in labelled(caption)] == [["a"], ["b", "c"]]


def test_a_comma_label_after_its_noun_fills_the_gap_before_the_list() -> None:
    # PLOS ONE 10.1371/journal.pone.0087236 figure 47 (CC BY), shortened: "of A, UA 9629; B, …; and C,
    # …" -- B and C open clauses after ";", A follows the noun it completes
    caption = (
        "Intraspecific size range of Beelzebufo ampinga. Left squamosals of A, UA 9629; B, FMNH PR 2512 "
        "(reversed for comparison); and C, UA 9614, all in dorsal view."
    )
    assert [labels for labels, _ in labelled(caption)] == [["a"], ["b"], ["c"]]
    # it only fills a gap: the vitamins are no panels where the labels start at (A)
    assert labelled("Levels of A, D and E vitamins in mice. (A) Plasma. (B) Liver.") == [
        (["a"], "(A) Plasma."),
        (["b"], "(B) Liver."),
    ]


def test_panel_words_out_of_order_open_their_own_segments() -> None:
    # PLOS ONE 10.1371/journal.pone.0026358 figure 2 (CC BY), shortened: panels named with the word
    # "panel" in the order A, C, then B and D; C is no less a panel for coming before B
    caption = (
        "Fatigue scores in Rituximab and Placebo groups. In panel A, the self-reported Fatigue scores were "
        "calculated for each patient every second week. In panel C, the physician-assessed Fatigue scores "
        "were calculated from the mean of the same four symptoms. In panel B and D, estimated marginal means "
        "for self-reported and physician-assessed Fatigue scores during follow-up are shown."
    )
    assert [labels for labels, _ in labelled(caption)] == [["a"], ["c"], ["b", "d"]]


def test_a_range_of_closing_bracket_labels_opens_its_sentence_as_one_marker() -> None:
    # BMC Neurosci 10.1186/1471-2202-15-97 figure 2 (CC BY), shortened: "A)–C)" is panels A to C,
    # not "A)" alone; the same for "(A)–(C)" opening a sentence
    caption = (
        "Correlation analysis of the correlation with subjective sleepiness. A)–C) Statistical parametric "
        "mapping of different brain regions showing a significant correlation with subjective sleepiness. "
        "A) In the nonconscious + fear contrasts, a significant positive correlation is observed. B) In the "
        "nonconscious + neutral contrasts, a significant positive correlation is observed. C) In the "
        "nonconscious + fear vs. neutral contrasts, the bilateral amygdala shows a positive correlation."
    )
    title = "Correlation analysis of the correlation with subjective sleepiness."
    assert [labels for labels, _ in labelled(caption, title)] == [["a", "b", "c"], ["a"], ["b"], ["c"]]
    bracketed = caption.replace("A)–C)", "(A)–(C)").replace(" A) In", " (A) In").replace(" B) In", " (B) In")
    bracketed = bracketed.replace(" C) In", " (C) In")
    assert [labels for labels, _ in labelled(bracketed, title)] == [["a", "b", "c"], ["a"], ["b"], ["c"]]
    # inside a sentence a bracketed range keeps its own reading: "Panels (B)–(F) data were …"
    assert [labels for labels, _ in labelled("Spectra. (A) NaCl. (B) KCl. (C) LiCl, as in (A)–(C) above.")] == [
        ["a"],
        ["b"],
        ["c"],
    ]


def test_a_letter_after_an_operator_is_an_operand_not_a_label() -> None:
    # Clin Nephrol 10.5414/CN107180 figure 1 (CC BY), shortened: "Ca + D, Ca-D" names treatment
    # arms (calcium plus vitamin D); "D," after "+" is no panel D after "C:"
    caption = (
        "Effect of treatments on serum 25-hydroxyvitamin D levels per eGFR. A: eGFR < 45 ml/min/1.73 m. "
        "Number of participants on each treatment arm (placebo, Ca + D, Ca-D) at baseline were n = 100. "
        "B: eGFR 59 – 45 ml/min/1.73 m. Number of participants on each treatment arm (placebo, Ca + D, "
        "Ca-D) at baseline were n = 222. C: eGFR ≥ 60 ml/min/1.73 m. Number of participants on each "
        "treatment arm (placebo, Ca + D, Ca-D) at baseline were n = 288."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c"]]
    assert got[-1][1].endswith("(placebo, Ca + D, Ca-D) at baseline were n = 288.")


def test_in_and_a_label_the_sentence_before_described_opens_a_segment() -> None:
    # Sci Rep 10.1038/s41598-018-20874-4 figure 1 (CC BY), shortened: "(a) and … (b)." then one
    # sentence per panel, "In (a), …. In (b), …"; both had been glued to the first sentence
    caption = (
        "Kaplan-Meier curves for composite cardiovascular and renal events in patients with eGFR of <45 "
        "ml/min per 1.73 m2 (a) and the other patients (b). In (a), the numbers of patients in ARB and "
        "non-ARB groups were 96 and 91, respectively. In (b), the number of endpoints was 27 in 516 "
        "patients assigned ARB group and 29 in 518 patients assigned non-ARB group."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a", "b"], ["a"], ["b"]]
    assert got[1][1].startswith("In (a), the numbers") and got[2][1].startswith("In (b), the number")
    # a label the sentence before does not describe is a pointer, not a new segment
    pointer = (
        "Reporter assays. (A) Cells on coverslips. (B) Nuclear translocation. (C–E) Cells were transfected "
        "with a reporter plasmid. In (A), cells were mock-transfected 8 h later. (F) ISRE reporter."
    )
    assert [labels for labels, _ in labelled(pointer, "Reporter assays.")] == [["a"], ["b"], ["c", "d", "e"], ["f"]]
    # one note on two panels: "In (C), …; in (D), …" stays with them
    note = (
        "Autophagosomes. (A) Blots. (B) Puncta. Analysis of liver (C) and kidney (D) tissues from mice. "
        "In (C), **P = 0.0029; in (D), **P = 0.0025 (unpaired t-test)."
    )
    assert [labels for labels, _ in labelled(note, "Autophagosomes.")] == [["a"], ["b"], ["c", "d"]]


def test_the_label_after_a_restated_bare_list_opens_its_own_segment() -> None:
    # Arthritis Res Ther 10.1186/s13075-015-0825-9 figure 1 (CC BY), shortened: after "a" to "e" the
    # caption walks through its panels again, "a-d …. e …"; the second "e" had been glued to "a-d"
    caption = (
        "Short Form-36 (SF-36) domain scores at month 3. a Placebo at baseline and month 3. b Tofacitinib "
        "5 mg twice daily (BID) at baseline and month 3. c Tofacitinib 10 mg BID at baseline and month 3. "
        "d Baseline scores for each treatment group. e Weighted combined baseline score + placebo. a-d "
        "Treatment group baselines (using separate colors in d). e Weighted combined baseline across all "
        "treatment groups. Placebo, n = 122 at baseline, and n = 108 at month 3."
    )
    got = labelled(caption, "Short Form-36 (SF-36) domain scores at month 3.")
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c"], ["d"], ["e"], ["a", "b", "c", "d"], ["e"]]
    assert got[5][1] == "a-d Treatment group baselines (using separate colors in d)."
    assert got[6][1].startswith("e Weighted combined baseline across all treatment groups.")


def test_a_comma_list_of_trailing_labels_is_cut_at_every_item_or_at_none() -> None:
    # BMC Musculoskelet Disord 10.1186/1471-2474-15-193 figure 1 (CC BY): the items "DLBP vs. LDH"
    # and "DLBP vs. N" are too short to be clauses of their own, so the list is one description;
    # it had been cut before the longer items only, giving [A, B, C], [D], [E, F]
    caption = (
        "Scatter plots showing the discriminative ability of representative differential peptide peaks. "
        "DLBP vs. CLBP of unknown origin (A), DLBP vs. LDH (B), DLBP vs. N (C), CLBP of unknown origin vs. "
        "LDH (D), CLBP of unknown origin vs. N (E), and N vs. LDH (F) were discriminated using peaks at "
        "1741 m/z and 5754 m/z, those at 1779 m/z and 1692 m/z, 3159 m/z and 1779 m/z, 1779 m/z and 1692 "
        "m/z, 5755 m/z and 7062 m/z, and 2023 m/z and 866 m/z, respectively."
    )
    title = "Scatter plots showing the discriminative ability of representative differential peptide peaks."
    got = labelled(caption, title)
    assert [labels for labels, _ in got] == [["a", "b", "c", "d", "e", "f"]]
    # every item a clause of its own: one segment per item, as before
    clauses = (
        "Outcomes. Serum levels rose in the treated women (A), plasma levels fell in the treated men (B), "
        "and urine levels were unchanged in both groups (C)."
    )
    assert [labels for labels, _ in labelled(clauses, "Outcomes.")] == [["a"], ["b"], ["c"]]


def test_a_label_after_and_is_found_when_the_words_before_read_as_no_list() -> None:
    # DARU J Pharm Sci 10.1186/2008-2231-20-83 figure 3 (CC BY): "pain and B:" had been read as one
    # list of labels that names none, and the search went on after "B:"
    caption = (
        "A: Severity of pain and B: consistency of stool, in the two treatment groups of cassia fistula "
        "emulsion and mineral oil, in the children with functional constipation, by the score of Visual "
        "Analog Scale."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"]]
    assert got[1][1].startswith("B: consistency of stool")
    # EMBO Mol Med 10.15252/emmm.202013548 figure 4 (CC BY), shortened: the same in the dot style
    dots = (
        "F. Glucose tolerance test after 16 weeks in HFD. n=10. G. Free-fatty acids and H. Triglycerides "
        "content in serum after 17 weeks in HFD. n=10. I. Shannon Index. n=7."
    )
    assert [labels for labels, _ in labelled(dots)] == [["f"], ["g"], ["h"], ["i"]]


def test_a_letter_the_panel_word_chain_skips_is_found_among_the_captions_own_markers() -> None:
    # the chain of a caption labelled only with the word "panel" comes from the panel-word fallback;
    # the letter it skips ("(B)", placed after its phrase) is searched among the caption's own
    # markers, not among the fallback's, which name only A and C
    caption = (
        "Knockout phenotypes at day 3. In panel A, the wild-type embryos show normal somites. "
        "In panel C, the mutant embryos lack somites. The heterozygous embryos (B) are intermediate."
    )
    assert labelled(caption, "Knockout phenotypes at day 3.") == [
        (["a"], "In panel A, the wild-type embryos show normal somites."),
        (["c"], "In panel C, the mutant embryos lack somites."),
        (["b"], "The heterozygous embryos (B) are intermediate."),
    ]


def test_a_letter_after_a_word_with_its_initial_is_a_panel_among_consecutive_ones() -> None:
    # Nature Communications 10.1038/s41467-025-57371-y figure 1 (CC BY), shortened (its "(c)," left
    # out): "(i)" follows
    # "sea-ice area, and" and "(c)" follows "CO2", but the letters around them in the sentence are the
    # panels before and after: consecutive panels, not abbreviations
    caption = (
        "Time-series of the global annual mean (a) atmospheric CO2 concentrations, (b) surface air "
        "temperatures, (d) ocean CO2 uptakes, (e) land CO2 uptakes, (f) air-sea ΔpCO2, (g) northern "
        "hemisphere sea-ice area, (h) southern hemisphere sea-ice area, and (i) ocean mixed layer depths."
    )
    assert [labels for labels, _ in labelled(caption)][-2:] == [["h"], ["i"]]
    # two letters that abbreviate their muscles out of panel order are still no panels
    assert labelled("Sections of longitudinal muscle (L) and circular muscle (C) in the gut. (A) Wild type.") == [
        (["a"], "(A) Wild type.")
    ]


def test_a_list_restating_an_overview_marker_gives_each_panel_its_clause() -> None:
    # Heliyon 10.1016/j.heliyon.2024.e31290 figure 3 (CC BY): "a–d." names the panels, then the
    # sentence lists them, each label before its phrase; every item is a panel's clause
    caption = (
        "a–d. The geographical location of electricity-producing facilities: (a) hydro, (b) wind, "
        "(c) biopower, and (d) the total renewable energy production (TWh/year)."
    )
    assert labelled(caption) == [
        (["a", "b", "c", "d"], "a–d. The geographical location of electricity-producing facilities:"),
        (["a"], "(a) hydro,"),
        (["b"], "(b) wind,"),
        (["c"], "(c) biopower, and"),
        (["d"], "(d) the total renewable energy production (TWh/year)."),
    ]
    # with no overview marker before them, places named per panel make one note (eLife 05031 fig. 3)
    note = "(A) Conservation. (B) Foci. (C) Schematic. (A) lower right, (B) top, residues are blue."
    assert labelled(note)[-1] == (["a"], "(A) lower right, (B) top, residues are blue.")


def test_a_gap_that_mid_sentence_letters_fill_costs_the_chain_nothing() -> None:
    # PLOS Pathogens 10.1371/journal.ppat.1002769 figure 5 (CC BY): the sentence-initial markers
    # (A), B), (E) skip C and D, which the sentence between them names after its phrases; the
    # overview "(A–E)" alone used to outscore that chain, and C and D were left in B's segment
    caption = (
        "Profiles of Coordinated Temporal Gene Regulation. (A–E) Clusters of temporally co-regulated "
        "genes were identified by correlation (>0.9) with synthetic profiles, indicated by red (A,B "
        "(down), C–E) or blue (B, up) lines. (A) Genes transiently induced at day 2, followed by return "
        "to control levels. B) Early induced (red) and repressed (black) genes with sustained altered "
        "transcript levels. Genes with steadily increasing (C) or decreased (D) expression levels. (E) "
        "Delayed induced genes."
    )
    assert labelled(caption)[-3:] == [
        (["b"], "B) Early induced (red) and repressed (black) genes with sustained altered transcript levels."),
        (["c", "d"], "Genes with steadily increasing (C) or decreased (D) expression levels."),
        (["e"], "(E) Delayed induced genes."),
    ]


def test_a_label_after_its_phrase_takes_its_whole_sentence_across_semicolons() -> None:
    # PLOS ONE 10.1371/journal.pone.0016329 figure 4 (CC BY): "(D)" closes a sentence whose first
    # clause, before the ";", names no panel of its own: the whole sentence describes D
    caption = (
        "Geographical distributions of genomically characterized mycobacteriophages. A–C. Geographical "
        "distribution of the isolation sites of 60 previously described sequenced mycobacteriophages "
        "according to cluster assignation: United States (A), India, Ireland, and Japan (B), and "
        "Pittsburgh, PA (C). Locations of newly isolated mycobacteriophages reported in this study "
        "colored according to cluster; locations of previously isolated genomes are shown in black (D)."
    )
    assert labelled(caption)[-1] == (
        ["d"],
        "Locations of newly isolated mycobacteriophages reported in this study colored according to "
        "cluster; locations of previously isolated genomes are shown in black (D).",
    )
    # clauses that each end with their own label stay one clause each
    listed = "Dependence on: the rate, vs (A); the constant, Km (B); the rate, vd (C) and the constant, Kd (D)."
    assert [text for _, text in labelled(listed)][1] == "the constant, Km (B);"


def test_a_colour_key_of_comma_items_names_no_panels() -> None:
    # PLOS ONE 10.1371/journal.pone.0016329 figure 11 (CC BY), shortened: "E, orange" after a ";"
    # read as panel E after C; the key's items name clusters, out of panel order
    caption = (
        "Acquisition of an HNH homing endonuclease. A. Alignment of the Cluster E genomes. B. Phamily "
        "circles of Phams 1706 and 1707. C. Phylogenetic reconstruction of Pham2942. Members are colored "
        "according to cluster of parent genome: A1, green; F1, purple; E, orange; I1, blue; B3, yellow; "
        "Omega is a singleton. The tree was drawn by NJPlot."
    )
    assert [labels for labels, _ in labelled(caption)] == [["a"], ["b"], ["c"]]
    # panels listed so, in order, stay panels (PLOS ONE squamosals, the dev set)
    listed = "Left squamosals of A, UA 9629; B, FMNH PR 2278; and C, MNHN.F.MAE 3117."
    assert [labels for labels, _ in labelled(listed)] == [["a"], ["b"], ["c"]]


def test_a_comma_label_list_that_runs_into_a_name_gives_its_first_label() -> None:
    # PLOS ONE 10.1371/journal.pone.0046493 figure 3 (CC BY), shortened: "B, LipN and C," read as one
    # list of labels that "LipN" spoils, so B and C were lost and with them every label
    caption = (
        "Protein-inhibitor adducts studies using mass spectrometry. Global mass modifications of A, "
        "LipH; B, LipN and C, LipY after 30 min incubation with MmPPOX. D, PMF spectra of LipN before "
        "(top) and after (bottom) incubation."
    )
    got = split_caption(caption, "Protein-inhibitor adducts studies using mass spectrometry.")
    assert sorted({x for s in got for x in s.labels}) == ["a", "b", "c", "d"]
    assert got[-1].labels == ["d"] and got[-1].text.startswith("D, PMF spectra")
    # a name after "and" with a comma is still no label where no gap of the chain wants it
    assert [labels for labels, _ in labelled("(A) Mice and E, coli strains. (B) Rats.")] == [["a"], ["b"]]


def test_a_restated_list_right_after_a_sentences_opening_phrase_opens_a_segment() -> None:
    # Anatomia, Histologia, Embryologia 10.1111/ahe.70140 figure 8 (CC BY): the columns of a 2x2 grid
    # restated after "In the first column", "In the second column" describe those panels
    caption = (
        "Photomicrographs of the jejunum (A and B) and colon (C and D). In the first column (A and C), "
        "Alcian Blue staining highlights goblet cells (arrows). In the second column (B and D), Masson's "
        "Trichrome staining demonstrates the organisation of the intestinal wall layers. 40× magnification."
    )
    assert labelled(caption) == [
        (["a", "b", "c", "d"], "Photomicrographs of the jejunum (A and B) and colon (C and D)."),
        (["a", "c"], "In the first column (A and C), Alcian Blue staining highlights goblet cells (arrows)."),
        (
            ["b", "d"],
            "In the second column (B and D), Masson's Trichrome staining demonstrates the organisation of "
            "the intestinal wall layers. 40× magnification.",
        ),
    ]
    # a sentence that names other panels after the list is not one panel's: "twi (A, E), sim (B, F)"
    listed = "(A) Wild type. (B) Mutant. (C) Rescue. (D) Control. Expression of twi (A, C), sim (B, D) by ISH."
    assert [labels for labels, _ in labelled(listed)] == [["a"], ["b"], ["c"], ["d"]]


def test_an_overview_sentence_that_names_panels_is_their_segment_not_shared_text() -> None:
    # PLOS Computational Biology 10.1371/journal.pcbi.1004453 figure 6 (CC BY): the sentence before
    # "A." names all three panels after their phrases; the guide has it a segment of A, B and C
    title = "Functional instability of M-RG rosettes."
    caption = (
        f"{title} Temporal variance of RS (A), B/A (B) and Speed (C) was calculated for each rosette over "
        "time. A. E-RG rosettes are more stable in RS (p = 0.0009). B. E-RG rosettes are more stable in "
        "B/A (p = 0.0006). C. E-RG rosettes are more stable in Speed (p = 0.03)."
    )
    got = split_caption(caption, title)
    assert [s.labels for s in got] == [[], ["a", "b", "c"], ["a"], ["b"], ["c"]]
    assert got[1].text == "Temporal variance of RS (A), B/A (B) and Speed (C) was calculated for each rosette over time."
    # a lead that names one panel, or none, stays shared text
    lead = split_caption(f"{title} Scale bar in (A), 10 µm. A. Stable. B. Unstable.", title)
    assert [s.labels for s in lead] == [[], [], ["a"], ["b"]]


def test_a_sentences_opening_list_after_in_or_panels_is_a_note_for_those_panels() -> None:
    # Nature Communications 10.1038/s41467-025-57371-y figure 3 (CC BY): "Panels (c, f, i)" names
    # the grid's third column, which the chain of lists before it skipped
    caption = (
        "Maps of ocean uptake of anthropogenic carbon. Spatial patterns of cumulative (1850–2100) "
        "anthropogenic carbon uptake by the ocean under (a, b) historical + SSP1-2.6, (d, e) historical + "
        "SSP2-4.5, and (g, h) historical + SSP5-8.5 scenarios for REF and Abiotic simulations. Panels "
        "(c, f, i) depict differences between REF and Abiotic simulations."
    )
    assert labelled(caption, "Maps of ocean uptake of anthropogenic carbon.")[-1] == (
        ["c", "f", "i"],
        "Panels (c, f, i) depict differences between REF and Abiotic simulations.",
    )
    # Nature Communications 10.1038/s41467-024-54756-3 figure 4 (CC BY), shortened: "(z)", a symbol
    # later in the sentence, is no other panel's bracket
    note = (
        "a Control simulation. b Water hosing experiment. c Anomaly (water hosing—control). In (a, b), "
        "the shaded color represents the volume transport over each density bin (x-axis) and depth (z) bin."
    )
    assert [labels for labels, _ in labelled(note)] == [["a"], ["b"], ["c"], ["a", "b"]]


def test_a_lead_sentence_naming_panels_in_bracketed_notes_is_their_segment() -> None:
    # PLOS Computational Biology 10.1371/journal.pcbi.1004692 figure 1 (CC BY), shortened: "(a, 0.25
    # mm)" and "(b, 2 mm)" name panels a and b with a note each
    title = "Short- and long-range fascicles supported by different parameter selections."
    caption = (
        f"{title} The two columns compare short-range fascicles (left, U-fiber) and long-range fascicles "
        "(right). The images show extremely different estimates using a low threshold (a, 0.25 mm) and "
        "high threshold (b, 2 mm). a. The 0.25 mm results show a dense set. b. Conversely the 2 mm "
        "results show a sparse set. c. Ensemble Tractography generates both."
    )
    got = [(s.labels, s.text[:20]) for s in split_caption(caption, title)]
    assert got[:3] == [([], title[:20]), ([], "The two columns comp"), (["a", "b"], "The images show extr")]


def test_a_sentence_closing_with_every_panel_is_a_note_for_all() -> None:
    # PLOS ONE 10.1371/journal.pone.0153170 figure 3 (CC BY), shortened: the last sentence names
    # panels A to E after its phrase; it was glued to E's segment
    caption = (
        "The bargraphs in panels A-C show the decline of B-cells. Tregs were unaltered during CsA "
        "treatment (D). The IFN-γ production of T-cells served as a positive control (E). Corresponding "
        "representative dotplots or histograms are displayed on the right (A-E)."
    )
    assert labelled(caption)[-2:] == [
        (["e"], "The IFN-γ production of T-cells served as a positive control (E)."),
        (["a", "b", "c", "d", "e"], "Corresponding representative dotplots or histograms are displayed on the right (A-E)."),
    ]
    # a back-reference to some panels at a sentence's end stays in the panel's segment
    some = "(A) Blots. (B) Quantification. (C) Controls as in (A, B)."
    assert labelled(some)[-1] == (["c"], "(C) Controls as in (A, B).")


def test_a_contrasting_clause_closed_by_its_label_is_that_panels() -> None:
    # PLOS ONE 10.1371/journal.pone.0153170 figure 3 (CC BY), shortened: "while …" closed by "(D)"
    # describes D, not the panels A-C the sentence opened with
    caption = (
        "The bargraphs in panels A-C show the decline of B-cells compared to day 0 (in %) while the "
        "percentage of Tregs was unaltered during CsA treatment (D). The IFN-γ production served as a "
        "positive control (E)."
    )
    assert labelled(caption)[:2] == [
        (["a", "b", "c"], "The bargraphs in panels A-C show the decline of B-cells compared to day 0 (in %)"),
        (["d"], "while the percentage of Tregs was unaltered during CsA treatment (D)."),
    ]
    # "while" inside a label's own description, the sentence not closed by another label, stays
    same = "(A) Wild type mice, while fasting. (B) Mutant mice."
    assert labelled(same) == [(["a"], "(A) Wild type mice, while fasting."), (["b"], "(B) Mutant mice.")]


def test_an_abbreviation_then_panels_in_one_bracket_labels_its_phrase() -> None:
    # Nature Communications 10.1038/s41467-024-49604-3 figure 2 (CC BY), shortened: "(GMSAT, a–c)"
    # and "(AMOC, d–f)" name the rows' panels after an abbreviation
    caption = (
        "Top to bottom rows show global-mean surface air temperature (GMSAT, a–c), intensity of the "
        "Atlantic Meridional Overturning Circulation (AMOC, d–f), sea level rise (SLR) contributed by the "
        "Greenland Ice Sheet (GIS) (g–i), and by the Antarctic Ice Sheet (AIS) (j–l)."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got][:2] == [["a", "b", "c"], ["d", "e", "f"]]
    assert got[1][1] == "intensity of the Atlantic Meridional Overturning Circulation (AMOC, d–f),"
    # one letter after an abbreviation is no panel list ("(CI, A)" is not read as panel A)
    assert labelled("Odds ratios (OR, a) were computed. (B) Forest plot.") == [(["b"], "(B) Forest plot.")]


def test_a_grids_column_named_with_its_panels_opens_a_segment() -> None:
    # Nature Communications 10.1038/s41467-024-49604-3 figure 2 (CC BY), shortened: after the rows
    # (a–c), (d–f), (g–i), each column is described with its panels
    caption = (
        "Rows show temperature (GMSAT, a–c), overturning (AMOC, d–f), and sea level rise (SLR) (g–i). "
        "Left column a, d, g, CO2 follows the SSP2-4.5 scenario. Middle column b, e, h, a more intensive "
        "warming scenario. Right column c, f, i, same as middle column but showing the anomaly."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got][-3:] == [["a", "d", "g"], ["b", "e", "h"], ["c", "f", "i"]]
    assert got[-2][1] == "Middle column b, e, h, a more intensive warming scenario."
    # a column named without panels is text of the segment it is in
    plain = "(A) Wild type. (B) Mutant. Left column shows day 1 and right column day 2."
    assert labelled(plain)[-1] == (["b"], "(B) Mutant. Left column shows day 1 and right column day 2.")


def test_sub_panels_named_inside_their_panels_description_stay_in_it() -> None:
    # Frontiers in Cellular Neuroscience 10.3389/fncel.2018.00477 figure 5 (PMC6291523, CC BY),
    # shortened: "(A1)" and "(A2, blue lines)" name parts of panel A inside A's description
    caption = (
        "(A) Extracellular recordings were performed in the cortical layer V of brain slices (A1). LFPs "
        "evoked by photostimulation (A2, blue lines) were faithfully reproduced in response to every "
        "light pulse. (B) In vivo extracellular recordings of cortical layer V were performed (B1). In "
        "vivo LFPs were successfully evoked by photostimulation (B2, blue lines)."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"]]
    assert got[0][1].endswith("in response to every light pulse.")
    # another panel's sub-panels named after their phrases still open that panel's segment
    other = "(A) Overview of the setup. Recordings in slices (B1) and in vivo (B2)."
    assert labelled(other) == [
        (["a"], "(A) Overview of the setup."),
        (["b"], "Recordings in slices (B1) and in vivo (B2)."),
    ]


def test_a_bare_marker_before_a_greek_letter_opens_a_segment() -> None:
    # Nature Communications 10.1038/s41467-018-07286-8 figure 3 (CC BY), shortened: "g β2-chimaerin
    # staining …" and "j β2-chimaerin staining …" open panels g and j
    caption = (
        "f Rac1 FRET ratio profiles of cells treated with siRNA. g β2-chimaerin staining compared to "
        "Rac1 FRET in the same cells. h PAK1-iRFP recruitment following activation gradients. i PAK1-iRFP "
        "recruitment after JLY cocktail. j β2-chimaerin staining after DMSO or JLY cocktail treatment."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["f"], ["g"], ["h"], ["i"], ["j"]]
    assert got[1][1] == "g β2-chimaerin staining compared to Rac1 FRET in the same cells."
    # a Greek letter after a mid-sentence article is no marker
    plain = "(A) Strands that form a β-sheet. (B) Helices."
    assert labelled(plain) == [(["a"], "(A) Strands that form a β-sheet."), (["b"], "(B) Helices.")]


def test_bare_markers_restating_a_bare_overview_list_open_their_own_segments() -> None:
    # Nature Communications 10.1038/s41467-019-10418-3 figure 2 (CC BY), shortened: "c, d" describes
    # both panels, then "c" and "d" each its own
    caption = (
        "a Flow chart for MOSD fabrication. b Schematic diagram of device encapsulation. c, d Images of "
        "the MOSD wrapped around nerves with different diameters. c Mouse C7 nerve. d Mouse sciatic "
        "nerve. e An image of the MOSD at its original length."
    )
    assert labelled(caption)[2:] == [
        (["c", "d"], "c, d Images of the MOSD wrapped around nerves with different diameters."),
        (["c"], "c Mouse C7 nerve."),
        (["d"], "d Mouse sciatic nerve."),
        (["e"], "e An image of the MOSD at its original length."),
    ]
    # a bracketed overview's last letter named as a subject stays in the overview's segment
    bracketed = "(C) Adult VNS. (D–F) Adult nervous systems of flies. F shows a higher power view."
    assert labelled(bracketed)[-1] == (
        ["d", "e", "f"],
        "(D–F) Adult nervous systems of flies. F shows a higher power view.",
    )


def test_primed_sub_panels_one_after_another_are_their_panels_segment() -> None:
    # Frontiers in Neural Circuits 10.3389/fncir.2019.00004 figure 1 (CC BY), shortened: A, A′, A″
    # and A″′ are parts of panel A
    caption = (
        "(A) Merged image (A′–A″′) of a sagittal section. (A′) Native GFP expression labeling targeted "
        "neurons. (A″) Tyrosine hydroxylase (TH) staining. (A″′) P2A staining. Scale bar 1 mm. (B) "
        "Example section used for quantification of overlap between TH and GFP."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"]]
    assert got[0][1].endswith("(A″′) P2A staining. Scale bar 1 mm.")
    # a panel's marker repeated without a prime opens a segment again, as the annotators have it
    repeated = "(A) Explants. (B) To determine the specificity, explants were transduced. (B) Quantification."
    assert [labels for labels, _ in labelled(repeated)] == [["a"], ["b"], ["b"]]


def test_an_opening_list_naming_the_panels_just_described_is_a_note_in_their_segment() -> None:
    # Frontiers in Cellular Neuroscience 10.3389/fncel.2019.00084 figure 4 (CC BY), shortened: "In
    # (C–E), …" after E's description is a note on C to E, part of E's segment
    caption = (
        "(D) Relationship between oscillation frequency and firing frequency. (E) Relationship between "
        "magnitude of oscillations and firing frequency. In (C–E), the data points are divided into "
        "burst-first and pause-first units. (F) The histogram shows the percent change."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["d"], ["e"], ["f"]]
    assert got[1][1].endswith("divided into burst-first and pause-first units.")
    # one naming earlier panels only, after another panel's segment, is a note of its own
    other = "a Control simulation. b Water hosing. c Anomaly. In (a, b), the shaded color is the transport."
    assert labelled(other)[-1] == (["a", "b"], "In (a, b), the shaded color is the transport.")


def test_a_unit_in_lower_case_ms_ends_its_sentence() -> None:
    # The Journal of Physiology 10.1113/JP276283 figure 4 (CC BY), shortened: "70 ms." ends the
    # sentence before "B," (read as the title "Ms." before, so B was lost)
    caption = (
        "A, optical mapping of spontaneous heart activity, with a delay around 70 ms. B, the optical "
        "system was used to reduce AV delay. C, a stationary AV block was established."
    )
    assert [labels for labels, _ in labelled(caption)] == [["a"], ["b"], ["c"]]
    from pmcflow.enrich.text import is_abbreviation_stop

    assert not is_abbreviation_stop("around 70 ms. B", 12)
    assert is_abbreviation_stop("as told by Ms. Smith", 13)  # the title, capitalised


def test_the_terms_of_a_glossary_of_abbreviations_are_no_panel_labels() -> None:
    # Frontiers in Behavioral Neuroscience 10.3389/fnbeh.2019.00050 figure 2 (CC BY), shortened:
    # "D1, dopamine receptor D1; D2, …" among the abbreviations is no panel D
    caption = (
        "(A,B) Confocal images of EYFP-expressing cells. (C) Percentage of D1 or D2 mRNA-expressing "
        "cells. Data show mean with SD. OT, olfactory tubercle; AAV, adeno-associated virus; D1, "
        "dopamine receptor D1; D2, dopamine receptor D2; SD, standard deviation."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a", "b"], ["c"]]
    assert got[-1][1].endswith("SD, standard deviation.")
    # The Journal of Physiology 10.1113/JP276283 figure A1 (CC BY): a single-panel legend that is
    # a glossary names no panel
    legend = "Custom mesoscope C, collimation lens; DC, dichroic mirror; F, filter; L, lens; M, mirror."
    assert labelled(legend) == []
    # panels listed so, each "letter, description", stay panels
    listed = "Left squamosals of A, UA 9629; B, FMNH PR 2512; and C, UA 9614, all in dorsal view."
    assert [labels for labels, _ in labelled(listed)] == [["a"], ["b"], ["c"]]


def test_a_comma_label_that_lost_its_period_fills_the_gap_before_a_capitalised_word() -> None:
    # eNeuro 10.1523/ENEURO.0087-18.2018 figure 1 (CC BY), shortened: the period before "B," is
    # missing ("… by the Cre recombinase B, Dark-field image …")
    caption = (
        "A, The mice were obtained by crossing strains that can be activated by the Cre recombinase B, "
        "Dark-field image of an unstained section showing the optic fiber. C, The CA1 area of the "
        "hippocampus."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c"]]
    assert got[1][1] == "B, Dark-field image of an unstained section showing the optic fiber."
    # no gap to fill: a name before a comma stays text ("vitamin D, Calcium")
    plain = "A, Serum levels of vitamin D, Calcium and phosphate. B, Bone density."
    assert [labels for labels, _ in labelled(plain)] == [["a"], ["b"]]


def test_bare_letters_listed_after_for_or_at_name_their_panels() -> None:
    # Microsystems & Nanoengineering 10.1038/s41378-019-0061-6 figure 3 (CC BY), shortened: "for b
    # plane 1, c plane 2, …" and "at f Tx center and g Tx periphery" name panels b-g
    caption = (
        "a The simulation model in HFSS. Magnetic flux distributions for b plane 1, c plane 2, d plane 3, "
        "and e plane 4. Induced magnetic flux while the Rx is positioned at f Tx center and g Tx periphery."
    )
    assert sorted({lab for labels, _ in labelled(caption) for lab in labels}) == list("abcdefg")
    # a letter after "for" that continues no panel list stays text
    plain = "(A) Cells were treated for d days with drug. (B) Controls."
    assert [labels for labels, _ in labelled(plain)] == [["a"], ["b"]]


def test_double_primed_sub_panel_ranges_are_markers() -> None:
    # Frontiers in Neural Circuits 10.3389/fncir.2019.00004 figure 1 (CC BY), shortened: "(C–C″)"
    # and "(D–D″)" open panels C and D
    caption = (
        "(B) Example section used for quantification. Scale bar 1 mm. (C–C″) Quantification in the VTA "
        "of GFP and TH overlap. (C) GFP fluorescence. (C′) TH staining. (C″) Specificity of GFP "
        "expression. (D–D″) Quantification in the SNc of GFP and TH overlap."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["b"], ["c"], ["d"]]
    assert got[0][1] == "(B) Example section used for quantification. Scale bar 1 mm."


def test_letters_listed_inside_one_sentence_are_a_captions_only_labels() -> None:
    # BMC Cancer 10.1186/s12885-021-07930-5 figure 6 (CC BY): the panels are named only in a list
    caption = (
        "Survival analysis to verify the prognostic value of the hub RBPs in BLCA. Kaplan–Meier survival "
        "curves of a GEMIN7, b OAS1, c APOBEC3H, d DARS2, e YTHDC1, and f RBMS3. P < 0.05 indicated "
        "statistical significance"
    )
    assert sorted({lab for labels, _ in labelled(caption) for lab in labels}) == list("abcdef")
    # BMC Genomics 10.1186/s12864-021-07450-3 figure 4 (CC BY): after a colon, one clause each
    two = "The predictions were based on DETs for: a premeiosis (onset of apospory initials) and b anthesis"
    assert labelled(two) == [(["a"], "a premeiosis (onset of apospory initials) and"), (["b"], "b anthesis")]
    # the article "a" with no list after it names no panel
    assert labelled("Expression of a GFP reporter in b cells of the islets.") == []


def test_the_first_of_letters_listed_in_a_sentence_fills_the_chains_head() -> None:
    # Malaria Journal 10.1186/s12936-021-03598-1 figure 5 (CC BY): "of a differentially expressed
    # nORF …; b …; and c …" ("b" and "c" open after semicolons; "a" follows "of")
    caption = (
        "Predicted structures of a differentially expressed nORF (MSTRG.2270.1) using I-TASSER; b "
        "differentially expressed intergenic nORF (MSTRG.4174.1) using QUARK; and c two AltORFs using QUARK"
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c"]]
    assert got[0][1] == "a differentially expressed nORF (MSTRG.2270.1) using I-TASSER;"


def test_a_key_naming_again_the_letters_of_the_panels_before_it_is_no_panel_list() -> None:
    # Journal of Clinical Medicine 10.3390/jcm8081234 figure 1 (CC BY): the spots' key after panels
    # A-C restarts at A
    caption = (
        "2-DE images of gels from three experimental groups. (A) Healthy pulp group. (B) Inflamed pulp "
        "group. (C) Traumatic pulp group. Green circles indicate the spots that were excised for mass "
        "spectrometry. A, type II keratin; B, annexin V chain A; C, mutant beta-actin; D, hemoglobin chain "
        "B; E, hemoglobin chain A; F, hemoglobin alpha 1-2 hybrid."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c"]]
    assert got[-1][1].endswith("F, hemoglobin alpha 1-2 hybrid.")
    # views listed so after an overview range are panels ("(A–C) Skull. A, dorsal; B, …")
    views = "(A–C) Skull of the holotype. A, dorsal view; B, ventral view; C, lateral view."
    assert [labels for labels, _ in labelled(views)][-3:] == [["a"], ["b"], ["c"]]


def test_a_bracketed_range_with_through_glued_to_its_bracket() -> None:
    # Virulence 10.1080/21505594.2020.1869384 figure 5 (CC BY), shortened: "(g)through (j)," with no
    # space before "through"
    caption = (
        "(a), CD4+ T cells were identified. (b), Isotype controls. (c) through (f), The representative "
        "results for each group. (g)through (j), The percentage of double-positive cells for each group."
    )
    got = labelled(caption)
    assert got[-1] == (list("ghij"), "(g)through (j), The percentage of double-positive cells for each group.")


def test_interleaved_inline_lists_fill_the_gap_to_the_next_marker() -> None:
    # Sci Rep PMC6545326 figure 7 (CC BY): "(c, e) … (d, f)" in one sentence, then "g, h"; the two
    # lists together name c to f, so "g, h" continues the chain after b
    caption = (
        "System validation using Immuno-histology. a In vivo stimulation using a wirelessly-powered "
        "neurostimulator on the V1 of an anaesthetized rat. b quantitative representation of c-Fos expressed "
        "cells using cell sorting. Fluorecent images of mCherry (c, e) as well as c-Fos (d, f) expressions of "
        "the control and stimulated cortices, respectively, obtained from the same cortical areas of the same "
        "transfected animal. g, h c-Fos expressions of the control and stimulated cortices, respectively, "
        "obtained from a non-transfected animal"
    )
    got = labelled(caption)
    assert sorted(got[2][0]) == list("cdef")
    assert got[2][1].startswith("Fluorecent images of mCherry (c, e)")
    assert got[3] == (["g", "h"], caption[caption.index("g, h c-Fos") :])
    # one inline list alone still fills only its own labels
    single = caption.replace(" as well as c-Fos (d, f) expressions", " expressions")
    assert labelled(single)[2][0] == ["c", "e"]


def test_an_a_after_the_article_the_opens_a_listed_run() -> None:
    # Climate Dynamics 10.1007/s00382-025-07591-1 figure 5 (CC BY): "for the a meteorological winter
    # … and b extended winter …" ("the a" is no English, so "a" is the first listed panel)
    caption = (
        "Multimodel mean end-of-century U850 response separately computed for the a meteorological winter "
        "(DJF) and b extended winter (NDJFMA) time averages. c, d The time of emergence of the U850 response "
        "evaluated for the time periods in (a) and (b), respectively."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c", "d"]]
    assert got[0][1] == "a meteorological winter (DJF) and"
    # the Latin "a priori" after "the" is no label
    assert labelled("Data of the a priori model and b cells.") == []


def test_a_restated_list_goes_on_after_and_with_a_list_of_labels() -> None:
    # Sci Rep 10.1038/s41598-019-40173-w figure 4 (CC BY), shortened: the overview "(b–d)" is restated
    # by "(b)" and, after "and", by the list "(c,d)"
    caption = (
        "Effect of OS on SC differentiation. (a) Representative confocal images of the SC-MN coculture are "
        "shown. Scale bar; 50 µm. (b–d) The levels of Krox20 or MBP were determined through western blot "
        "analysis. (b) Representative immunoblots and (c,d) quantification of Krox20 and MBP protein levels "
        "are shown. Graph shows means ± SEM from five independent experiments."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b", "c", "d"], ["b"], ["c", "d"]]
    assert got[2][1] == "(b) Representative immunoblots and"
    # an inline list not restating the overview stays in its sentence
    other = caption.replace("(c,d) quantification", "(e) quantification")
    assert [labels for labels, _ in labelled(other)][2] == ["b"]


def test_sentences_walking_through_an_overview_get_a_segment_each() -> None:
    # Nat Commun 10.1038/s41467-018-08265-9 figure 5 (CC BY), shortened: "a–e" opens an overview,
    # then one sentence per panel names it after its phrase, "(a), … (b)", "(c)", "(d)", "(e)"
    caption = (
        "Induction of anti-HA responses. a–e Mice were orally vaccinated with VLPs and the humoral response "
        "against HA was evaluated. Levels of total serum anti-HA IgG (a), IgG1 and IgG2a (b), n = 8 from two "
        "independent experiments. Levels of IgA anti-HA in fecal extracts and BAL, n = 6 (c). Levels of serum "
        "IgG anti-HA measured at different times post immunization, n = 6 (d). Levels of serum IgG anti-HA in "
        "animals immunized with a mixture, n = 6 (e). f Levels of serum IgG and fecal IgA in mice vaccinated "
        "via oral or subcutaneous route. Data were analyzed by one-way ANOVA (a–f)."
    )
    got = labelled(caption)
    # (the closing note names every panel: a segment of its own, as before)
    assert [labels for labels, _ in got] == [list("abcde"), ["a", "b"], ["c"], ["d"], ["e"], ["f"], list("abcdef")]
    assert got[0][1] == "a–e Mice were orally vaccinated with VLPs and the humoral response against HA was evaluated."
    assert got[2][1] == "Levels of IgA anti-HA in fecal extracts and BAL, n = 6 (c)."
    # not when a sentence names every panel of the overview (a note on all of them) ...
    note = caption.replace("Levels of IgA anti-HA in fecal extracts and BAL, n = 6 (c).", "Key as in (a–e).")
    assert [labels for labels, _ in labelled(note)][:2] == [list("abcde"), ["f"]]
    # ... nor when the overview's own sentence already names one of them
    own = caption.replace("humoral response against HA was evaluated", "humoral response (a) was evaluated")
    assert [labels for labels, _ in labelled(own)][:2] == [list("abcde"), ["f"]]


def test_an_a_before_an_article_opens_a_listed_run() -> None:
    # Plant Methods 10.1186/s13007-018-0380-x figure 2 (CC BY): "showing a the leaf number …, and b the
    # diameter …" ("a the" is no English, whatever word comes before it)
    caption = (
        "Wheat growth stage and root diameter in the hydroponic system. Box plots showing a the leaf number "
        "(leaf stage), number of tillers and the number of nodal roots developed on the hydroponic plants after "
        "30 days of cultivation, and b the diameter of each root type of the hydroponically-grown wheat plants "
        "(n = 10)."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"]]
    assert got[1][1].startswith("b the diameter of each root type")
    # the article "a" before an ordinary word still names nothing
    assert labelled("Box plots showing a leaf number and b cells.") == []


def test_letters_listed_in_a_sentence_win_over_numbered_items() -> None:
    # J Nanobiotechnology 10.1186/s12951-018-0408-4 figure 7 (CC BY): the panels are "a … e" listed
    # after a colon; "(1) … (6)" number the discs inside each panel
    caption = (
        "Schematic for the antimicrobial activity for the five bacterial strains: a Staphylococcus aureus, b "
        "Klebsiella pneumonia, c Pseudomonas aeruginosa, d Vibrio cholera, and e Proteus vulgaris. Numbers of 1 "
        "through 6 inside each strain denote: (1) nickel chloride, (2) control ciprofloxacin, (3) Desmodium "
        "gangeticum root extract, (4) negative control, (5) nickel NPs prepared by a green method, and (6) nickel "
        "NPs prepared by a chemical method [229]"
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c"], ["d"], ["e"]]
    assert got[0][1] == "a Staphylococcus aureus,"
    # alone, those numbered items of one sentence, each a short name, are still a list of discs, not panels
    numbers = caption[caption.index("Numbers of") :]
    assert labelled(numbers) == []


def test_a_restated_marker_is_a_step_of_an_overview_walk() -> None:
    # Front Pharmacol 10.3389/fphar.2017.00926 figure 3 (CC BY), shortened: "(E–I)" then "(E) …",
    # "Annexin V staining (F) and quantitation (G) …", "Western blots (H) and quantitation (I) …"
    caption = (
        "Orientin inhibits MI-induced apoptosis. (A–D) Data of the hearts (n = 6). (E–I) NRCMs were "
        "pretreated with orientin for 12 h, then exposed to hypoxia for 24 h. (E) MTT assays were performed "
        "to detect cell viability (n = 5). Annexin V staining (F) and quantitation (G) in the indicated group "
        "(n = 6). Representative Western blots (H) and quantitation (I) of Bax, Bcl-2, and C-caspase3 in the "
        "indicated group (n = 6)."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [list("abcd"), list("efghi"), ["e"], ["f", "g"], ["h", "i"]]
    assert got[3][1] == "Annexin V staining (F) and quantitation (G) in the indicated group (n = 6)."
    # a restated marker out of the walk's order stops it
    swapped = caption.replace("(E) MTT assays", "(F) MTT assays")
    assert [labels for labels, _ in labelled(swapped)][2:] == [["f"]]


def test_a_glossary_with_colons_names_no_panels() -> None:
    # BioMed Res Int 10.1155/2017/1047523 figure 1 (CC BY): "(a); glycerol (b); …" are the panels,
    # "Ep: epidermis; Der: dermis; V: blood vessels; inf: …; C: collagen." a glossary
    caption = (
        "The representative photomicrographs of the effect of the physiological serum (a); glycerol (b); U. "
        "dioica (c); and “CICAFLORA” (d) treatment on rat, showing epidermal and dermal architecture of wounds "
        "on the 11th day. HE-stained histological sections are 5 mm thick and photomicrographs are taken at 20x "
        "magnifications. Ep: epidermis; Der: dermis; V: blood vessels; inf: inflammatory cells; C: collagen."
    )
    assert [labels for labels, _ in labelled(caption)] == [["a"], ["b"], ["c"], ["d"]]
    # colon labels with semicolons that could all be panels stay panels
    panels = "Treatments. A: control; B: glycerol; C: extract."
    assert [labels for labels, _ in labelled(panels)] == [["a"], ["b"], ["c"]]


def test_subsp_does_not_end_a_sentence() -> None:
    # IJMS 10.3390/ijms19040952 figure 2 (CC BY): "Clavibacter michiganensis subsp. michiganensis"
    # (a sentence break after "subsp." had cut panel a's description in two)
    caption = (
        "In vitro biocontrol activity of Streptomyces spp.: (a) antimicrobial activity against Clavibacter "
        "michiganensis subsp. michiganensis, the causal agent of the tomato bacterial canker and (b) antifungal "
        "activity against Monilinia laxa, the causal agent of the brown rot of stone fruits."
    )
    got = labelled(caption)
    assert got[0] == (
        ["a"],
        "(a) antimicrobial activity against Clavibacter michiganensis subsp. michiganensis, the causal agent of "
        "the tomato bacterial canker and",
    )
    from pmcflow.enrich.text import is_abbreviation_stop

    assert is_abbreviation_stop("michiganensis subsp. michiganensis", 19)


def test_a_leading_label_that_lost_its_period_after_another_one() -> None:
    # BMC Complement Altern Med 10.1186/1472-6882-12-3 figure 4 (CC BY), shortened: "(E)" and "(F)"
    # both lost the period before them; "(F)" follows a sentence of panel E's description
    caption = (
        "Morphological changes of infected cells. (D) C. citratus with less than 50% inhibition (E) C. limon "
        "with no inhibition. Only cell fragments and debris were seen (F) P. citrosum with no inhibition. "
        "Granulation and cell densing were observed."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["d"], ["e"], ["f"]]
    assert got[1][1] == "(E) C. limon with no inhibition. Only cell fragments and debris were seen"
    assert got[2][1].startswith("(F) P. citrosum")


def test_an_a_after_with_opens_a_listed_run() -> None:
    # Microb Cell Fact 10.1186/s12934-018-1017-5 figure 1 (CC BY): "soil contaminated with a diesel oil and b waste
    # engine oil …", the panels named only so
    caption = (
        "Germination index values (% of control) for soil contaminated with a diesel oil and b waste engine oil "
        "with or without the addition of biosurfactant from endophytic B. pumilus 2A"
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"]]
    assert got[0][1] == "a diesel oil and"
    # "with a" before no listed "b" names nothing
    assert labelled("Cells treated with a mixture of drugs and then stained.") == []


def test_labels_before_phrases_with_no_separator_between_them_are_a_list() -> None:
    # Sci Rep 10.1038/s41598-018-37810-1 figure 2 (CC BY), shortened: "(a) cultured in the absence of
    # host extract (b) cultured in the presence …", the phrase of (a) running into (b)
    caption = (
        "2-DE CBB stained gel of mycelial proteins from T. indica TiK isolate (a) cultured in the absence of "
        "host extract (b) cultured in the presence of host extract. Proteins were separated on 7 cm strips."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"]]
    assert got[0][1] == "(a) cultured in the absence of host extract"
    # joined by "and", the pair stays one description, as before
    joined = "Levels of (A) IL-6 and (B) TNF protein in serum were measured."
    assert [labels for labels, _ in labelled(joined)] == [["a", "b"]]


def test_labels_before_prepositional_phrases_in_a_comma_list_are_each_a_segment() -> None:
    # Materials 10.3390/ma11081273 figure 6 (CC BY): "… BiOBr-G (a) with time, (b) with different
    # concentrations …", each label opening a phrase that starts with a preposition
    caption = (
        "Photodegradation efficiency of MO by BiOBr-C and BiOBr-G (a) with time, (b) with different "
        "concentrations of BiOBr-C, (c) with different concentrations of BiOBr-G, (d) Effects of scavengers "
        "on MO degradation using BiOBr-C."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c"], ["d"]]
    assert got[0][1] == "(a) with time,"
    # labels after their phrases, each phrase opening with a preposition, stay one description
    after = "Expression of Twist in dorsal (A), in ventral (B) and in lateral (C) views of the embryo."
    assert [labels for labels, _ in labelled(after)] == [["a", "b", "c"]]


def test_labels_with_notes_in_one_bracket_after_a_phrase_label_that_phrase() -> None:
    # Front Pharmacol 10.3389/fphar.2017.00926 figure 7 (CC BY), shortened: "(B, representative image; C, quantitation
    # result)" names two panels of its phrase; "C, quantitation" opens no segment
    caption = (
        "eNOS blocking abolishes the protective effects of orientin in vivo. (A) Kaplan–Meier survival "
        "analysis of mice in the indicated group 4 weeks after MI. H&E staining of mice heart in the "
        "indicated group after 4 weeks of MI (B, representative image; C, quantitation result). "
        "Echocardiographic (D) and hemodynamic (E) results for mice in the four groups."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b", "c"], ["d", "e"]]
    assert got[1][1].startswith("H&E staining of mice heart")
    # one label with its note is a trailing label, as before
    one = "(A) Survival of mice. H&E staining of mice heart (B, representative image). (C) Quantitation."
    assert [labels for labels, _ in labelled(one)] == [["a"], ["b"], ["c"]]


def test_a_glossary_after_the_panels_does_not_take_the_first_label_after_the_title() -> None:
    # Rice 10.1186/s12284-018-0260-z figure 5 (CC BY), shortened: the glossary "mkk3, MKK3 knockout
    # plant; mapk7, …" closes the caption; "a," after the title's period opens panel a, not a term
    caption = (
        "Germination phenotype of knockout progenies. a, At 23 DAH, seeds were collected from different "
        "knockout progenies. b, At 30 DAH, seeds were collected from homozygous knockout progenies. c, Time "
        "course of germination of homozygous seeds. mkk3, MKK3 knockout plant; mapk7, MAPK7 knockout plant; "
        "mapk14, MAPK14 knockout plant; P, homozygous positive; H, heterozygous"
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c"]]
    assert got[0][1].startswith("a, At 23 DAH")
    # a glossary whose first term follows a lead in its own sentence is still a glossary
    lead = "Setup. Custom mesoscope C, collimation lens; DC, dichroic mirror; DMD, micromirror device; F, filter"
    assert labelled(lead) == []


def test_the_word_panel_inside_a_label_bracket_is_read_through() -> None:
    # Sci Rep 10.1038/s41598-017-09072-w figure 1 (CC BY), crop science dev split: "(panel a)" and "(panel b)" label
    # their phrases like "(a)" and "(b)"
    caption = (
        "Mean (±SEM) probabilities of cooperation after the birds had received payoffs T, R, P and S, in "
        "self-controlled (panel a) and impulsive (panel b) birds. In both cases, the black and grey columns "
        "correspond to males and females, respectively."
    )
    assert [labels for labels, _ in labelled(caption)] == [["a", "b"]]
    # before its phrase, in a list: a segment each
    listed = "A schematic illustrating: (panel a) the assessment; (panel b) the protocol; and (panel c) the ergometer."
    assert [labels for labels, _ in labelled(listed)] == [["a"], ["b"], ["c"]]
    # "panel" with a word that is no label is still no label
    assert labelled("Cells were imaged (panel overview) at 10x.") == []


def test_a_sentence_ending_in_a_colon_opens_the_segment_of_the_label_after_it() -> None:
    # Sci Rep 10.1038/s41598-020-70174-z figure 3 (CC BY), shortened: "The levels of SNCA oligomers
    # were determined in:" introduces (E), not the end of (D)'s description
    caption = (
        "Neuropathological hallmarks in PD. The levels of Aβ oligomers were determined in: (A) SNpc; (B) "
        "Hippocampus and (C) Cortex brain tissue homogenates. (D) Densitometric analysis of the levels of Aβ "
        "oligomers. The levels of SNCA oligomers were determined in: (E) SNpc; (F) Hippocampus."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c"], ["d"], ["e"], ["f"]]
    assert got[3][1] == "(D) Densitometric analysis of the levels of Aβ oligomers."
    assert got[4][1] == "The levels of SNCA oligomers were determined in: (E) SNpc;"
    # a clause after a semicolon is no sentence of its own: it stays with the panel before
    clause = "(A) Wings. Genotypes. For most genotypes see file 1; for the remainder: (B) UAS-GFP/w."
    assert labelled(clause)[0][1] == "(A) Wings. Genotypes. For most genotypes see file 1; for the remainder:"


def test_a_mutant_name_opening_with_the_increment_sign_is_a_phrase_after_its_label() -> None:
    # MicrobiologyOpen 10.1002/mbo3.593 figure 4 (CC BY), shortened: "(b) \u2206disA" is a label before
    # its phrase (U+2206, not the Greek letter, which is a word character already)
    caption = (
        "Germination and outgrowth of spores of different B. subtilis strains with and without H2O2. "
        "Dormant spores of (a) wild\u2010type, (b) \u2206disA, (c) \u2206uvrA, and (d) \u2206disA uvrA strains "
        "were heat shocked and germinated."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c"], ["d"]]
    assert got[1][1] == "(b) \u2206disA,"


def test_letters_listed_after_as_and_or_open_their_segments() -> None:
    # Plant Methods 10.1186/s13007-018-0380-x figure 4 (CC BY), shortened: "presented as a …, or b …"
    caption = (
        "Malate efflux from the apices of various root types. Data are presented as a malate efflux per root "
        "apex, or b malate efflux normalized to the tissue surface area. Data are mean ± SE (n = 3–10)."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"]]
    assert got[0][1] == "a malate efflux per root apex, or"
    # "as a" with no listed "b" after it names nothing
    assert labelled("Data are presented as a percentage of the control, or as raw counts.") == []


def test_clauses_before_a_trailing_label_stop_at_the_clause_of_the_label_before() -> None:
    # Sci Rep 10.1038/s41598-018-37810-1 figure 3 (CC BY): "(b) … TargetP;" is panel b's clause, right
    # after its label; the clause after the semicolon, closed by "(c)", "(d)", "(e)", is theirs
    caption = (
        "Functional annotation of the proteins identified from TiK isolate mycelial proteome (a) Classification "
        "of the identified proteins through COG classification (b) Subcelluar localization of the identified "
        "proteins using TargetP; Gene Ontology based classification of the identified protein into distinct "
        "categories as cellular component (c), molecular function (d) and biological process (e)."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c", "d", "e"]]
    assert got[1][1] == "(b) Subcelluar localization of the identified proteins using TargetP;"
    # a clause that names no panel still goes with the label that closes its sentence
    back = "(A) Map of the site. Locations of new isolates are shown in red; locations of previous ones in black (B)."
    assert labelled(back)[1][1].startswith("Locations of new isolates")


def test_a_stray_comma_after_a_label_inside_a_list_of_labels_before_phrases() -> None:
    # Nat Commun 10.1038/s41467-025-57371-y figure 1 (CC BY), shortened: "(c), Atlantic …" between
    # "(b) …," and "(d) …" is the list's third item, not a label after "temperatures"
    caption = (
        "Historical and future projections of global climate. Time-series of the global annual mean (a) "
        "atmospheric CO2 concentrations, (b) surface air temperatures, (c), Atlantic Meridional Overturning "
        "Circulation strengths, (d) ocean CO2 uptakes, and (e) sea-ice area."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c"], ["d"], ["e"]]
    assert got[2][1] == "(c), Atlantic Meridional Overturning Circulation strengths,"
    # labels after their phrases, with commas, stay one description
    after = "Expression in dorsal (A), ventral (B), lateral (C) and anterior (D) views of the embryo."
    assert [labels for labels, _ in labelled(after)] == [["a", "b", "c", "d"]]


def test_a_semicolon_inside_a_name_opens_no_label() -> None:
    # Rice 10.1186/s12284-018-0225-2 figure 1 (CC BY), shortened: "gs1;2: grey column" is the mutant's
    # name, not a clause that opens with a label "2:"
    caption = (
        "qPCR analysis of OsASs in the basal portions of wild-type and gs1;2 mutant shoots. qPCR analysis of "
        "OsAS1 and OsAS2 genes (a) and a control Actin1 (b) in shoots of wild-type plants (WT: black column) and "
        "gs1;2 mutants (gs1;2: grey column) were performed. Mean values with SE are shown."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a", "b"]]
    # after a semicolon and a space, a label still opens its clause
    spaced = "Skull of Beelzebufo. (A) Dorsal view; (B) ventral view."
    assert [labels for labels, _ in labelled(spaced)] == [["a"], ["b"]]


def test_a_bracket_of_labels_each_for_its_item_labels_its_phrase() -> None:
    # Front Plant Sci 10.3389/fpls.2018.00673 figure 4 (CC BY), shortened: the panels named in one
    # bracket, "A for γ-gliadin, B for δ-gliadin, …", after the phrase they all belong to
    caption = (
        "Expression profiles of different groups of prolamin genes (A for γ-gliadin, B for δ-gliadin, C for "
        "ω-gliadin, and D for LMW-GS). Transcriptome datasets were downloaded from the published result."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a", "b", "c", "d"]]
    assert got[0][1].startswith("Expression profiles of different groups")
    # one label "for" an item is no such list
    assert labelled("Cells were imaged (A for all samples) at 10x.") == []


def test_a_note_then_its_panel_after_a_semicolon_in_one_bracket() -> None:
    # Front Plant Sci 10.3389/fpls.2018.00636 figure 2 (CC BY), shortened: "(μM g−1 FW; A)" is the
    # unit, then the panel of its phrase; "A)" inside opens no segment
    caption = (
        "Variation in ROS signaling during spot blotch infection of wheat germplasm. Heatmaps show the H2O2 "
        "levels (μM g−1 FW; A), SOD activity (Unit g−1 FW; C) and MDA content (μmol g−1 FW; E) in the wheat "
        "CRP lines, at various time intervals, upon spot blotch infection were analyzed. A strong negative "
        "correlation (p ≤ 0.05) of AUDPC to spot blotch-induced H2O2 (B) and SOD (D) contents was observed, "
        "whereas MDA (F) was positively correlated to disease progression."
    )
    got = labelled(caption)
    assert got[0] == (
        ["a", "c", "e"],
        "Heatmaps show the H2O2 levels (μM g−1 FW; A), SOD activity (Unit g−1 FW; C) and MDA content (μmol g−1 "
        "FW; E) in the wheat CRP lines, at various time intervals, upon spot blotch infection were analyzed.",
    )
    # "Kaplan–Meier curves (log-rank test; B)": any note, the same
    one = "(A) Survival of mice. Kaplan–Meier curves of the groups (log-rank test; B). (C) Weights."
    assert [labels for labels, _ in labelled(one)] == [["a"], ["b"], ["c"]]
    # Nat Commun 10.1038/s41467-024-54756-3 figure 8 (CC BY), shortened: the semicolons inside the brackets
    # end no sentence, so the sentence naming all eight panels is one segment of all of them
    water = (
        "Water properties. A section of salinity (psu; a, e), potential temperature (°C; b, f), potential "
        "density (kg m−3; c, g) and zonal velocity (m s−1; d, h). a–d Control simulation. e–h Anomalies."
    )
    got = labelled(water)
    assert sorted(got[0][0]) == list("abcdefgh") and got[0][1].startswith("A section of salinity")
    # at a sentence start such a bracket opens its panels' segment: "(Top; A-D) Profiles of …"
    top = "Treatment. (Top; A-D) Profiles of cancer cells. (Bottom; A-D) Profiles of chemoattractants. (E) Counts."
    assert [labels for labels, _ in labelled(top)] == [list("abcd"), list("abcd"), ["e"]]


def test_letters_listed_each_before_a_quantity_open_their_segments() -> None:
    # J Nanobiotechnology 10.1186/s12951-018-0408-4 figure 9 (CC BY), shortened: "temperatures a 30 °C, b 50 °C,
    # and c 70 °C", Nature-style letters each before its quantity
    caption = (
        "UV-visible spectra illustrating Ag NP-mediated catalytic reduction of 4-NP to 4-AP at three different "
        "temperatures a 30 °C, b 50 °C, and c 70 °C. Reduction in the absorption intensity indicates 4-AP."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c"]]
    assert got[0][1] == "a 30 °C,"
    # "a" before a number with no "b" listed after it is the article
    assert labelled("Cells were kept at a 30 °C incubator, then imaged.") == []


def test_panels_named_after_in_graph_are_the_captions_labels_when_it_has_no_other() -> None:
    # Front Physiol 10.3389/fphys.2018.01632 figure 2 (CC BY), shortened: "presented in
    # Graph A, …; …, presented in Graph B, …", one clause per panel
    caption = (
        "Effort test T0, presented in Graph A, performed after the adaptation week; T7 effort test, presented in "
        "Graph B, performed after 7 days of experiment; T-14 exercise test, presented in Graph C, performed after "
        "14 days of experiment."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c"]]
    assert got[1][1] == "T7 effort test, presented in Graph B, performed after 7 days of experiment;"
    # in a labelled caption "in panel A" refers back to a panel: the chain stays the caption's own
    back = "(A) Survival of mice. (B) Weights of the mice shown in panel A, at day 7."
    assert [labels for labels, _ in labelled(back)] == [["a"], ["b"]]
    # one such mention alone names no panels
    assert labelled("Tests were done as shown in Graph A of the earlier study.") == []


def test_a_letter_after_vs_is_compared_not_a_lost_label() -> None:
    # Front Plant Sci 10.3389/fpls.2018.01755 figure 3 (CC BY): "Sp. LK vs. C. LK" compares with the
    # control; the "C." after "vs." is no panel C that lost its period
    caption = (
        "Gene Ontology (GO) classifications and amount of DEGs in wheat root response to heterogeneous vs. "
        "homogeneous K environments. (A) Functional category distributions of main up-regulated genes in Sp. NK "
        "vs. C. NK. (B) Functional category distributions of main down-regulated genes in Sp. LK vs. C. LK. All "
        "microarray experiments were performed in three biological replicates."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"]]
    assert got[1][1].endswith("vs. C. LK. All microarray experiments were performed in three biological replicates.")
    # a lost period before a panel letter still opens it ("… in S1A Fig. C. Motion …")
    lost = "(A) Tracks of cells. (B) Speeds as shown in S1A Fig. C. Motion patterns of the cells."
    assert [labels for labels, _ in labelled(lost)] == [["a"], ["b"], ["c"]]


def test_a_range_to_a_primed_sub_panel_names_every_panel_between() -> None:
    # Life Sci Alliance 10.26508/lsa.201800172 figure 2 (CC BY), shortened: "(A–C′)" runs from A to C′,
    # so it names B too
    caption = (
        "R347P is functionally unresponsive to VX-770. (A) Nontreated organoids showed a low amount of swelling. "
        "(B) The R117H/F508del showed residual function. (C) R334W/Mixed allele variants had a lower response. "
        "(A–C′) Data represent average ± SD of triplicate measurements of organoids from three distinct patients."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c"], ["a", "b", "c"]]
    assert got[3][1].startswith("(A–C′) Data represent")


def test_a_range_with_a_unicode_hyphen_leads_its_segment() -> None:
    # Environ Microbiol 10.1111/1462-2920.14620 figure 1 (CC BY), shortened: "A‐C." (U+2010 hyphen) opens
    # its panels' description like "A-C."; read as a label after its phrase, the segment was cut right
    # after the marker and the description lost its panels
    caption = (
        "A‐C. Volcano plots of normalized LC–MS/MS spectral counts comparing A. borkumensis protein expression "
        "during growth on a linear alkane (n‐C14), a branched alkane (Pristane) and a non‐hydrocarbon control "
        "(Pyruvate). Data points above horizontal dashed line represent P‐values below 0.05. Vertical dashed "
        "lines represent a two‐fold change. D. Principle component analysis of replicate A. borkumensis "
        "proteomes (including normalized spectral counts of 1309 proteins) on growth substrates n‐C14, pristane "
        "and pyruvate."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a", "b", "c"], ["d"]]
    assert got[0][1].startswith("A‐C. Volcano plots") and got[0][1].endswith("a two‐fold change.")


def test_letters_listed_together_inside_a_sentence_open_their_segment() -> None:
    # BMC Genomics 10.1186/s12864-021-07450-3 figure 7 (CC BY): "c, d" after a comma, two panels of one
    # description listed inside the sentence of b
    caption = (
        "Expression patterns of apomixis-related transcripts across reproductive developmental stages from "
        "premeiosis to anthesis. a Argonaute 104 (TRpn_185717). b Gibberellin receptor GID1 (TRpn_57024), c, d "
        "ORC3b (TRpn_33086, TRpn_96407). e, f APOSTART2 (TRpn_175767, TRpn_52614). Repd: reproductive mode."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c", "d"], ["e", "f"]]
    assert got[2][1] == "c, d ORC3b (TRpn_33086, TRpn_96407)."
    # Nat Commun 10.1038/s41467-024-54903-w figure 4 (CC BY), shortened: a range "h–j" after "and"
    # continues "d–g" and opens its own segment
    ranged = (
        "Interdecadal sea level pressure anomalies. a, b, d–g Sea level pressure anomalies in December-May for "
        "each decade derived from ERA5 and c, h–j the implied rates of interdecadal change in the residual AMOC "
        "component derived from the composite analysis."
    )
    got = labelled(ranged)
    assert got[-1][0] == ["h", "i", "j"] and got[-1][1].startswith("h–j the implied rates")
    # a letter after "as" stays inside its sentence ("c, g as in b, f, …" is no list of its own)
    assert [labels for labels, _ in labelled("a Traces. b, c Means, as in a.")] == [["a"], ["b", "c"]]


def test_a_bracket_of_letters_each_before_its_item_labels_the_phrase() -> None:
    # Environ Sci Pollut Res 10.1007/s11356-018-2723-6 figure 5 (CC BY), shortened: "(a first generation,
    # b second generation, c third generation)", one letter per panel, the caption's only labels
    caption = (
        "Redundancy analysis of element levels in Triticum aestivum L. aboveground parts grown on soil "
        "contaminated with petroleum-derived substances and aphid traits (a first generation, b second "
        "generation, c third generation). Symbols as in Fig. 1"
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a", "b", "c"]]
    # the article "a" in a bracket of notes names no panel
    assert labelled("Mice were treated (a single dose, twice daily) for a week.") == []


def test_the_first_and_last_panels_of_a_series_name_the_panels_between() -> None:
    # Front Integr Neurosci 10.3389/fnint.2019.00018 figure 2 (CC BY): "from 2014 (A) to 2018 (E)", the
    # series' first and last panels, so B to D too
    caption = (
        "The 15-most biased terms for high- and medium-impact journals on a yearly basis, from 2014 (A) to 2018 "
        "(E). Common English stop words and common terms of research/publication were removed."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a", "b", "c", "d", "e"]]
    # two panels compared without "from" stay two panels
    two = "Expression in 2014 (A) compared to 2018 (B). Means are shown."
    assert sorted(lab for labels, _ in labelled(two) for lab in labels) == ["a", "b"]


def test_a_glossary_of_letter_number_terms_past_a_dozen_names_no_panel() -> None:
    # Molecules 10.3390/molecules24020258 figure 4 (CC BY), shortened: "C20, eicosanol; C21, …" are chain
    # lengths, not sub-panels of a panel C (sub-panels are numbered from 1)
    caption = (
        "Hierarchical clustering analysis (HCA) of compound data from the nine Mentha spp. Each square indicates "
        "the Pearson's correlation coefficient of a pair of compounds. C20, eicosanol; C21, heneicosanol; C22, "
        "docosanol; C23, tricosanol; C24, tetracosanol; C26, hexacosanol."
    )
    assert labelled(caption) == []
    # sub-panels listed so still open their panel's segment
    subs = "Cell types. A1, neurons; A2, glia; A3, astrocytes. B, counts of each type."
    assert [labels for labels, _ in labelled(subs)] == [["a"], ["b"]]


def test_numbers_after_their_phrase_are_items_not_panels() -> None:
    # Sci Rep 10.1038/s41598-017-15724-8 figure 11 and Nanomaterials 10.3390/nano9010100 figure 2 (CC BY):
    # treatments and samples numbered after their names, not panels
    zones = (
        "Zone of inhibition observed when gram-negative bacterial strains are treated with Tutsi extract (1), "
        "AgNO3 (2), neat quercetin (3), AgNPs (Tulsi) (4) and AgNPs (quercetin) (5)."
    )
    assert labelled(zones) == []
    isotherm = (
        "Nitrogen adsorption/desorption isotherm of magnetic lignite (1) and magnetic char (2). Solid datapoints "
        "in the isotherm correspond to the data from adsorption isotherm."
    )
    assert labelled(isotherm) == []
    # Molecules 10.3390/molecules21081063 figure 1 (CC BY), shortened: numbers opening their sentences
    # are the panels
    acne = (
        "Pathogenic factors contributing to the development of acne: (1) The normal pilosebaceous unit. (2) The "
        "clogging of the pore is aggravated by hyperkeratinization. (3) Inflammatory infiltrates cause the "
        "development of inflammatory acne forms."
    )
    assert [labels for labels, _ in labelled(acne)] == [["1"], ["2"], ["3"]]
    # letters after their phrase still label it
    assert [labels for labels, _ in labelled("Isotherms of lignite (a) and char (b).")] == [["a", "b"]]


def test_numbers_each_before_a_short_item_of_one_sentence_are_a_list_not_panels() -> None:
    # Plant Methods 10.1186/s13007-021-00757-y figure 7 (CC BY): the parts of one schematic
    parts = (
        "Schematic representation of the monitoring system: (1) Faraday cage, (2) coil probe, (3) supporter, (4) "
        "coaxial cable and N-type connectors, (5) network analyzer, (6) PC and control software, (7) tap water, "
        "(8) peristaltic pump, (9) experimental plant (Ficus benghalensis), and (10) LED light"
    )
    assert labelled(parts) == []
    # Emerging Microbes & Infections 10.1080/22221751.2020.1870413 figure 4 (CC BY), shortened: the lanes'
    # steps are numbered; the panels are the letters
    lanes = (
        "Co-immunoprecipitation of PcATP2-GFP-BAD with PcCdc50B-His or PcCdc50A-His. Lanes 1–4 correspond to the "
        "different steps of the assay with membranes co-expressing PcATP2-GFP-BAD and PcCdc50B-His (A) or "
        "PcCdc50A-His (B): (1) input, detergent-solubilized membranes, (2) flow-through or non-bound protein "
        "fraction, (3) washings, and (4) elution."
    )
    assert sorted(lab for labels, _ in labelled(lanes) for lab in labels) == ["a", "b"]
    # numbered descriptions of their own, even in one sentence, are panels
    panels = (
        "Roadkill during the study period: (1) seasonal and monthly distribution of mammal roadkill in both "
        "parks, (2) seasonal and monthly distribution of reptile roadkill in both parks."
    )
    assert [labels for labels, _ in labelled(panels)] == [["1"], ["2"]]


def test_letters_out_of_the_chains_order_label_their_phrase_when_no_segment_names_them() -> None:
    # Sci Rep 10.1038/s41598-019-51456-7 figure 3 (CC BY), shortened: "(a) … (c)" in one sentence, "(b) …
    # (d)" in the next; the chain only increases, so b and d had been lost
    caption = (
        "The correlation of the expression levels of DARPP-32 and CaN. The expression levels of DARPP-32 and CaN "
        "in PFC (a) and NAc (c) of control group (closed circles) and patients with schizophrenia (open circles) "
        "are shown by scatter plots. The ratio of DARPP-32 and CaN expression of each sample were compared between "
        "diagnostic groups in PFC (b) and NAc (d). Error bars indicate SEM."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a", "c"], ["b", "d"]]
    assert got[1][1].startswith("The ratio of DARPP-32")
    # Front Pharmacol 10.3389/fphar.2017.00926 figure 6 (CC BY), shortened: D and E after the pairs
    pairs = (
        "The protective effects of orientin. (A,F) MTT detected the cell viability in the indicated group. (B,G) "
        "Annexin V-positive cells in the indicated group. (C,H) The ROS was detected and quantified by DCFH-DA. "
        "The levels of SOD (D), NADPH oxidase (E) activity in the indicated group (n = 6)."
    )
    assert [labels for labels, _ in labelled(pairs)][-1] == ["d", "e"]
    # a pointer to a panel names no description of its own
    pointer = "Micrographs. (A) Wild type and (C) mutant. (C) An enlarged image of the area indicated in (B)."
    assert "b" not in {lab for labels, _ in labelled(pointer) for lab in labels}
    # J Exp Bot 10.1093/jxb/ery297 figure 3 (CC BY), shortened: "(B, C)" names B, which no other marker does
    glup6 = (
        "Transmission electron micrographs depicting the ER in wild-type and glup6 endosperm. (A) Wild-type TC65 "
        "and (B, C) glup6. (C) Shows an enlarged image of the area indicated in (B). Scale bars are 2 μm."
    )
    got = labelled(glup6)
    assert [labels for labels, _ in got] == [["a"], ["b", "c"], ["c"]]
    assert got[1][1] == "(B, C) glup6."


def test_in_panel_and_a_label_the_sentence_before_described_opens_a_segment() -> None:
    # Genome Biol Evol 10.1093/gbe/evy207 figure 1 (CC BY), shortened: "In panel (A), …" reads as
    # "In (A), …" does; both sentences had been glued to the first one
    caption = (
        "Viral genomic structure of eRTBVL-D segments in the Oryza sativa genome (A) and ortholog "
        "presence/absence in the genus Oryza (B). In panel (A), the circular viral genome is displayed at the "
        "top with open reading frames (ORFs) represented with arrows. In panel (B), the known phylogeny of the "
        "genus Oryza is presented at the top. The table summarizes the pattern of ortholog presence/absence."
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a", "b"], ["a"], ["b"]]
    assert got[1][1].startswith("In panel (A), the circular") and got[2][1].startswith("In panel (B), the known")
    # a panel the sentence before does not describe is pointed to, as with "In (A),"
    pointer = (
        "Reporter assays. (A) Cells on coverslips. (B) Nuclear translocation. (C–E) Cells were transfected "
        "with a reporter plasmid. In panel (A), cells were mock-transfected 8 h later. (F) ISRE reporter."
    )
    assert [labels for labels, _ in labelled(pointer, "Reporter assays.")] == [["a"], ["b"], ["c", "d", "e"], ["f"]]


def test_a_lead_sentence_listing_bare_letters_describes_those_panels() -> None:
    # Clin Exp Nephrol 10.1007/s10157-016-1302-8 figure 1 (CC BY): "via a stool and b urine" names
    # panels a and b as "(a) … (b)" would; the sentence had been shared text
    caption = (
        "Excretion of sodium via a stool and b urine in healthy Japanese volunteers treated with tenapanor or "
        "placebo. Data are shown as mean + SD; corresponding values given above the bars show mean (SD). a daily "
        "mean over 7 days. b combined data from participants receiving single (n = 2) and repeated (n = 12) doses "
        "(one individual in the placebo group was excluded from stool analyses owing to a lack of any "
        "post-baseline samples). SD standard deviation"
    )
    got = labelled(caption)
    assert [labels for labels, _ in got] == [["a", "b"], ["a"], ["b"]]
    assert got[0][1].startswith("Excretion of sodium via a stool") and got[1][1] == "a daily mean over 7 days."
    # an article "a" with no "b" after it lists nothing
    single = "Excretion of sodium via a stool in volunteers. a Daily mean over 7 days. b Combined data."
    got = split_caption(single)
    assert [s.labels for s in got] == [[], ["a"], ["b"]]
    assert got[0].text == "Excretion of sodium via a stool in volunteers."


def test_the_last_item_of_a_comma_list_cut_per_item_is_cut_after_its_conjunction() -> None:
    # Arthritis Res Ther 10.1186/s13075-015-0825-9 figure 3 (CC BY), shortened: the list is cut at every
    # comma item, so "and SF-36 domain scores (g)" is its last item, not part of panel f's
    caption = (
        "Percentage of patients with improvements at month 3. Patient Global Assessment of Disease Activity "
        "(PtGA) (a), Patient Global Assessment of Pain (Pain) (b), Health Assessment Questionnaire-Disability "
        "Index (HAQ-DI) (c), Functional Assessment of Chronic Illness Therapy-Fatigue (FACIT-F) (f) and SF-36 "
        "domain scores (g); *p <0.05 vs placebo."
    )
    got = labelled(caption, "Percentage of patients with improvements at month 3.")
    assert [labels for labels, _ in got] == [["a"], ["b"], ["c"], ["f"], ["g"]]
    assert got[4][1].startswith("and SF-36 domain scores (g);")
    # a list of short items is one description: its last item stays with it
    short = "Growth at 50 (b), 100 (c), 150 (d) and 200 μg/ml (e) of silver nanoparticles."
    assert [labels for labels, _ in labelled(short)] == [["b", "c", "d", "e"]]


def test_an_inline_list_interleaved_with_the_next_marker_opens_the_chain() -> None:
    # BMC Genomics 10.1186/s12864-018-5088-9 figure 4 (CC BY): "(a, d)" inside the lead sentence opens
    # the grid "(a, d) … (b, e) … (c, f)"; the whole lead had been read as panel a and d's description
    caption = (
        "Validation and expression of selected miRNAs and their target PPR genes. Relative expression levels of "
        "three PPR genes as the targets of miRNAs in rice shoot, seeding, P3 and P4, (a, d) osa-miR1862d (a) and "
        "its target (LOC_Os03g17634)(d). (b, e) osa-miR396a-5p (b) and its target (LOC_Os07g40820) (e). (c, f) "
        "osa-miR444b.2 and its target (LOC_Os04g51350)"
    )
    got = split_caption(caption)
    assert [s.labels for s in got] == [[], ["a", "d"], ["b", "e"], ["c", "f"]]
    assert got[0].text.endswith("in rice shoot, seeding, P3 and P4,")
    assert got[1].text.startswith("(a, d) osa-miR1862d")
    # a range that shares panels with the next marker's sub-panels is no such list
    ranges = (
        "Expression of cact1 and cact3. Expression of cact1 (A–D) and cact3 (E–H) are monitored by ISH. "
        "(A′–D′, E′, H′) SYTOX Green staining shows nuclear density. (A, B) cact1 expression is initiated evenly."
    )
    assert labelled(ranges, "Expression of cact1 and cact3.")[0] == (
        list("abcdefgh"),
        "Expression of cact1 (A–D) and cact3 (E–H) are monitored by ISH.",
    )


def test_labels_after_a_semicolon_inside_brackets_are_a_note_not_restated_panels() -> None:
    # Nat Commun 10.1038/s41467-017-01031-3 figure 5 (CC BY), shortened: "h:" after the bracketed
    # "f: p = 0.2;" had opened a segment of its own, cutting the note off panels e–h
    caption = (
        "Digital focusing. c Axial photocurrent resolution. d Quantification of the FWHM (n = 5 cells). "
        "e−h As in a−d, but spike probability recorded in mouse brain slices via current clamp "
        "(f: p = 0.2; h: p = 0.17, n = 3 neurons)"
    )
    got = labelled(caption, "Digital focusing.")
    assert [labels for labels, _ in got] == [["c"], ["d"], ["e", "f", "g", "h"]]
    assert got[-1][1].endswith("(f: p = 0.2; h: p = 0.17, n = 3 neurons)")
    # Nat Commun 10.1038/s41467-019-10418-3 figure 5 (CC BY), shortened from panel a on: "m, n:" inside
    # the statistics note of k–o
    stats = (
        "MOSD stimulation of C7 nerve bundle. a Schematic of experimental set-up. b Immunofluorescence staining "
        "of C7 nerve. c Expression of EYFP in C7 nerve. d Monte-Carlo simulation of mini-LED light intensity. "
        "e–h Illustration of MOSD implantation process on C7 nerve. i Representative electromyogram from "
        "Triceps. j MOSD (top right) with mini-LED (bottom) representative response pattern. k–o Representive "
        "mouse showed selectivity for PM, Tr, EC, FC, and ED by MOSD (n = 4 trials. k, l, o- Friedman’s ANOVA "
        "on Ranks with Tukey post hoc; m, n: One way ANOVA with Tukey post hoc, *P < 0.05, **P < 0.01, ***P < "
        "0.001). p The same mouse showed selectivity in only one muscle by SS."
    )
    got = labelled(stats, "MOSD stimulation of C7 nerve bundle.")
    assert [labels for labels, _ in got][-2:] == [list("klmno"), ["p"]]
    assert got[-2][1].endswith("***P < 0.001).")


def test_a_semicolon_glued_to_the_next_word_ends_no_clause() -> None:
    # Rice 10.1186/s12284-018-0225-2 figure 2 (CC BY), shortened: "gs1;2" is the mutant's name; the
    # clause that "(b, e, h)" closes does not start at "2 mutants"
    caption = (
        "Longitudinal sections of shoots were prepared from the wild-type rice (WT) (a, c, d, f, g, i) and from "
        "gs1;2 mutants (gs1;2) (b, e, h) grown hydroponically. A sense probe was hybridized to WT sections "
        "(c, f, i) as a negative control."
    )
    got = labelled(caption)
    assert not any(text.endswith("gs1;") or text.startswith("2 mutants") for _, text in got)
    assert got[0][1].startswith("Longitudinal sections") and "gs1;2 mutants (gs1;2) (b, e, h)" in got[0][1]
    # a semicolon and a space still end a clause
    spaced = "Skull of Beelzebufo. (A) Dorsal view; (B) ventral view."
    assert [labels for labels, _ in labelled(spaced)] == [["a"], ["b"]]


def test_a_letter_with_a_number_past_a_dozen_is_no_sub_panel() -> None:
    # Molecules 10.3390/molecules24020258 figure 6 (CC BY): after panels A and B, "C28, octacosanol; C30,
    # triacontanol" are chain lengths (two of them: too few for a glossary), not sub-panels of a panel C
    caption = (
        "The influence of variables used to create DPPH free radical scavenging (A) and the reducing power (B) "
        "predictor for Mentha spp. C26, hexacosanol; C28, octacosanol; C30, triacontanol."
    )
    assert [labels for labels, _ in labelled(caption)] == [["a", "b"]]
    # a sub-panel numbered within a dozen still opens its panel's segment
    subs = "Growth of the lines. (A) Root length. (B) Shoot length. C12, day 12 shoots. D, counts."
    assert [labels for labels, _ in labelled(subs)] == [["a"], ["b"], ["c"], ["d"]]


def test_a_lead_bracket_listing_the_last_panel_with_others_names_it() -> None:
    # Rice 10.1186/s12284-018-0225-2 figure 2 (CC BY), shortened: the markers after the lead name
    # panels up to h; the lead's "(a, c, d, f, g, i)" names panel i too
    caption = (
        "Sections were prepared from the wild-type rice (WT) (a, c, d, f, g, i) and from mutants (b, e, h) grown "
        "hydroponically. Red arrowheads indicate signals in the meristem (SAM) (a, b), phloem cells (cc) (d, e), "
        "an immature leaf (IML) area (a, b, g, h), and the tiller (AM) (g, h)."
    )
    got = labelled(caption)
    assert got[0][0] == ["a", "b", "c", "d", "e", "f", "g", "h", "i"]
    # eLife 10.7554/eLife.04493 figure 4 (CC BY), shortened: with markers up to S, "(T1, T2, T3 …)"
    # (thoracic segments) names no panel T
    segments = (
        "Stimulating hemilineages 1A through 5B. Each hemilineage is depicted as a projected confocal Z-stack of "
        "the VNS (T1, T2, T3 and the fused abdominal neuromeres) (A, E, G, K, M, P) and a transverse projection "
        "through segment T2 (B, F, H, L, N, Q; bracketed region in dorsal view). (A–D) Hemilineage 1A. (E, F) "
        "Hemilineage 1B. (G–J) Hemilineage 2A. (K, L) Hemilineage 3A. (M–O) Hemilineage 3B. (P–S) Hemilineage "
        "5B. (R, S) Thermal activation of the 5B interneurons."
    )
    got = labelled(segments)
    assert got[0][0] == ["a", "b", "e", "f", "g", "h", "k", "l", "m", "n", "p", "q"]
    assert all("t" not in labels for labels, _ in got)


def test_letters_after_the_last_marker_listed_with_a_trailing_label_are_its_panels() -> None:
    # Sci Rep 10.1038/s41598-018-37424-7 figure 2 (CC BY), shortened: "(c)", "(d)" and "(e)"
    # follow their phrases in the sentence of "(a)"; no marker names them, the next one names b
    caption = (
        "The level of H2O2 (a), SA (c), ABA (d) and JA (e) contents in control and laminarin-treated sets were "
        "analyzed at different time intervals. (b) DAB staining analysis of H2O2 level in tea leaves."
    )
    assert [labels for labels, _ in labelled(caption)] == [["a", "c", "d", "e"], ["b"]]
    # a segment led by its own marker lists items, not panels: "(a) FTO, …, (e) …" inside panel c
    items = (
        "a Schematic of the sensor. b Cyclic voltammetry measurements. c Nyquist plots for (a) FTO, (b) PVP "
        "nanofibers, (c) PVP/Chi nanofibers, (d) rGO nanofibers and (e) coated nanofibers. d Amperometric response."
    )
    assert [labels for labels, _ in labelled(items)] == [["a"], ["b"], ["c"], ["d"]]
