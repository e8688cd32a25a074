"""Ranked retrieval lists: the one validator of ``query, rank, retrieved`` rows, whatever the benchmark.

A list is valid when every rank is an integer >= 1, its ranks are exactly ``1..n`` (no gap, none repeated),
no item is retrieved twice and the query does not retrieve itself. Each :class:`InputError` names the file,
the line, the case (the query) and the field (``rank`` or ``retrieved``). What the query and the items must be
(known ids, an index) is the caller's business, checked before or after :meth:`RankedLists.add`.
"""

from __future__ import annotations

from pathlib import Path

from trackeval.errors import InputError


class RankedLists:
    """Rows collected into per-query lists, each row checked as it is added (so the first bad line is named).

    Args:
        file: the rankings file, named in every error.
        list_name: how a gap error names the list (e.g. ``"colon list"``).
    """

    def __init__(self, file: Path | str, *, list_name: str = "list") -> None:
        self.file = str(file)
        self.list_name = list_name
        self._ranks: dict[str, dict[int, tuple[str, int]]] = {}  # query -> rank -> (retrieved, line)
        self._items: dict[str, dict[str, int]] = {}  # query -> retrieved -> line

    def add(self, line: int, query: str, rank: str, retrieved: str) -> None:
        """Check one row (``rank`` as read, e.g. ``"3"``) against the rows added before it and record it."""
        where = {"file": self.file, "case_id": query or None}
        try:
            r = int(rank)
        except ValueError:
            raise InputError(f"line {line}: rank must be an integer, got {rank!r}", field="rank", **where) from None
        if r < 1:
            raise InputError(f"line {line}: rank must be >= 1 (ranks start at 1), got {r}", field="rank", **where)
        if retrieved == query:
            raise InputError(f"line {line}: the query retrieves itself", field="retrieved", **where)
        items = self._items.setdefault(query, {})
        if retrieved in items:
            raise InputError(
                f"line {line}: {retrieved!r} is retrieved twice for this query (also on line {items[retrieved]})",
                field="retrieved",
                **where,
            )
        ranks = self._ranks.setdefault(query, {})
        if r in ranks:
            raise InputError(
                f"line {line}: rank {r} appears twice for this query (also on line {ranks[r][1]})",
                field="rank",
                **where,
            )
        items[retrieved] = line
        ranks[r] = (retrieved, line)

    def lists(self) -> dict[str, list[str]]:
        """``{query: retrieved items in rank order}`` in first-seen query order; a gap in the ranks is an error."""
        out: dict[str, list[str]] = {}
        for query, ranks in self._ranks.items():
            n = len(ranks)
            gap = next((r for r in range(1, n + 1) if r not in ranks), None)
            if gap is not None:
                after = min(r for r in ranks if r > gap)
                raise InputError(
                    f"ranks of this {self.list_name} are not 1..{n}: rank {gap} is missing "
                    f"(rank {after} is on line {ranks[after][1]})",
                    file=self.file,
                    case_id=query,
                    field="rank",
                )
            out[query] = [ranks[r][0] for r in range(1, n + 1)]
        return out
