from pathlib import Path

import pytest

from trackeval.api import load_config
from trackeval.benchmarks.umd.config import UMD_ORGANS
from trackeval.errors import ConfigError


def test_default_umd_label_map_is_the_13_organs_in_order():
    labels = load_config().umd.labels
    assert list(labels) == list(UMD_ORGANS)
    assert list(labels.values()) == list(range(1, 14))
    assert UMD_ORGANS[0] == "liver" and UMD_ORGANS[-1] == "stomach" and len(UMD_ORGANS) == 13


def test_file_and_overrides(tmp_path: Path):
    f = tmp_path / "params.yaml"
    f.write_text("umd:\n  nsd_tolerance_mm: 2.0\n  labels: {liver: 1, kidneys: [2, 3]}\nbootstrap: {seed: 4}\n")
    cfg = load_config(f, ["umd.hd_percentile=90", "engine.executor=local"])
    assert cfg.umd.nsd_tolerance_mm == 2.0 and cfg.umd.hd_percentile == 90.0
    assert cfg.umd.labels == {"liver": 1, "kidneys": (2, 3)}
    assert cfg.bootstrap.seed == 4 and cfg.engine.executor == "local"
    assert cfg.digest() != load_config().digest()


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("umd.nsd_tolerance_mm=-1", "umd.nsd_tolerance_mm"),
        ("umd.labels={Liver: 1}", "umd.labels"),
        ("umd.labels={a: 1, b: 1}", "used by both"),
        ("umd.labels={a: 0}", "field umd.labels.a: Input should be greater than 0"),
        ("umd.typo=3", "umd.typo"),
        ("bootstrap.n_resamples=0", "bootstrap.n_resamples"),
        ("novalue", "key=value"),
    ],
)
def test_invalid_config_names_the_field(override: str, needle: str):
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")):
        load_config(None, [override])


def test_unreadable_config_file(tmp_path: Path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(bad)


def test_params_yaml_pipeline_section_is_ignored(tmp_path: Path):
    f = tmp_path / "params.yaml"
    f.write_text("pipeline:\n  demo: {subjects: 3}\numd:\n  nsd_tolerance_mm: 2.0\n")
    assert load_config(f).umd.nsd_tolerance_mm == 2.0


def test_a_shared_params_file_keeps_the_users_own_sections(tmp_path: Path, caplog) -> None:
    """A DVC repository has one params.yaml: trackeval reads its own sections and ignores the user's (no
    warning); a near miss of a trackeval section is ignored with a "did you mean" warning; unknown keys inside a
    trackeval section, and an unknown section in an override, stay errors."""
    params = tmp_path / "params.yaml"
    params.write_text("mymodel:\n  lr: 0.1\n  layers: [64, 64]\npredict: {batch: 8}\numd:\n  nsd_tolerance_mm: 2\n")
    with caplog.at_level("WARNING", logger="trackeval.config"):
        cfg = load_config(params)
    assert cfg.umd.nsd_tolerance_mm == 2.0 and not hasattr(cfg, "mymodel") and caplog.records == []

    params.write_text("umdd:\n  nsd_tolerance_mm: 2\nbootstrp: {n_resamples: 10}\n")
    with caplog.at_level("WARNING", logger="trackeval.config"):
        cfg = load_config(params)
    assert cfg.umd.nsd_tolerance_mm == load_config().umd.nsd_tolerance_mm  # the typo's values are not applied
    assert [r.getMessage() for r in caplog.records] == [
        f"config file {params}: top-level key 'bootstrp' is not a trackeval section and is ignored "
        "(did you mean 'bootstrap'?)",
        f"config file {params}: top-level key 'umdd' is not a trackeval section and is ignored (did you mean 'umd'?)",
    ]

    params.write_text("umd:\n  nsd_tolerance: 2\n")
    with pytest.raises(ConfigError, match=r"field umd\.nsd_tolerance: Extra inputs are not permitted"):
        load_config(params)
    with pytest.raises(ConfigError, match=r"field mymodel: Extra inputs are not permitted"):
        load_config(None, ["mymodel.lr=0.1"])


def test_the_users_own_section_close_to_a_trackeval_name_is_not_a_typo(tmp_path: Path, caplog) -> None:
    """Issue 37: ``train`` is 0.77 similar to ``tracking`` but holds none of its keys: the user's own section, no
    warning (every stage used to warn "did you mean 'tracking'?"); ``trackin: {uri: ...}`` holds a tracking key."""
    params = tmp_path / "params.yaml"
    params.write_text("train: {lr: 0.01, epochs: 3}\ngates: [a, b]\ntrackin: {uri: 'sqlite:///x.db'}\n")
    with caplog.at_level("WARNING", logger="trackeval.config"):
        cfg = load_config(params)
    assert cfg.tracking.uri == load_config().tracking.uri
    assert [r.getMessage() for r in caplog.records] == [
        f"config file {params}: top-level key 'trackin' is not a trackeval section and is ignored "
        "(did you mean 'tracking'?)"
    ]
