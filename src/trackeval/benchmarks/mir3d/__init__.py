"""3D-MIR: 3D medical image retrieval (Ben Abacha et al., arXiv:2311.13752) on its released labels and splits.

Ground truth (``--ground-truth DIR``, the original repository layout):

* ``DIR/3DMIR_labels/<region>_labels_and_captions.csv``: columns ``name, ..., lesion_group, cancer_flag, ...``
  (UTF-8, a BOM is tolerated). One file per region (the organ searched); ``organ`` is the source scan's task.
* ``DIR/Data_Splits/<region>_full_train_split.csv`` (the region's **index**) and ``..._test_split.csv`` (its
  **queries**): the volume name is the LAST column (lung files have no index column).

Predictions (``--predictions rankings.csv``): columns ``region,query,rank,retrieved[,score]``, one row per
retrieved volume, ``rank`` from 1; or JSON Lines (``.jsonl``/``.ndjson``) with the same fields.

Relevance of a retrieved volume to a query, both looked up in the region's label table: ``flag`` = equal
``cancer_flag``; ``group`` = equal ``lesion_group`` (-1 = no lesion matches -1). Per query and relevance:
``p_at_<k>`` for ``mir3d.ks`` and ``ap_at_<ap_k>`` (see :mod:`trackeval.metrics.ranking` and the
``mir3d.ap_denominator`` / ``mir3d.p10_mode`` switches in :class:`~trackeval.config.Mir3dConfig`).

Aggregates: ``mir3d/<flag|group>/<metric>`` = macro mean over the evaluated regions of the per-region mean over
queries, and ``mir3d/<flag|group>/<metric>/by_region/<region>``; 95% CIs by a bootstrap over queries (one set of
resamples shared by every metric). Counts in ``summary`` (``mir3d/n_queries``, ``mir3d/n_missing_queries``,
``mir3d/n_short_lists``, ``mir3d/audit/n_query_index_overlap``, ...).

Validation (an :class:`InputError` naming the file, the line and the field): unknown region, a query that is not
in the region's test split, a retrieved volume that is not in the region's index, a list retrieving its own
query, the same volume twice in one list, ranks that are not ``1..n``. Not errors, but counted and reported:
a list shorter than the deepest cut-off (padded with non-relevant items), a test query without any ranking
(status ``missing_prediction``, every metric 0, named in one warning line; counted as ``n_missing_queries`` and
``n_missing_predictions``), rows of a region left out by ``mir3d.regions``. No ranking for any query is an error
naming the predictions file. Leakage audit:
volumes that are both index and query of one region are listed in ``warnings``.

Scoring is one vectorised pass per region (no per-case files to read), so it runs in-process.

Modules: :mod:`~trackeval.benchmarks.mir3d.adapter` (scoring, aggregates, :func:`evaluate`, the spec),
:mod:`~trackeval.benchmarks.mir3d.readers` (ground truth and rankings) and :mod:`~trackeval.benchmarks.mir3d.config`
(the ``mir3d`` section).
"""

from __future__ import annotations

from trackeval.benchmarks.mir3d.adapter import SPEC, evaluate

__all__ = ["SPEC", "evaluate"]
