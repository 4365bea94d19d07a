"""The image registry: validation, role exclusivity, the split policy, builtin_pool's render sources."""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from pmcflow import imageregistry as R
from pmcflow.synth.sources import builtin_pool

# The 24 images builtin_pool used before the registry existed (the committed demo corpus, the demo
# benchmarks and the label reader were built from exactly these).
RENDER_IDS = {
    "skimage:cell.png",
    "skimage:ihc.png",
    "skimage:retina.jpg",
    "skimage:microaneurysms.png",
    "skimage:phantom.png",
    "pydicom:CT_small.dcm",
    "pydicom:MR_small.dcm",
    "matplotlib:s1045.ima.gz",
    *(f"pmcflow:nci-vol-{n}-72.jpg" for n in (2303, 2304, 2305, 2306)),
    *(
        f"nibabel:{name}[axis{axis},{frac}]"
        for name in ("anatomical.nii", "example4d.nii.gz")
        for axis in (0, 1, 2)
        for frac in (0.4, 0.55)
    ),
}


def _entry(eid: str, role: str, cls: str = "other", **kw: Any) -> dict[str, Any]:
    e = {
        "id": eid,
        "class": cls,
        "role": role,
        "loader": "file",
        "package": "pmcflow",
        "path": "data/images/hela-fluorescence.png",
        "licence": "CC0",
        "provenance": "test",
    }
    e.update(kw)
    return e


def _problems(entries: list[dict[str, Any]]) -> list[str]:
    with pytest.raises(R.RegistryError) as ei:
        R.parse_registry({"images": entries}, origin="t")
    return ei.value.problems


def test_shipped_registry_is_valid_and_roles_are_exclusive() -> None:
    reg = R.load_registry()
    assert len({e.id for e in reg.entries}) == len(reg.entries)
    assert {e.role for e in reg.entries} <= set(R.ROLES) and {e.cls for e in reg.entries} <= set(R.CLASSES)
    train, test = reg.groups("classifier_train"), reg.groups("classifier_test")
    render = reg.groups("render_source")
    assert not render & (train | test)
    # a group on both classifier sides only as disjoint regions of one image
    for g in train & test:
        items = [e for e in reg.entries if e.group == g]
        assert all(e.region is not None for e in items), g
    assert set(reg.ids("classifier_train")).isdisjoint(reg.ids("classifier_test"))
    # every entry has a licence and provenance, and each class to classify is on both sides
    assert all(e.licence and e.provenance for e in reg.entries)
    for cls in ("histopathology", "microscopy", "radiology", "retina", "other"):
        assert any(e.cls == cls for e in reg.by_role("classifier_train")), cls
        assert any(e.cls == cls for e in reg.by_role("classifier_test")), cls


def test_shipped_registry_follows_its_split_policy() -> None:
    reg = R.load_registry()
    assert R.policy_roles(reg) == {e.id: e.role for e in reg.by_role(*R.CLASSIFIER_ROLES)}
    assert set(reg.ids("render_source")) == RENDER_IDS
    # sub-types on both sides where the kind has two or more images
    test_kinds = {(e.cls, e.kind) for e in reg.by_role("classifier_test")}
    assert {
        ("other", "chemical_structure"),
        ("other", "photo"),
        ("radiology", "ct"),
        ("radiology", "ultrasound"),
    } <= test_kinds


def test_builtin_pool_takes_exactly_the_render_sources() -> None:
    pool = builtin_pool(max_side=256, include_plots=False)
    ids = {r.source_id for refs in pool.refs.values() for r in refs}
    assert ids == set(R.load_registry().ids("render_source")) == RENDER_IDS
    reg = R.load_registry()
    for refs in pool.refs.values():
        for r in refs:
            e = reg.get(r.source_id)
            assert r.modality == e.cls and r.origin == e.origin
    assert pool.unavailable == []


def test_every_classifier_image_loads() -> None:
    pool = R.pool_for_roles(*R.CLASSIFIER_ROLES, max_side=256)
    assert pool.unavailable == []
    usable = pool.validate_all()
    assert pool.rejection_rows() == []
    expected = Counter(e.cls for e in R.load_registry().by_role(*R.CLASSIFIER_ROLES))
    assert usable == dict(expected)
    # regions: the held-out part of a single-image class is its right 30 %
    full = R.loader_for(R.load_registry().get("pmcflow:hela-fluorescence.png[x0-0.7]"))()
    right = R.loader_for(R.load_registry().get("pmcflow:hela-fluorescence.png[x0.7-1]"))()
    assert full.width + right.width == 256 and full.height == right.height == 256


def test_smiles_drawings_are_deterministic() -> None:
    e = R.load_registry().get("rdkit:aspirin")
    a, b = R.loader_for(e)(), R.loader_for(e)()
    assert a.size == (480, 360) and a.tobytes() == b.tobytes()
    lo, hi = a.convert("L").getextrema()
    assert hi - lo > 100  # a drawing, not a blank canvas


