"""Config values no kernel can compute with: one-line ``invalid config`` error naming the field, exit 2.

Numbers beyond int64 / float range, negative seeds, NaN and infinity where a finite number is needed, empty or
repeated lists where the protocol needs a list, and sizes that would allocate without bound; given with
``--set`` and in a params file. The config is validated before any input is read, so ``--out`` never exists.
(Values the sections refused already, such as ``bootstrap.confidence=.nan`` or ``mir3d.ks=[]``, are covered by
tests/test_config.py.)
"""

from __future__ import annotations

import pytest

from tests.conftest import umd_argv

BIG = str(2**63)  # one beyond int64
HUGE = "99999999999999999999999999"

#: (override, field named in the message)
BAD_VALUES = [
    ("bootstrap.seed=-1", "bootstrap.seed"),
    (f"bootstrap.seed={BIG}", "bootstrap.seed"),
    (f"bootstrap.n_resamples={HUGE}", "bootstrap.n_resamples"),
    ("bootstrap.n_resamples=1000001", "bootstrap.n_resamples"),
    ("engine.scheduler_timeout_s=.inf", "engine.scheduler_timeout_s"),
    (f"engine.workers={BIG}", "engine.workers"),
    ("engine.start_method=threads", "engine.start_method"),
    ("tracking.backoff_s=.inf", "tracking.backoff_s"),
    (f"tracking.http_timeout_s={HUGE}", "tracking.http_timeout_s"),
    ("gate.seed=-5", "gate.seed"),
    (f"gate.n_resamples={BIG}", "gate.n_resamples"),
    ("gate.margins={umd: .inf}", "gate.margins.umd"),
    ("gate.floors={umd: .nan}", "gate.floors.umd"),
    ("gate.floors={umd: -.inf}", "gate.floors.umd"),
    ("gate.floors={umd: 1e400}", "gate.floors.umd"),
    ("imis.seed=-1", "imis.seed"),
    (f"imis.seed={HUGE}", "imis.seed"),
    ("imis.eval_size=100000", "imis.eval_size"),
    (f"imis.box_jitter_px={BIG}", "imis.box_jitter_px"),
    ("imis.geometry_tolerance=.inf", "imis.geometry_tolerance"),
    (f"imis.labels={{liver: {BIG}}}", "imis.labels.liver"),
    ("imis.noc_thresholds=[.nan]", "imis.noc_thresholds.0"),
    (f"mir3d.ks=[1, {BIG}]", "mir3d.ks.1"),
    (f"mir3d.ap_k={HUGE}", "mir3d.ap_k"),
    ("xray.ret.ks=[]", "xray.ret.ks"),
    ("xray.ret.ks=[5, 5]", "xray.ret.ks"),
    (f"xray.ret.ks=[{BIG}]", "xray.ret.ks.0"),
    ("xray.cls.ece_bins=1000000000", "xray.cls.ece_bins"),
    ("xray.cls.min_positives=-1", "xray.cls.min_positives"),
    ("xray.report.cider_sigma=.inf", "xray.report.cider_sigma"),
    (f"xray.seg.labels={{lung: {BIG}}}", "xray.seg.labels.lung"),
    (f"xray.loc.max_dets={HUGE}", "xray.loc.max_dets"),
    ("umd.nsd_tolerance_mm=.inf", "umd.nsd_tolerance_mm"),
    ("umd.hd_percentile=.nan", "umd.hd_percentile"),
    ("umd.geometry_tolerance=.inf", "umd.geometry_tolerance"),
    (f"umd.labels={{liver: {BIG}}}", "umd.labels.liver"),
    ("umd.tracking_typo=1", "umd.tracking_typo"),
    ("umd.metrics=[]", "umd.metrics"),
    ("umd.metrics=[iou]", "umd.metrics"),
    ("umd.metrics=[dsc, dsc]", "umd.metrics"),
    ("tracking.lock_timeout_s=0", "tracking.lock_timeout_s"),
    ("tracking.lock_timeout_s=.inf", "tracking.lock_timeout_s"),
]


@pytest.mark.parametrize(("override", "field"), BAD_VALUES, ids=[o for o, _ in BAD_VALUES])
def test_bad_override_is_one_line_naming_the_field(cli, tmp_path, override, field):
    out = tmp_path / "out"
    key = override.partition("=")[0]
    res = cli(*umd_argv(tmp_path / "gt", tmp_path / "pred", out, "--set", override))
    res.one_line_error(f"invalid config (defaults + --set {key}): field {field}:", rc=2)
    assert not out.exists()


@pytest.mark.parametrize(
    ("yaml_text", "field"),
    [
        ("bootstrap:\n  seed: -3\n", "bootstrap.seed"),
        ("engine:\n  scheduler_timeout_s: 1.0e400\n", "engine.scheduler_timeout_s"),
        ("gate:\n  floors: {umd: .nan}\n", "gate.floors.umd"),
        (f"gate:\n  seed: {HUGE}\n", "gate.seed"),
        ("xray:\n  ret:\n    ks: []\n", "xray.ret.ks"),
        ("xray:\n  ret:\n    ks: [3, 3]\n", "xray.ret.ks"),
    ],
    ids=["negative-seed", "float-overflow", "nan-floor", "huge-seed", "empty-ks", "repeated-ks"],
)
def test_bad_params_file_value_names_file_and_field(cli, tmp_path, yaml_text, field):
    params = tmp_path / "params.yaml"
    params.write_text(yaml_text)
    out = tmp_path / "out"
    res = cli(*umd_argv(tmp_path / "gt", tmp_path / "pred", out, "--config", params))
    res.one_line_error(f"invalid config ({params}): field {field}:", rc=2)
    assert not out.exists()


def test_largest_allowed_values_are_accepted():
    """The bounds are inclusive and the defaults unchanged (the digest of the default config is stable)."""
    from trackeval.api import load_config

    cfg = load_config(
        None,
        [
            f"bootstrap.seed={2**63 - 1}",
            "bootstrap.n_resamples=1000000",
            "imis.eval_size=8192",
            "xray.cls.ece_bins=10000",
            "xray.ret.ks=[10, 1]",
            "imis.model_timeout_s=604800",
        ],
    )
    assert cfg.bootstrap.seed == 2**63 - 1 and cfg.xray.ret.ks == (1, 10) and cfg.imis.model_timeout_s == 604800
    assert load_config().imis.model_timeout_s == 300.0
