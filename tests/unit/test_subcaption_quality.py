"""Rule splitter against the human SourceData panel segmentation (tests/fixtures/subcaptions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pmcflow.enrich.evaluate import evaluate_labelwise, evaluate_splitter, load_rows, score_figure, split_of
from pmcflow.enrich.rules import Segment

FIXTURE = (
    Path(__file__).resolve().parents[1] / "fixtures" / "subcaptions" / "sourcedata_panel_legends_dev.jsonl"
)


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return load_rows(FIXTURE)


def test_split_is_by_article_and_stable(rows: list[dict]) -> None:
    by_doi: dict[str, set[str]] = {}
    for r in rows:
        by_doi.setdefault(r["doi"], set()).add(split_of(r["doi"]))
    assert all(len(v) == 1 for v in by_doi.values())
    assert sum(1 for r in rows if split_of(r["doi"]) == "test") == 30


def test_score_figure_alignment() -> None:
    gold = [
        {"text": "(A) foo bar.", "labels_heuristic": ["A"]},
        {"text": "(B) baz qux.", "labels_heuristic": ["B"]},
    ]
    perfect = score_figure("f", [Segment(["b"], "(B) baz qux."), Segment(["a"], "(A) foo bar.")], gold)
    assert perfect.exact == [True, True] and perfect.count_match and perfect.label_pairs == [True, True]
    merged = score_figure("f", [Segment(["a", "b"], "(A) foo bar. (B) baz qux.")], gold)
    assert merged.exact == [False, False] and merged.f1[1] == 0.0 and not merged.count_match


def test_rules_beat_no_split_and_hold_on_labelled_legends(rows: list[dict]) -> None:
    res = evaluate_splitter(rows)
    for split in ("dev", "test"):
        e = res[split]
        assert e["token_f1_macro"] > e["no_split"]["token_f1_macro"] + 0.4
        assert e["exact_match_rate"] > e["no_split"]["exact_match_rate"] + 0.4
    # legends whose every gold panel still carries its label (like real PMC captions)
    assert res["dev"]["labelled_figures"]["token_f1_macro"] >= 0.98
    assert res["test"]["labelled_figures"]["token_f1_macro"] >= 0.98


# ---------------------------------------------------------------------------------------------
# The measures: SourceData gold segments matched at token F1 >= 0.9, and on the PMC
# label-wise set the share of figures whose label set equals the gold one.
# ---------------------------------------------------------------------------------------------
PMC_SET = FIXTURE.parent / "pmc_labelwise_dev.jsonl"


@pytest.fixture(scope="module")
def pmc_rows() -> list[dict]:
    return load_rows(PMC_SET)


# PLOS captions (PLOS/allofplos starter corpus), annotated after the rules were written: the first
# score of the unchanged splitter on them was out of sample (see the fixtures' README)
PLOS_SET = FIXTURE.parent / "plos_labelwise.jsonl"


@pytest.fixture(scope="module")
def plos_rows() -> list[dict]:
    return load_rows(PLOS_SET)


# eLife captions and figure supplements (elifesciences/elife-tools samples the PMC set does not use),
# annotated after the rules of 60fa8c6: a fourth out-of-sample batch (see the fixtures' README)
ELIFE_SET = FIXTURE.parent / "elife_labelwise.jsonl"


# other publishers' captions (Nature-family, MDPI, Springer, Elsevier, Wiley, AGU, ...; Europe PMC
# and PMC XML kept in public repositories), annotated after the rules of 3c6f5a4: a fifth batch
PUBLISHERS_SET = FIXTURE.parent / "publishers_labelwise.jsonl"

# neuroscience captions (Europe PMC XML of petermr/optogenetics: Nature-family, Frontiers, eNeuro,
# MDPI, ...), annotated after the rules of 6c1cfe2: a sixth batch
NEURO_SET = FIXTURE.parent / "neuro_labelwise.jsonl"

# molecular and cell biology captions (Europe PMC XML of petermr/openDiagram: Scientific Reports,
# Taylor & Francis, BMC, Frontiers, MDPI, ...), annotated after the rules of 3f1352a: a seventh batch
MOLBIO_SET = FIXTURE.parent / "molbio_labelwise.jsonl"

# plant, crop and food science captions (Europe PMC XML of petermr/tigr2ess: Scientific Reports,
# Frontiers in Plant Science, BMC Plant Biology, IJMS, Rice, ...), annotated after the rules of
# 99e37d2: an eighth batch
PLANT_SET = FIXTURE.parent / "plant_labelwise.jsonl"

# medicinal plant, pharmacology and nanomaterial captions (Europe PMC XML of petermr/tigr2ess's
# Ocimum sanctum corpus: IJMS, Scientific Reports, BMC Complementary and Alternative Medicine, ...),
# annotated after the rules of e3624b0: a ninth batch
MEDPLANT_SET = FIXTURE.parent / "medplant_labelwise.jsonl"

# more crop science captions (the same rice, wheat and millet corpora of petermr/tigr2ess as the
# plant set, the next articles in sha256 order), annotated after the rules of 0b68079: a tenth batch
CROPS_SET = FIXTURE.parent / "crops_labelwise.jsonl"

# crop science, a third batch (the same corpora, the next articles in sha256 order), annotated after
# the rules of 413c74c: an eleventh batch
CROPS2_SET = FIXTURE.parent / "crops2_labelwise.jsonl"

# clinical research, mostly randomised trials (PMC XML of jayded/evidence-inference: Trials, BMC
# Pediatrics, Nutrients, BMC Musculoskeletal Disorders, ...), annotated after the rules of bd496ec: a
# twelfth batch
CLINICAL_SET = FIXTURE.parent / "clinical_labelwise.jsonl"


@pytest.mark.parametrize(
    ("path", "n_rows", "n_articles"),
    [
        (PMC_SET, 281, 57),
        (PLOS_SET, 675, 105),
        (ELIFE_SET, 130, 10),
        (PUBLISHERS_SET, 491, 74),
        (NEURO_SET, 580, 123),
        (MOLBIO_SET, 428, 72),
        (PLANT_SET, 442, 82),
        (MEDPLANT_SET, 475, 91),
        (CROPS_SET, 443, 84),
        (CROPS2_SET, 427, 84),
        (CLINICAL_SET, 703, 278),
    ],
)
def test_labelwise_sets_are_verbatim_and_consistent(path: Path, n_rows: int, n_articles: int) -> None:
    rows = load_rows(path)
    assert len(rows) == n_rows and len({r["article"] for r in rows}) == n_articles
    assert len({r["id"] for r in rows}) == n_rows
    for r in rows:
        assert r["license"] in {"CC BY", "CC0", "PD"} and r["source"]["repo"] and r["source"]["path"]
        g = r["gold"]
        at = 0
        for seg in g["segments"]:  # verbatim, in caption order, not overlapping
            found = r["caption"].find(seg["text"], at)
            assert found >= 0, (r["id"], seg["text"][:40])
            at = found + len(seg["text"])
        assert g["shared_text"] in r["caption"]
        assert {lab for s in g["segments"] for lab in s["labels"]} == set(g["labels"])


def test_label_sets_hold_on_real_pmc_captions(pmc_rows: list[dict]) -> None:
    res = evaluate_labelwise(pmc_rows)
    for split in ("dev", "test"):
        assert res[split]["label_set_accuracy"] >= 0.97, res[split]
        assert res[split]["label_set_accuracy"] > res[split]["regex_baseline"]["label_set_accuracy"] + 0.05
        assert res[split]["label_set_accuracy_labelled"] >= 0.94, res[split]
    # the segment measure: gold segments matched by a predicted one at token F1 >= 0.9
    # (this round: dev 0.980 -> 0.991, test 0.913 -> 0.930 with leads that name panels as their
    # segments, shared-text F1 0.962 -> 0.982)
    assert res["all"]["matched_at_0_9"] >= 0.975
    assert res["dev"]["matched_at_0_9"] >= 0.985 and res["test"]["matched_at_0_9"] >= 0.92
    assert res["all"]["shared_text_f1"] >= 0.975


def test_label_sets_hold_on_plos_captions(plos_rows: list[dict]) -> None:
    # first scores, before anything was tuned on them (fixtures README): batch 1 dev 0.722 (one
    # paleontology article, "A, dorsal; and B, ventral views") / test 0.981, batch 2 0.883 / 0.894,
    # batch 3 0.955 / 0.822
    res = evaluate_labelwise(plos_rows)
    # (numbers after their phrase and lists of numbered items no longer label: dev 0.972 -> 0.977,
    # test 0.926 -> 0.942; dev segments 0.947 -> 0.942, one article's numbered frames)
    assert res["dev"]["label_set_accuracy"] >= 0.975 and res["test"]["label_set_accuracy"] >= 0.94
    assert res["dev"]["matched_at_0_9"] >= 0.94  # 0.929 before this round's rules, 0.944 after
    for split in ("dev", "test"):
        assert res[split]["label_set_accuracy_labelled"] >= 0.91, res[split]
        assert res[split]["label_set_accuracy"] > res[split]["regex_baseline"]["label_set_accuracy"] + 0.2
    assert res["all"]["matched_at_0_9"] >= 0.915 and res["all"]["shared_text_f1"] >= 0.94


def test_both_measures_hold_on_elife_captions() -> None:
    # first scores, before anything was tuned on them: label set dev 0.957 / test 0.933, segments
    # matched 0.921 / 0.974 (fixtures README)
    res = evaluate_labelwise(load_rows(ELIFE_SET))
    for split in ("dev", "test"):
        assert res[split]["label_set_accuracy"] >= 0.93, res[split]
        assert res[split]["matched_at_0_9"] >= 0.92, res[split]
        assert res[split]["matched_at_0_9"] > res[split]["regex_baseline"]["matched_at_0_9"] + 0.1
    assert res["dev"]["label_set_accuracy"] >= 0.97 and res["dev"]["matched_at_0_9"] >= 0.97
    assert res["all"]["shared_text_f1"] >= 0.96


def test_both_measures_hold_on_the_pmc_style_sets_pooled(pmc_rows: list[dict], plos_rows: list[dict]) -> None:
    # the two measures on the three label-wise sets together, split by article
    res = evaluate_labelwise([*pmc_rows, *plos_rows, *load_rows(ELIFE_SET)], include_baseline=False)
    assert res["test"]["label_set_accuracy"] >= 0.955 and res["test"]["matched_at_0_9"] >= 0.905, res["test"]
    assert res["dev"]["label_set_accuracy"] >= 0.975 and res["dev"]["matched_at_0_9"] >= 0.955, res["dev"]


def _assert_floors(res: dict, split: str, label_sets: float, segments: float) -> None:
    """Both measures of one split at or above their floors."""
    got = res[split]
    assert got["label_set_accuracy"] >= label_sets and got["matched_at_0_9"] >= segments, got


# The later batches, each annotated after the rules of the commit named and scored first before
# anything was tuned on it (first scores in the fixtures README): floors (label sets, segments
# matched at F1 >= 0.9) on dev and test, the margins over the one-regex baseline on both splits, and
# the floor of the shared-text F1 over all captions.
LATER_BATCHES = [
    # other publishers (rules of 3c6f5a4, formulas read from MathML): first dev 0.909 / 0.859, test
    # 0.908 / 0.754. Rules tuned on its dev split since: grid lists "a, d Salinity", letters listed in
    # a sentence "…, d absolute salinity, and e age"; bare lists opening a sentence "b, c, d Spatial
    # patterns …", a lone "a Foo", letters the caption calls letters ("Different letters (a–c)
    # indicate …") none, "(A) through (D)", a grid's one-row panel between row-and-column lists (dev
    # 0.963 / 0.908, test 0.923 / 0.784); the caption's first two labels before their phrases joined by
    # "and" ("SEM images of (a) CS and (b) CS/rosemary …") one clause each (segments 0.920 / 0.815);
    # "a–d. …: (a) hydro, (b) wind, …", leads naming panels, "Panels (c, f, i) depict …", "(GMSAT,
    # a–c)", "Left column a, d, g, …" (dev 0.922 -> 0.954, held-out shared-text F1 0.905 -> 0.940);
    # letters listed in one sentence, "of a …, b …" (held out 0.923 / 0.815 -> 0.928 / 0.824); "for the
    # a meteorological winter …" (dev 0.973 / 0.954 -> 0.980 / 0.958)
    # a stray comma after a listed label, "(c), Atlantic …" (dev segments 0.958 -> 0.964)
    # and notes before the panels in one bracket ("salinity (psu; a, e)"): dev 0.968, test 0.933 / 0.830
    # then lists of numbered items no longer labels, "… and c, h–j the implied rates …", letters out
    # of the chain's order: dev 0.983 / 0.972, test 0.938 / 0.836; a comma list of trailing labels
    # cut at every item or none (tuned on other sets' dev): test segments 0.827 (its annotators cut
    # "… gas exchange (c, d), surface pH (e, f), SSTs (g, h), …" at every item)
    pytest.param(PUBLISHERS_SET, (0.98, 0.97), (0.935, 0.82), (0.15, 0.25), 0.945, id="publishers"),
    # neuroscience (rules of 6c1cfe2): first dev 0.964 / 0.935, test 0.957 / 0.911, shared-text F1
    # 0.983 / 0.966. Rules tuned on its dev split since (sub-panels inside their panel, a bare marker
    # before a Greek letter, bare restatements of a bare overview list, primed sub-panels, notes on the
    # panels just described, "ms.", glossaries, a comma label that lost its period, letters after
    # "for"/"at", "C″"): label sets dev 0.980, test 0.964 (0.971 with the listed letters below);
    # segments dev 0.966, test 0.919. Then interleaved inline lists "(c, e) … (d, f)", a restated list
    # after "and" (dev 0.982 / 0.969) and sentences walking through an overview (test segments 0.931)
    # then "from 2014 (A) to 2018 (E)", numbers after their phrase, letters out of the chain's order:
    # label sets dev 0.986, test 0.986; a marker after a semicolon inside a closed bracket ("(f: p =
    # 0.2; h: p = 0.17, …)") no restated panel: dev segments 0.970 -> 0.972
    pytest.param(NEURO_SET, (0.985, 0.965), (0.985, 0.925), (0.25, 0.4), 0.975, id="neuroscience"),
    # molecular and cell biology (rules of 3f1352a): first dev 0.960 / 0.860, test 0.962 / 0.919,
    # shared-text F1 0.962 / 0.960. Then letters listed inside one sentence as a caption's only labels
    # ("curves of a GEMIN7, b OAS1, …") and as the head of a chain: label sets dev 0.976, test 0.970;
    # sentences walking through an overview: test segments 0.919 -> 0.922, and with a restated marker
    # as one of its steps dev 0.867 -> 0.871; a sentence ending in a colon that introduces the next
    # label ("… were determined in: (E) SNpc; …"): dev segments 0.878
    # then "A‐C." with a Unicode hyphen, "…, c, d ORC3b", lanes "(1) input, …" as items, letters out
    # of the chain's order ("PFC (a) and NAc (c) …. … PFC (b) and NAc (d)"): dev 0.997 / 0.881
    # and a list naming such a letter beside one already named: test 0.977 / 0.926
    pytest.param(MOLBIO_SET, (0.995, 0.88), (0.975, 0.925), (0.2, 0.25), 0.96, id="molbio"),
    # plant, crop and food science (rules of 99e37d2): first dev 0.981 / 0.860, test 0.976 / 0.839,
    # shared-text F1 0.926 / 0.968. Over half of these captions name no panel (single-image
    # figures): the baseline's label sets are right on those too, its segments are not. Then
    # sentences walking through an overview ("a–e …. … (a), … (b), n = 8. … (c). …") and "showing a
    # the leaf number": dev 0.984 / 0.891, test 0.976 / 0.859
    # mutant names after "∆" and letters listed after "as"/"or": dev 0.988 / 0.914; with the round's
    # other rules (the colon heading above all) test segments 0.859 -> 0.940, then 0.968 / 0.933 with
    # notes before the panels in one bracket ("(μM g−1 FW; A)"), which cost one held-out caption
    # then "(a first generation, b second generation, …)", numbers after their phrase, letters out
    # of the chain's order: dev 0.991 / 0.914, test 0.984 / 0.940
    pytest.param(PLANT_SET, (0.99, 0.91), (0.98, 0.935), (0.085, 0.15), 0.93, id="plant"),
    # medicinal plants, pharmacology, nanomaterials (rules of e3624b0): first dev 0.948 / 0.820, test
    # 0.924 / 0.713, shared-text F1 0.934 / 0.924. Three in five captions name no panel, so the
    # baseline is close on label sets. Then letters listed before numbered items, a restated marker
    # as a step of an overview walk, glossaries with colons, "subsp.", a leading label that lost its
    # period after another, "with a … and b …": dev 0.956 / 0.858, test 0.935 / 0.713 (0.733 with
    # the unseparated labels of the crop science batch)
    # Then prepositional phrases after listed labels, a bracket of labels with notes and the clause
    # fix of _before_semicolons: dev 0.961 / 0.895, test 0.935 / 0.852
    # and letters listed before quantities ("a 30 °C, b 50 °C, …"): dev 0.963 / 0.904
    # then numbers after their phrase and numbered items as no labels, and letters out of the chain's
    # order ("(A,F) … (C,H) …. … SOD (D), NADPH oxidase (E) …"): dev 0.977 / 0.909
    pytest.param(MEDPLANT_SET, (0.975, 0.905), (0.93, 0.85), (0.05, 0.05), 0.94, id="medplant"),
    # crop science, a second batch (rules of 0b68079): first dev 0.959 / 0.844, test 0.955 / 0.773,
    # shared-text F1 0.916 / 0.904. Then labels before their phrases with no separator between them
    # ("(a) cultured in … (b) cultured in …"): dev segments 0.862
    # Then a glossary no longer taking "a," after the title, "(panel a)", the clause fix, "; and,":
    # dev 0.966 / 0.881, test 0.960 / 0.788
    # then "vs. C. LK" no label, "(A–C′)": dev 0.974 / 0.885; numbered items: test 0.966 / 0.788;
    # "In panel (A), …" after the sentence describing A: dev segments 0.892
    pytest.param(CROPS_SET, (0.97, 0.89), (0.965, 0.785), (0.15, 0.25), 0.91, id="crops"),
    # crop science, a third batch (rules of 413c74c): first dev 0.945 / 0.849, test 0.963 / 0.924,
    # shared-text F1 0.979 / 0.964 (the rules of 04766cb: dev segments 0.845)
    # Then a semicolon glued inside a name, brackets of panels each "for" an item, notes before the
    # panels in one bracket: dev 0.955 / 0.857; "in Graph A, …" as a caption's only labels: 0.959 /
    # 0.868
    # then a glossary "C20, eicosanol; …", numbers after their phrase, letters out of the chain's order
    # ("(μM g−1 FW; A), … (E) …. … H2O2 (B) and SOD (D) …"): dev 0.969 / 0.866, test 0.978 / 0.924;
    # "(A) Wild-type TC65 and (B, C) glup6. (C) Shows …": dev 0.972 / 0.870; "…, P3 and P4, (a, d) … (b,
    # e) …" an inline list interleaved with the next marker opening the chain: dev segments 0.872
    pytest.param(CROPS2_SET, (0.97, 0.87), (0.975, 0.92), (0.1, 0.2), 0.98, id="crops2"),
    # clinical research, mostly randomised trials (rules of bd496ec): first dev 0.980 / 0.764, test
    # 0.960 / 0.821, shared-text F1 0.965 / 0.921. Four in five captions name no panel (flow
    # diagrams, single charts), so the baseline is close on label sets. Rules tuned on its dev split
    # since: a letter after an operator ("Ca + D, Ca-D") no label, "A)–C)" one marker, "pain and B:",
    # a comma list of trailing labels cut at every item or none, "a-d …. e …" after the panels,
    # "… (a) and … (b). In (a), …. In (b), …": dev 0.987 / 0.801, test 0.960 / 0.821
    # then a lead listing bare letters ("via a stool and b urine"), the short last item of a list cut
    # per item ("… (f) and SF-36 domain scores (g)"): dev segments 0.815, shared-text F1 0.965 -> 0.992
    pytest.param(CLINICAL_SET, (0.985, 0.81), (0.96, 0.82), (0.03, 0.3), 0.94, id="clinical"),
]


@pytest.mark.parametrize(("path", "dev", "test", "margins", "shared"), LATER_BATCHES)
def test_both_measures_on_each_later_batch(
    path: Path,
    dev: tuple[float, float],
    test: tuple[float, float],
    margins: tuple[float, float],
    shared: float,
) -> None:
    res = evaluate_labelwise(load_rows(path))
    _assert_floors(res, "dev", *dev)
    _assert_floors(res, "test", *test)
    for split in ("dev", "test"):
        base = res[split]["regex_baseline"]
        assert res[split]["label_set_accuracy"] > base["label_set_accuracy"] + margins[0], res[split]
        assert res[split]["matched_at_0_9"] > base["matched_at_0_9"] + margins[1], res[split]
    assert res["all"]["shared_text_f1"] >= shared


# PMC, PLOS and eLife pooled with the later batches up to each one (split by article): floors on all
# captions and on the held-out ones
POOLS = [
    # four sets, 1,577 captions (segments 0.911 / test 0.869 before the pair rule above, 0.917 /
    # 0.879 with it; the rules of that round 0.930 / 0.881)
    pytest.param((PUBLISHERS_SET,), (0.963, 0.934), (0.939, 0.884), id="four"),
    # five sets, 2,157 captions, 4,820 gold segments (first scores: all 0.962 / 0.930, held out
    # 0.942 / 0.890)
    pytest.param((PUBLISHERS_SET, NEURO_SET), (0.967, 0.944), (0.945, 0.898), id="five"),
    # six sets, 2,585 captions, 5,915 gold segments (first scores: all 0.964 / 0.928, held out 0.946
    # / 0.897)
    pytest.param((PUBLISHERS_SET, NEURO_SET, MOLBIO_SET), (0.969, 0.934), (0.949, 0.902), id="six"),
    # seven sets, 3,027 captions, 6,613 gold segments (first scores: all 0.971 / 0.923, held out
    # 0.953 / 0.894)
    pytest.param((PUBLISHERS_SET, NEURO_SET, MOLBIO_SET, PLANT_SET), (0.971, 0.932), (0.952, 0.905), id="seven"),
    # eight sets, 3,502 captions, 7,163 gold segments (first scores: all 0.967 / 0.917, held out
    # 0.950 / 0.891)
    pytest.param(
        (PUBLISHERS_SET, NEURO_SET, MOLBIO_SET, PLANT_SET, MEDPLANT_SET), (0.969, 0.929), (0.951, 0.902), id="eight"
    ),
    # nine sets, 3,945 captions, 7,863 gold segments (first scores: all 0.967 / 0.911, held out
    # 0.952 / 0.878)
    pytest.param(
        (PUBLISHERS_SET, NEURO_SET, MOLBIO_SET, PLANT_SET, MEDPLANT_SET, CROPS_SET),
        (0.968, 0.92),
        (0.952, 0.89),
        id="nine",
    ),
    # ten sets, 4,372 captions, 8,504 gold segments (first scores: all 0.967 / 0.918, held out
    # 0.953 / 0.893; after the rules tuned on the eleventh batch's dev split all 0.968 / 0.920; after
    # the seventh round's, numbers as items and letters out of the chain's order, 0.976 / 0.921, held
    # out 0.963 / 0.894)
    pytest.param(
        (PUBLISHERS_SET, NEURO_SET, MOLBIO_SET, PLANT_SET, MEDPLANT_SET, CROPS_SET, CROPS2_SET),
        (0.975, 0.92),
        (0.963, 0.893),
        id="ten",
    ),
    # eleven sets, 5,075 captions, 8,860 gold segments (first scores: all 0.976 / 0.916, held out
    # 0.964 / 0.890; after the eighth round's rules all 0.977 / 0.917, held out 0.964 / 0.891)
    pytest.param(
        (PUBLISHERS_SET, NEURO_SET, MOLBIO_SET, PLANT_SET, MEDPLANT_SET, CROPS_SET, CROPS2_SET, CLINICAL_SET),
        (0.975, 0.915),
        (0.963, 0.89),
        id="eleven",
    ),
]


@pytest.mark.parametrize(("later", "every", "held_out"), POOLS)
def test_both_measures_on_the_sets_pooled(
    pmc_rows: list[dict],
    plos_rows: list[dict],
    later: tuple[Path, ...],
    every: tuple[float, float],
    held_out: tuple[float, float],
) -> None:
    others = [r for path in (ELIFE_SET, *later) for r in load_rows(path)]
    res = evaluate_labelwise([*pmc_rows, *plos_rows, *others], include_baseline=False)
    _assert_floors(res, "all", *every)
    _assert_floors(res, "test", *held_out)


def test_sourcedata_segments_matched_at_0_9(rows: list[dict]) -> None:
    res = evaluate_splitter(rows)
    # legends that kept their labels (like real PMC captions): the measure is met
    assert res["all"]["labelled_figures"]["matched_at_0_9"] >= 0.97
    # held-out articles: 79 of 87 segments (76 before labelled segments that lost a panel were cut;
    # 80 before "In panel (F), …" after "… in vitro (D,E) or … of PLWH (F)." opened a segment of its
    # own, as "In panels (D, E), …" does: the curators keep D–F as one panel there)
    assert res["test"]["matched_at_0_9"] >= 0.905
    # 34 % of the gold segments lost their label in the reconstruction: the panel-boundary model
    # cuts those legends between sentences (67 % of all segments matched without it), and labelled
    # segments that hold such a panel (80.6 % before), as many as their letters say they lost
    # (0.834 before that count); 0.851 with places after text that describes panels read as inside
    # a panel (0.846 before); 0.852 with a bracket glued to a period closing its sentence; 0.859
    # with places named twice read as inside panels and the model refitted with "qRT-PCR …",
    # "mRNA …" openings no longer counted as lower case (0.852 before)
    assert res["all"]["matched_at_0_9"] >= 0.855
    assert res["all"]["matched_at_0_9"] > res["all"]["no_split"]["matched_at_0_9"] + 0.5
    # with the number of panels known (the pipeline knows its subfigures). 0.851 before bare lists
    # of letters ("B-C PBMC cells …") counted as markers: one legend that lost its single-letter
    hinted = evaluate_splitter(rows, panels_hint=True, include_baseline=False)
    # markers is now read by its two ranges and no longer cut by count alone (0.847); 0.862 with the
    # count of lost panels, 0.867 with places inside a panel, 0.871 with the bracket glued to a period
    # (held out 0.943; 0.931 with "In panel (F), …" a segment, above); 0.867 after that refit: in
    # emmm.201404433 fig. 2 the boundary before "Relative mRNA levels of denervation markers …"
    # inside the "Right: …" segment fell from 0.81 to 0.796, under LOST_PANEL_THRESHOLD
    assert hinted["all"]["matched_at_0_9"] >= 0.866 and hinted["test"]["matched_at_0_9"] >= 0.93


def test_label_less_legends_go_to_subfigures_by_order_with_few_mistakes(rows: list[dict]) -> None:
    """The shipped model on the SourceData legends that lost every label, each gold panel playing a
    subfigure: measured 30 pieces assigned, all 30 the curators' panel, of 146 panels (33 of 33 before
    the refit of the sentence fixes; the dev articles trained the model;
    tests/unit/test_caption_boundaries.py has the cross-validated count)."""
    from pmcflow.enrich.evaluate import evaluate_order_assignment

    got = evaluate_order_assignment(rows)["all"]
    assert got["panels"] == 146 and got["assigned"] >= 30 and got["precision"] >= 0.97