def test_validation_errors() -> None:
    ok = [
        _entry("a", "classifier_train"),
        _entry("b", "classifier_test", path="data/images/openslide-os1-he.jpg"),
    ]
    assert len(R.parse_registry({"images": ok}).entries) == 2
    assert any("unknown role 'validation'" in p for p in _problems([_entry("a", "validation")]))
    assert any("unknown class 'xray'" in p for p in _problems([_entry("a", "classifier_train", cls="xray")]))
    assert any("unknown loader" in p for p in _problems([_entry("a", "classifier_train", loader="svs")]))
    assert any(
        "duplicate id 'a'" in p
        for p in _problems([_entry("a", "classifier_train"), _entry("a", "classifier_train")])
    )
    two = _problems([_entry("a", "classifier_train"), _entry("a", "classifier_test")])
    assert any("'a' has two roles" in p for p in two)
    assert any(
        "has two roles" in p for p in _problems([_entry("a", ["classifier_train", "classifier_test"])])
    )  # type: ignore[arg-type]
    assert any("unknown keys ['colour']" in p for p in _problems([_entry("a", "classifier_train", colour=1)]))
    assert any("missing ['licence']" in p for p in _problems([_entry("a", "classifier_train", licence="")]))
    assert any("params.smiles" in p for p in _problems([_entry("a", "classifier_train", loader="smiles")]))


def test_a_group_cannot_leak_between_roles() -> None:
    # two derived items of one image: train and test overlap
    leak = [_entry("x[a]", "classifier_train", group="x"), _entry("x[b]", "classifier_test", group="x")]
    assert any("overlap" in p for p in _problems(leak))
    # disjoint regions are allowed, overlapping ones are not
    halves = [
        _entry("x[l]", "classifier_train", group="x", region=[0, 0, 0.7, 1]),
        _entry("x[r]", "classifier_test", group="x", region=[0.7, 0, 1, 1]),
    ]
    assert len(R.parse_registry({"images": halves}).entries) == 2
    bad = copy.deepcopy(halves)
    bad[1]["region"] = [0.6, 0, 1, 1]
    assert any("overlap" in p for p in _problems(bad))
    # a render source is never a classifier image, whatever the region
    mixed = [
        _entry("y", "render_source", group="g"),
        _entry("y[r]", "classifier_test", group="g", region=[0.7, 0, 1, 1]),
    ]
    assert any("both a render source and a classifier image" in p for p in _problems(mixed))
    assert any(
        "several classes" in p
        for p in _problems(
            [
                _entry("p", "classifier_train", group="g"),
                _entry("q", "classifier_train", group="g", cls="retina"),
            ]
        )
    )
    assert any(
        "is not inside [0, 1]" in p
        for p in _problems([_entry("z", "classifier_train", region=[0.5, 0, 0.2, 1])])
    )


def test_policy_holds_out_a_quarter_per_kind(tmp_path: Path) -> None:
    entries = [_entry(f"img{k}", "classifier_train", kind="photo") for k in range(8)]
    entries += [_entry("lone", "classifier_train", kind="text")]
    roles = R.policy_roles(R.parse_registry({"images": entries}))
    assert (
        sum(r == "classifier_test" for r in roles.values()) == 2
    )  # ceil(0.25 * 8); the lone text image trains
    assert roles["lone"] == "classifier_train"
    # the choice depends on the group names only, not on the order of the file
    again = R.policy_roles(R.parse_registry({"images": entries[::-1]}))
    assert again == roles
    # a file that disagrees with the policy is detectable (the shipped one is checked above)
    path = tmp_path / "r.yaml"
    flipped = [
        dict(e, role=("classifier_train" if roles[e["id"]] == "classifier_test" else "classifier_test"))
        for e in entries[:8]
    ]
    path.write_text(yaml.safe_dump({"images": flipped}), encoding="utf-8")
    reg = R.load_registry(path)
    assert R.policy_roles(reg) != {e.id: e.role for e in reg.entries}


def test_missing_packages_are_unavailable_not_errors() -> None:
    reg = R.parse_registry(
        {
            "images": [
                _entry("n", "classifier_train", package="no_such_pkg_xyz", path="a.png"),
                _entry("m", "classifier_train", path="data/images/nope.png"),
            ]
        }
    )
    refs, unavailable = R.source_refs(reg.entries)
    assert refs == {} and "no_such_pkg_xyz not installed" in unavailable
    assert any(u.startswith("m (") and "missing" in u for u in unavailable)


def test_registry_hash_is_of_its_content(tmp_path: Path) -> None:
    src = R.REGISTRY_PATH.read_text(encoding="utf-8")
    a, b, c = tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "c.yaml"
    a.write_text(src, encoding="utf-8")
    b.write_text("# another comment\n" + src, encoding="utf-8")
    c.write_text(src.replace("role: classifier_test", "role: classifier_train", 1), encoding="utf-8")
    assert R.load_registry(a).sha256 == R.load_registry(b).sha256 == R.load_registry().sha256
    assert R.load_registry(c).sha256 != R.load_registry(a).sha256
