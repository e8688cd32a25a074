"""UMD: 13-organ segmentation on paired PET vs CT/MRI scans of the same subjects.

Inputs: ``GT_DIR/manifest.csv`` (``case_id,subject_id,modality`` + optional ``site``, ``scanner`` and free
group columns; modality in {ct, mri, pet}), ``GT_DIR/<case_id>.nii.gz`` and ``PRED_DIR/<case_id>.nii.gz``
integer label maps on the same grid (``<case_id>.nii`` is read as well; both files for one case is an error):
the ``generic`` layout. The ``nnunet`` layout reads an nnU-Net v2 raw dataset (``dataset.json`` with
``labelsTs/`` or ``labelsTr/``; predictions as ``nnUNetv2_predict`` writes them): see
:mod:`trackeval.benchmarks.umd.nnunet`. The layout is told from the ground truth's files (``--format`` forces it)
and recorded as ``config.format``; ``--nnunet-summary`` also writes nnU-Net's ``summary.json`` beside results.json.
A case without a prediction is counted and named in one warning line (``umd.missing_prediction``: ``worst``,
``exclude`` or ``error``); no prediction matching any case is an error naming the folder. Per case x organ:
dsc (primary), nsd@tolerance, hd95 (+ iou, hd, assd in the per-case records); ``umd.metrics`` selects a subset
(``[dsc, iou]``: no surface distances), the keys of the others are then absent from the records and the
aggregates.

Aggregates (metric m in dsc, nsd, hd95): ``umd/m`` = mean over organs of the per-organ means (nnU-Net
``foreground_mean``), ``umd/m/by_organ/<organ>``, ``umd/m/by_modality/<mod>`` and
``umd/m/by_modality/<mod>/by_organ/<organ>``; subject-level (``bootstrap.cluster``) bootstrap CIs on the
headline, per-organ and per-modality keys. Paired modality gap ``umd/dsc_gap/<a>_vs_<b>`` (+
``/by_organ/<organ>``): per subject and organ ``dsc(a) - dsc(b)`` (a subject's cases of one modality are averaged
first), bootstrapped over subjects.

Modules: :mod:`~trackeval.benchmarks.umd.adapter` (inputs, :func:`evaluate`, the spec),
:mod:`~trackeval.benchmarks.umd.config` (the ``umd`` section), :mod:`~trackeval.benchmarks.umd.cases` (layouts,
manifest, the files of each case), :mod:`~trackeval.benchmarks.umd.scoring` (one case in a worker),
:mod:`~trackeval.benchmarks.umd.aggregates`, :mod:`~trackeval.benchmarks.umd.nnunet` (the nnU-Net v2 layout and
summary.json) and :mod:`~trackeval.benchmarks.umd.audit` (``trackeval audit umd``).
"""

from __future__ import annotations

from trackeval.benchmarks.umd.adapter import SPEC, evaluate
from trackeval.benchmarks.umd.aggregates import aggregate

__all__ = ["SPEC", "aggregate", "evaluate"]
