"""Linear probe, feature cache, robustness perturbations/statistics and embedding analysis.

Every test runs on data whose answer is known in advance (hand-computed values, exact
transforms, separable or label-shuffled data).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import struct
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from PIL import Image
from scipy.spatial.distance import cdist

from pmcflow.config import ConfigError
from pmcflow.encoders import embedding as EM
from pmcflow.encoders import probe as PR
from pmcflow.encoders import robustness as RB


# ------------------------------------------------------------------------------------------------
# Linear probe
# ------------------------------------------------------------------------------------------------
def _blobs(rng: np.random.Generator, n: int, means: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, len(means), n)
    return means[y] + rng.normal(size=(n, means.shape[1])), y


def test_probe_separable_blobs_reach_100_percent() -> None:
    rng = np.random.default_rng(0)
    means = np.zeros((3, 8))
    means[0, 0], means[1, 1], means[2, 2] = 12.0, 12.0, 12.0  # >= 8 sd apart
    xtr, ytr = _blobs(rng, 600, means)
    xte, yte = _blobs(rng, 300, means)
    res = PR.linear_probe(xtr, ytr, xte, PR.ProbeSettings.from_section({}), seed=1)
    assert res.train_accuracy == 1.0
    assert (res.y_pred == yte).all()
    assert len(res.loss_curve) == 40 and res.loss_curve[-1] < res.loss_curve[0] / 10
    assert res.test_scores.shape == (300, 3)
    np.testing.assert_allclose(res.test_scores.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert (res.test_scores.argmax(axis=1) == res.y_pred).all()


def test_probe_on_shuffled_labels_is_at_chance() -> None:
    rng = np.random.default_rng(5)
    xtr, xte = rng.normal(size=(2000, 16)), rng.normal(size=(2000, 16))
    ytr, yte = rng.integers(0, 4, 2000), rng.integers(0, 4, 2000)  # labels independent of features
    res = PR.linear_probe(xtr, ytr, xte, seed=0)
    acc = float((res.y_pred == yte).mean())
    assert abs(acc - 0.25) < 0.05  # binomial sd ~0.01
    assert res.train_accuracy < 0.5  # nothing to learn beyond noise in 16 dims


def test_probe_same_seed_is_bit_identical_other_seed_differs() -> None:
    rng = np.random.default_rng(2)
    means = rng.normal(size=(4, 10))
    xtr, ytr = _blobs(rng, 500, means)
    xte, _ = _blobs(rng, 200, means)
    s = PR.ProbeSettings.from_section({"epochs": 5, "batch_size": 64})
    a = PR.linear_probe(xtr, ytr, xte, s, seed=7)
    b = PR.linear_probe(xtr, ytr, xte, s, seed=7)
    c = PR.linear_probe(xtr, ytr, xte, s, seed=8)
    assert np.array_equal(a.y_pred, b.y_pred) and np.array_equal(a.test_scores, b.test_scores)
    assert a.loss_curve == b.loss_curve
    assert not np.array_equal(a.test_scores, c.test_scores)


def test_probe_n_classes_adds_missing_class_column() -> None:
    x = np.array([[0.0], [1.0], [10.0], [11.0]])
    res = PR.linear_probe(x, np.array([0, 0, 2, 2]), np.array([[0.5], [10.5]]), seed=0, n_classes=4)
    assert res.test_scores.shape == (2, 4) and res.y_pred.tolist() == [0, 2]
    with pytest.raises(PR.ProbeError, match="n_classes"):
        PR.linear_probe(x, np.array([0, 0, 2, 2]), x, n_classes=2)


def test_cosine_schedule_values() -> None:
    assert PR.cosine_lr(0, 40, 0.1) == pytest.approx(0.1)
    assert PR.cosine_lr(20, 40, 0.1) == pytest.approx(0.05)
    assert PR.cosine_lr(40, 40, 0.1) == pytest.approx(0.0, abs=1e-15)
    assert PR.cosine_lr(10, 40, 0.1) == pytest.approx(0.05 * (1 + math.sqrt(0.5)))


def test_standardize_uses_train_statistics_only() -> None:
    train = np.array([[0.0, 5.0], [2.0, 5.0]])  # column 0: mean 1, std 1; column 1 constant
    test = np.array([[3.0, 6.0]])
    tr, te = PR.standardize(train, test)
    np.testing.assert_array_equal(tr, [[-1.0, 0.0], [1.0, 0.0]])
    np.testing.assert_array_equal(te, [[2.0, 1.0]])  # constant column only centred


def test_probe_settings_validation() -> None:
    assert PR.ProbeSettings.from_section({"epochs": 3}).epochs == 3
    assert PR.ProbeSettings.from_section({}).epochs == 40  # the schema's default (the paper's)
    with pytest.raises(ConfigError, match=r"evaluate\.linear_probe\.epoch: unknown key"):
        PR.ProbeSettings.from_section({"epoch": 3})
    with pytest.raises(ConfigError, match="optimizer"):
        PR.ProbeSettings.from_section({"optimizer": "lbfgs"})
    defaults = PR.ProbeSettings.from_section({})
    with pytest.raises(PR.ProbeError, match="optimizer"):  # a library caller's object is checked too
        dataclasses.replace(defaults, optimizer="lbfgs")
    with pytest.raises(PR.ProbeError, match="epochs"):
        dataclasses.replace(defaults, epochs=0)
    with pytest.raises(PR.ProbeError, match="2-D"):
        PR.linear_probe(np.zeros(4), np.zeros(4, dtype=int), np.zeros((1, 1)))
    with pytest.raises(PR.ProbeError, match="integer"):
        PR.linear_probe(np.zeros((2, 1)), np.array([0.0, 1.0]), np.zeros((1, 1)))


# ------------------------------------------------------------------------------------------------
# Feature cache
# ------------------------------------------------------------------------------------------------
def test_feature_cache_computes_once_then_hits(tmp_path: Path) -> None:
    calls: list[int] = []

    def compute() -> np.ndarray:
        calls.append(1)
        return np.arange(6, dtype=np.float32).reshape(3, 2)

    key = {
        "checkpoint_sha256": "ab" * 32,
        "split": "test",
        "preprocess": "224/bicubic",
        "files": {"b": 2, "a": 1},
    }
    cache = PR.FeatureCache(tmp_path / "feats")
    first = cache.get_or_compute(key, compute)
    again = cache.get_or_compute(dict(reversed(list(key.items()))), compute)  # key order irrelevant
    assert len(calls) == 1 and (cache.hits, cache.misses) == (1, 1)
    np.testing.assert_array_equal(first, again)
    assert again.dtype == np.float32

    canonical = json.dumps(key, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    assert cache.path_for(key) == tmp_path / "feats" / f"{digest}.npy"
    assert (tmp_path / "feats" / f"{digest}.json").read_text().strip() == canonical
    assert sorted(p.name for p in (tmp_path / "feats").iterdir()) == [f"{digest}.json", f"{digest}.npy"]

    fresh = PR.FeatureCache(tmp_path / "feats")  # persisted across instances
    fresh.get_or_compute(key, compute)
    assert (fresh.hits, fresh.misses) == (1, 0) and len(calls) == 1
    fresh.get_or_compute({**key, "split": "train"}, compute)
    assert (fresh.hits, fresh.misses) == (1, 1) and len(calls) == 2


def test_feature_cache_recomputes_unreadable_entry_and_rejects_bad_keys(tmp_path: Path) -> None:
    cache = PR.FeatureCache(tmp_path)
    key = {"k": 1}
    cache.path_for(key).write_bytes(b"\x93NUMPY truncated")
    out = cache.get_or_compute(key, lambda: np.ones(3))
    assert cache.misses == 1 and np.array_equal(np.load(cache.path_for(key)), np.ones(3))
    with pytest.raises(PR.ProbeError, match="plain JSON"):
        cache.get_or_compute({"k": float("nan")}, lambda: out)
    with pytest.raises(PR.ProbeError, match="plain JSON"):
        cache.get_or_compute({"k": object()}, lambda: out)
    with pytest.raises(PR.ProbeError, match="object array"):
        cache.get_or_compute({"k": 2}, lambda: np.array([{"a": 1}], dtype=object))


# ------------------------------------------------------------------------------------------------
# Perturbations
# ------------------------------------------------------------------------------------------------
def _asym(size: int = 8) -> np.ndarray:
    return (np.arange(size * size, dtype=np.uint8) * 3).reshape(size, size)


def test_flip_twice_is_identity_and_once_mirrors() -> None:
    im = Image.fromarray(_asym())
    once = RB.perturb(im, "flip", 1)
    np.testing.assert_array_equal(np.asarray(once), np.fliplr(_asym()))
    np.testing.assert_array_equal(np.asarray(RB.flip(once)), _asym())


def test_brightness_identity_and_half() -> None:
    arr = np.array([[[200, 40, 0], [100, 254, 2]]], dtype=np.uint8)
    im = Image.fromarray(arr, "RGB")
    np.testing.assert_array_equal(np.asarray(RB.perturb(im, "brightness", 1.0)), arr)
    np.testing.assert_array_equal(np.asarray(RB.brightness(im, 0.5)), arr // 2)
    assert np.asarray(RB.brightness(im, 2.0)).max() == 255  # saturates


def test_shift_moves_known_pixel() -> None:
    arr = np.zeros((10, 10), dtype=np.uint8)
    arr[3, 2] = 255  # row 3, column 2
    down_right = np.asarray(RB.perturb(Image.fromarray(arr), "shift", 0.2))
    assert list(zip(*np.nonzero(down_right), strict=True)) == [(5, 4)]
    up_left = np.asarray(RB.shift(Image.fromarray(arr), -0.2))
    assert list(zip(*np.nonzero(up_left), strict=True)) == [(1, 0)]
    wide = np.zeros((10, 20), dtype=np.uint8)  # height 10, width 20: moves 4 columns, 2 rows
    wide[0, 0] = 255
    assert list(zip(*np.nonzero(np.asarray(RB.shift(Image.fromarray(wide), 0.2))), strict=True)) == [(2, 4)]
    full = np.asarray(RB.shift(Image.fromarray(np.full((10, 10), 9, np.uint8)), 0.3))
    assert (full[:3] == 0).all() and (full[:, :3] == 0).all() and (full[3:, 3:] == 9).all()


def test_zoom_identity_in_and_out() -> None:
    arr = _asym(16)
    np.testing.assert_array_equal(np.asarray(RB.perturb(Image.fromarray(arr), "zoom", 1.0)), arr)
    sq = np.zeros((64, 64), dtype=np.uint8)
    sq[24:40, 24:40] = 255  # central 16x16 square
    zin = np.asarray(RB.zoom(Image.fromarray(sq), 2.0))
    assert zin.shape == (64, 64)
    assert (zin[18:46, 18:46] == 255).all()  # now ~32x32 (16..48), edges left for interpolation
    assert (zin[:14] == 0).all() and (zin[50:] == 0).all()
    zout = np.asarray(RB.zoom(Image.fromarray(np.full((64, 64), 200, np.uint8)), 0.5))
    assert (zout[16:48, 16:48] == 200).all() and (zout[:16] == 0).all() and (zout[:, 48:] == 0).all()


def test_rotation_90_matches_rot90_and_keeps_mode() -> None:
    arr = _asym(9)
    np.testing.assert_array_equal(np.asarray(RB.perturb(Image.fromarray(arr), "rotation", 90)), np.rot90(arr))
    np.testing.assert_array_equal(np.asarray(RB.rotation(Image.fromarray(arr), 0)), arr)
    rgb = Image.fromarray(np.stack([arr] * 3, axis=-1), "RGB")
    out = RB.rotation(rgb, 15)
    assert out.mode == "RGB" and out.size == rgb.size
    assert np.asarray(out)[0, 0].tolist() == [0, 0, 0]  # corner uncovered: black fill


def test_perturbations_do_not_modify_input_and_convert_odd_modes() -> None:
    src = Image.fromarray(_asym()).convert("P")
    before = src.tobytes()
    for p in RB.parse_perturbations(
        {"brightness": 0.7, "shift": 0.1, "rotation": 30, "flip": 1, "zoom": 1.5}
    ):
        out = RB.perturb(src, p.name, p.strength)
        assert out.mode == "RGB" and out.size == src.size
    assert src.tobytes() == before


def test_parse_perturbations_order_and_errors() -> None:
    got = RB.parse_perturbations({"rotation": [5, 15], "flip": 1, "zoom": (1.2,)})
    assert got == [("rotation", 5.0), ("rotation", 15.0), ("flip", 1.0), ("zoom", 1.2)]
    assert got[0].label == "rotation=5"
    for bad, msg in [
        ({"blur": 1}, "unknown perturbation 'blur'"),
        ({"flip": 2}, "flip takes no strength"),
        ({"shift": [1.0]}, r"shift fraction must be in \(-1, 1\)"),
        ({"brightness": []}, "no strengths"),
        ({"zoom": [float("nan")]}, "finite"),
        ({"zoom": [0]}, "zoom factor must be > 0"),
        ({"rotation": [True]}, "must be a number"),
        ({"rotation": ["5"]}, "must be a number"),
        ({"rotation": [5, 5.0]}, "listed twice"),
    ]:
        with pytest.raises(RB.RobustnessError, match=msg):
            RB.parse_perturbations(bad)


# ------------------------------------------------------------------------------------------------
# Paired statistics
# ------------------------------------------------------------------------------------------------
def test_paired_bootstrap_known_deltas() -> None:
    base = np.random.default_rng(0).random(50)
    assert RB.paired_bootstrap_delta(base, base, n_boot=200) == (0.0, 0.0, 0.0)
    assert RB.paired_bootstrap_delta(base, base - 1.0, n_boot=200) == pytest.approx((-1.0, -1.0, -1.0))
    hits = np.array([1.0] * 8 + [0.0] * 2)
    worse = np.array([1.0] * 4 + [0.0] * 6)  # 4 of 10 queries lose their hit
    delta, lo, hi = RB.paired_bootstrap_delta(hits, worse, n_boot=500, seed=3)
    assert delta == pytest.approx(-0.4) and -1.0 <= lo <= delta <= hi <= 0.0
    assert RB.paired_bootstrap_delta(hits, worse, n_boot=500, seed=3) == (delta, lo, hi)
    with pytest.raises(RB.RobustnessError, match="one length"):
        RB.paired_bootstrap_delta(hits, worse[:5])


def test_wilcoxon_hand_computed_examples() -> None:
    # differences 1, 2, 3, -4, 5: T- = 4; exact P(T <= 4 | n=5) = 7/32 (subsets of {1..5} summing <= 4)
    assert RB.wilcoxon_signed_rank(np.array([1, 2, 3, -4, 5]), np.zeros(5)) == pytest.approx((4.0, 14 / 32))
    # eight positive differences: T- = 0, p = 2 / 2**8
    assert RB.wilcoxon_signed_rank(np.arange(1, 9), np.zeros(8)) == pytest.approx((0.0, 2 / 256))
    # The textbook example (Wikipedia "Wilcoxon signed-rank test"): one zero pair dropped, ties at
    # |5|; W = T+ - T- = 27 - 18 = 9.  p by enumerating all 2**9 sign assignments of the ranks.
    x2 = np.array([125, 115, 130, 140, 140, 115, 140, 125, 140, 135])
    x1 = np.array([110, 122, 125, 120, 140, 124, 123, 137, 135, 145])
    ranks = np.array([7, 3, 1.5, 9, 4, 8, 6, 1.5, 5])  # of |d| for d = 15,-7,5,20,-9,17,-12,5,-10
    t_minus = 3 + 4 + 6 + 5
    extreme = sum(
        min(t, ranks.sum() - t) <= t_minus
        for t in (float(np.dot(ranks, s)) for s in itertools.product([0, 1], repeat=9))
    )
    stat, p = RB.wilcoxon_signed_rank(x2, x1)
    assert stat == t_minus == 18 and p == pytest.approx(extreme / 2**9) and extreme == 324


def test_wilcoxon_all_equal_is_p_one_without_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert RB.wilcoxon_signed_rank(np.ones(30), np.ones(30)) == (0.0, 1.0)
        assert RB.wilcoxon_signed_rank(np.zeros(0), np.zeros(0)) == (0.0, 1.0)


def test_robustness_rows_known_answers() -> None:
    n = 60
    base = np.ones(n)
    base[:10] = 0.0  # base hit rate 50/60
    flipped = base.copy()  # no change
    rotated = np.zeros(n)  # every hit lost
    rotated[:5] = 1.0  # ...except 5 queries that gain one
    rows = RB.robustness_rows(
        "retrieval_i2t",
        "quilt",
        "R@200",
        base,
        {("flip", 1.0): flipped, RB.Perturbation("rotation", 15): rotated},
        n_boot=200,
        seed=0,
    )
    assert [(r["perturbation"], r["strength"]) for r in rows] == [("flip", 1.0), ("rotation", 15.0)]
    f, r = rows
    assert f["ratio"] == 1.0 and f["delta"] == 0.0 and (f["ci_low"], f["ci_high"]) == (0.0, 0.0)
    assert f["p_value"] == 1.0 and f["significant"] is False and f["n"] == n
    assert r["base"] == pytest.approx(50 / 60) and r["perturbed"] == pytest.approx(5 / 60)
    assert r["ratio"] == pytest.approx(0.1) and r["delta"] == pytest.approx(-45 / 60)
    assert r["ci_high"] < 0 and r["p_value"] < 1e-6 and r["significant"] is True
    # 55 non-zero differences of size 1 (5 gains, 50 losses) share the mean rank (1 + 55) / 2 = 28
    assert r["wilcoxon_stat"] == 5 * 28.0  # min(T+, T-) = min(140, 1400)
    fields = "task dataset perturbation strength metric base perturbed ratio delta ci_low ci_high"
    assert list(r) == (fields + " wilcoxon_stat p_value significant n").split()
    alone = RB.robustness_rows(
        "retrieval_i2t", "quilt", "R@200", base, {("rotation", 15.0): rotated}, n_boot=200
    )
    assert alone[0] == r  # a row's bootstrap stream does not depend on the other rows
    with pytest.raises(RB.RobustnessError, match="unknown perturbation"):
        RB.robustness_rows("t", "d", "m", base, {("blur", 1.0): base})


# ------------------------------------------------------------------------------------------------
# MMD
# ------------------------------------------------------------------------------------------------
def test_mmd_hand_computed_two_points() -> None:
    x, y = np.array([[0.0], [1.0]]), np.array([[0.0], [3.0]])
    e = math.exp
    kxy = (1 + e(-4.5) + e(-0.5) + e(-2.0)) / 4  # d^2 = 0, 9, 1, 4 with sigma = 1
    unbiased = e(-0.5) + e(-4.5) - 2 * kxy
    biased = (2 + 2 * e(-0.5)) / 4 + (2 + 2 * e(-4.5)) / 4 - 2 * kxy
    assert EM.mmd_rbf(x, y, bandwidth=1.0) == pytest.approx(unbiased, abs=1e-14)
    assert EM.mmd_rbf(x, y, bandwidth=1.0, biased=True) == pytest.approx(biased, abs=1e-14)
    assert EM.median_bandwidth(np.array([[0.0], [1.0], [3.0]])) == 2.0  # distances 1, 3, 2


def test_mmd_against_itself() -> None:
    x = np.random.default_rng(1).normal(size=(40, 6))
    sigma = EM.median_bandwidth(np.concatenate([x, x]) - x.mean(axis=0))
    assert abs(EM.mmd_rbf(x, x, biased=True)) < 1e-12
    kbar = np.exp(-cdist(x, x, "sqeuclidean") / (2 * sigma**2))[~np.eye(40, dtype=bool)].mean()
    # unbiased MMD^2 of a sample against itself = -(2/m)(1 - mean off-diagonal kernel)
    assert EM.mmd_rbf(x, x) == pytest.approx(-(2 / 40) * (1 - kbar), rel=1e-10)


def test_mmd_blockwise_matches_direct_formula(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(30, 5)), rng.normal(0.3, 1.0, size=(25, 5))
    kxx, kyy, kxy = (np.exp(-cdist(a, b, "sqeuclidean") / (2 * 1.7**2)) for a, b in [(x, x), (y, y), (x, y)])
    direct = (kxx.sum() - 30) / (30 * 29) + (kyy.sum() - 25) / (25 * 24) - 2 * kxy.mean()
    whole = EM.mmd_rbf(x, y, bandwidth=1.7)
    monkeypatch.setattr(EM, "_BLOCK_ELEMS", 7 * 55)  # 7 rows per block, last block short
    assert EM.mmd_rbf(x, y, bandwidth=1.7) == pytest.approx(direct, abs=1e-13) == whole


def test_mmd_permutation_same_vs_shifted_distribution() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(100, 5)), rng.normal(size=(100, 5))
    same = EM.mmd_permutation_test(x, y, n_permutations=100, seed=0)
    assert same.n_permutations == 100 and same.p_value > 0.05
    assert abs(same.mmd) < 0.01 and same.null_low <= same.mmd <= same.null_high
    shifted = EM.mmd_permutation_test(x, y + 1.0, n_permutations=100, seed=0)
    assert shifted.p_value == pytest.approx(1 / 101) and shifted.mmd > 0.1 > shifted.null_high
    assert shifted.mmd == pytest.approx(EM.mmd_rbf(x, y + 1.0), abs=1e-12)
    assert EM.mmd_permutation_test(x, y + 1.0, n_permutations=100, seed=0) == shifted
    with pytest.raises(EM.EmbeddingError, match="at least 2"):
        EM.mmd_rbf(x[:1], y)


def test_mmd_permutation_ties_count_against_observed() -> None:
    # identical points: every kernel value is 1, so every assignment has MMD^2 = 1 + 1 - 2 = 0 and
    # all 20 null values tie with the observed one: p = (1 + 20) / (1 + 20) = 1
    res = EM.mmd_permutation_test(np.zeros((5, 3)), np.zeros((4, 3)), n_permutations=20, seed=1)
    assert (res.mmd, res.p_value, res.null_low, res.null_high) == (0.0, 1.0, 0.0, 0.0)
    assert res.bandwidth == 1.0  # median distance 0 falls back to 1


# ------------------------------------------------------------------------------------------------
# t-SNE and the plot
# ------------------------------------------------------------------------------------------------
def test_tsne_shape_determinism_and_separation() -> None:
    rng = np.random.default_rng(0)
    emb = np.concatenate([rng.normal(size=(30, 12)), rng.normal(size=(30, 12)) + 25.0])
    a = EM.tsne_2d(emb, seed=3)
    b = EM.tsne_2d(emb, seed=3)
    assert a.shape == (60, 2) and np.array_equal(a, b)
    d = cdist(a, a)
    np.fill_diagonal(d, np.inf)
    nearest = d.argmin(axis=1)
    assert ((nearest < 30) == (np.arange(60) < 30)).all()  # clusters stay apart in 2-D
    assert EM.tsne_2d(emb[:5], seed=0, perplexity=30).shape == (5, 2)  # perplexity clipped to 4/3
    joint = EM.tsne_joint({"m1": emb[:30], "m2": emb[30:]}, seed=3)
    np.testing.assert_array_equal(np.concatenate([joint["m1"], joint["m2"]]), a)


def test_plot_tsne_bytes_reproducible(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    pts = {"OPEN-PMC-18M": rng.normal(size=(40, 2)), "PMC-6M": rng.normal(size=(40, 2))}
    labels = ["radiology"] * 20 + ["microscopy"] * 20
    p1 = EM.plot_tsne(pts, labels, tmp_path / "a.png", title="t-SNE")
    p2 = EM.plot_tsne(pts, labels, tmp_path / "sub" / "b.png", title="t-SNE")
    data = p1.read_bytes()
    assert data == p2.read_bytes() and data[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"Software" not in data and b"tIME" not in data
    width = struct.unpack(">I", data[16:20])[0]
    assert width > 700  # two panels side by side
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "sub"]  # no temp files left
    with pytest.raises(EM.EmbeddingError, match="labels"):
        EM.plot_tsne(pts, labels[:5], tmp_path / "c.png")


# ------------------------------------------------------------------------------------------------
# Comparing evaluated models (rule compare_embeddings)
# ------------------------------------------------------------------------------------------------
def _npz(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    np.savez(path, **arrays)
    return path


def test_compare_models_known_answers(tmp_path: Path) -> None:
    from pmcflow.encoders import compare as CM

    rng = np.random.default_rng(0)
    base = rng.normal(size=(40, 6)).astype(np.float32)
    labels = np.asarray(["a"] * 20 + ["b"] * 20)
    models = {
        "m1": _npz(tmp_path / "m1.npz", {"bench": base, "bench:labels": labels, "only-m1": base}),
        "same": _npz(tmp_path / "same.npz", {"bench": base.copy(), "bench:labels": labels}),
        "shifted": _npz(tmp_path / "shifted.npz", {"bench": base + 3.0, "bench:labels": labels}),
        "wide": _npz(tmp_path / "wide.npz", {"bench": np.tile(base, (1, 2)), "bench:labels": labels}),
    }
    settings = {"max_images": 30, "permutations": 50, "perplexity": 10}
    out = CM.compare_models(models, settings, 5, tmp_path / "out")
    mmd = {
        (r["model_a"], r["model_b"]): r for r in pl.read_parquet(tmp_path / "out" / "mmd.parquet").to_dicts()
    }
    assert len(mmd) == 6  # every pair of the four models
    # The same embeddings: MMD^2 <= 0 (unbiased) and every permutation ties or beats it.
    assert mmd[("m1", "same")]["mmd2"] <= 1e-12 and mmd[("m1", "same")]["p_value"] > 0.5
    # Shifted by 3 in every dimension: far apart, the smallest p a 50-permutation test gives.
    assert mmd[("m1", "shifted")]["p_value"] == pytest.approx(1 / 51) and mmd[("m1", "shifted")]["mmd2"] > 0.5
    # Different widths cannot be pooled: a row that says why, no numbers.
    assert "widths differ" in mmd[("m1", "wide")]["skipped"] and mmd[("m1", "wide")]["mmd2"] is None
    assert mmd[("m1", "same")]["n"] == 30 and mmd[("m1", "same")]["skipped"] is None
    tsne = pl.read_parquet(tmp_path / "out" / "tsne.parquet")
    assert tsne.group_by("model").len().sort("model")["len"].to_list() == [30] * 4
    idx = tsne.filter(pl.col("model") == "m1")["index"].to_list()
    assert idx == sorted(idx) and len(set(idx)) == 30 and idx == CM.subset(40, 30, 5, "bench").tolist()
    assert tsne.filter(pl.col("model") == "m1")["label"].to_list() == labels[idx].tolist()
    assert out["benchmarks"]["bench"]["tsne_png"] == "tsne/bench.png"
    assert (tmp_path / "out" / "tsne" / "bench.png").read_bytes()[:4] == b"\x89PNG"
    assert "not by every model" in out["benchmarks"]["only-m1"]["skipped"]
    # Byte-reproducible; a different seed draws another subset.
    CM.compare_models(models, settings, 5, tmp_path / "again")
    for name in ("mmd.parquet", "tsne.parquet", "embeddings.json", "tsne/bench.png"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name
    assert CM.subset(40, 30, 6, "bench").tolist() != idx
    assert CM.subset(10, 30, 5, "bench").tolist() == list(range(10))
    with pytest.raises(CM.CompareError, match="two or more"):
        CM.compare_models({"m1": models["m1"]}, settings, 5, tmp_path / "one")
