"""3D-MIR protocol configuration: cut-offs, the AP denominator, the original P@10 quirk, regions."""

from __future__ import annotations

from typing import Literal

from pydantic import field_validator

from trackeval.config.base import KEY_TOKEN, PositiveInt, Section, distinct


class Mir3dConfig(Section):
    """3D-MIR retrieval protocol switches (every one is logged as a param).

    ``ks``: cut-offs of the precision keys ``p_at_<k>`` (default 1, 3, 5, 10 as in the paper).
    ``ap_k``: cut-off of average precision, key ``ap_at_<ap_k>``; ranks below ``max(ks + (ap_k,))`` are ignored.
    ``ap_denominator``: ``retrieved_in_topk`` (default; the original notebook: sklearn's
    ``average_precision_score`` on the top-``ap_k`` list, i.e. divided by the hits in the top ``ap_k``; no
    hit -> 0) or ``total_in_index`` (trec_eval ``map_cut``: divided by the query's relevant items in the index).
    ``p10_mode``: ``correct`` (default) or ``original_quirk``: ``p_at_10`` is then the published per-query
    ``(10 * P@10 + P@5) / 11`` (the notebook averages its stale P@5 column into the P@10 row mean).
    ``regions``: the regions to evaluate; ``None`` = every region found in the ground-truth folder. A selected
    region without any ranking has all its queries scored 0 (status ``missing_prediction``).
    """

    ks: tuple[PositiveInt, ...] = (1, 3, 5, 10)
    ap_k: PositiveInt = 10
    ap_denominator: Literal["retrieved_in_topk", "total_in_index"] = "retrieved_in_topk"
    p10_mode: Literal["correct", "original_quirk"] = "correct"
    regions: tuple[str, ...] | None = None

    @field_validator("ks")
    @classmethod
    def _check_ks(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(sorted(distinct(v, "the cut-offs ks")))

    @field_validator("regions")
    @classmethod
    def _check_regions(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is None:
            return v
        distinct(v, "regions (null for every region)")
        for region in v:
            if not KEY_TOKEN.fullmatch(region):
                raise ValueError(f"region {region!r} must be lowercase letters, digits and '_'")
        return v

    @property
    def depth(self) -> int:
        """Ranks read from each list: the largest cut-off of any metric."""
        return max(*self.ks, self.ap_k)
