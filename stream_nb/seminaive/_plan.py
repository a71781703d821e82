"""Which counts score each feature of a TAN or KDB event in the batch kernel.

Between two structure rebuilds every feature's parents are fixed, so the
kernel turns the structure once into the dense block's terms: for each column
``c`` (feature ``j``) the columns of its parents, best first, and whether it
has family counts (``|pa(j)| ≥ 2``). An event's terms then follow from the
columns its items fill (:meth:`Plan.rows`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence

from stream_nb.seminaive._nodes import Node

__all__ = ["Plan", "family_terms"]

_log = math.log
_PAIR = (1.0, -1.0)  # the signs of a pair term's two rows


class Plan:
    """A structure in dense-block terms (see the module docstring).

    Parameters
    ----------
    parents
        Feature -> its parents, best first (the learner's structure).
    families
        Feature -> its family counts (features with two or more parents).
    feat
        Feature -> its column in the dense block.
    items
        The block's ``(feature, value)`` of every item index.
    col_of
        The column of every item index.
    n_items
        The block's item capacity ``D`` (table rows are ``slot · D + parent``).

    Examples
    --------
    >>> plan = Plan({"b": ("a",)}, {}, {"a": 0, "b": 1}, [("", ""), ("a", "u"), ("b", "v")],
    ...             [0, 0, 1], n_items=4)
    >>> plan.rows([1, 2], lambda item: True, lambda node: True)
    ([5, 9, 21], [1.0, 1.0, -1.0], [0], [])
    """

    __slots__ = ("col_of", "families", "items", "n_items", "parent_cols")

    def __init__(
        self,
        parents: Mapping[Hashable, tuple[Hashable, ...]],
        families: Mapping[Hashable, dict[tuple[Hashable, ...], Node]],
        feat: Mapping[Hashable, int],
        items: Sequence[tuple[Hashable, Hashable]],
        col_of: Sequence[int],
        *,
        n_items: int,
    ) -> None:
        self.items = items
        self.col_of = col_of
        self.n_items = n_items
        # column -> parent columns, best first (parents the block does not hold: never present)
        self.parent_cols: dict[int, tuple[int, ...]] = {}
        # column -> (its family counts, parent columns) for features with two or more parents
        self.families: dict[int, tuple[dict[tuple[Hashable, ...], Node], tuple[int, ...]]] = {}
        for j, pa in parents.items():
            c = feat.get(j)
            if c is None or not pa:
                continue
            cols = tuple(feat[p] for p in pa if p in feat)
            self.parent_cols[c] = cols
            if len(pa) >= 2:
                self.families[c] = (families[j], tuple(feat.get(p, -1) for p in pa))

    def rows(
        self,
        idx: list[int],
        qualifies: Callable[[int], bool],
        enough: Callable[[Node], bool],
    ) -> tuple[list[int], list[float], list[int], list[tuple[int, Node]]]:
        """The count rows (``slot · D + parent``) of an event of items ``idx`` and the sign
        of each row's log, the columns scored by Naive Bayes, and ``(item, family node)``
        of the features scored by family counts.

        A feature with parents takes the first parent present whose item
        ``qualifies`` (``N(x_p) ≥ min_parent_count``): two rows, ``+log(N(y, x_p,
        x_j) + α)`` and ``−log(N(y, x_p, j) + α S_j)``. Naive Bayes takes the row
        ``+log(N(y, x_j) + α)``; its denominator ``N(y, j) + α S_j`` is the caller's.
        A family node scores its feature when every parent is present and
        ``enough(node)`` (weight ``≥ min_parent_count``).
        """
        d = self.n_items
        col_of = self.col_of
        at = {col_of[a]: a for a in idx}
        parent_cols = self.parent_cols
        families = self.families
        rows: list[int] = []
        signs: list[float] = []
        naive: list[int] = []
        nodes: list[tuple[int, Node]] = []
        for a in idx:
            c = col_of[a]
            pcs = parent_cols.get(c)
            if pcs is not None:
                if c in families:
                    fam, of = families[c]
                    key = []
                    for pc in of:
                        p = at.get(pc)
                        if p is None:
                            break
                        key.append(self.items[p][1])
                    else:
                        node = fam.get(tuple(key))
                        if node is not None and enough(node):
                            nodes.append((a, node))
                            continue
                for pc in pcs:
                    p = at.get(pc)
                    if p is not None and qualifies(p):
                        rows.append(a * d + p)
                        rows.append((d + c) * d + p)
                        signs += _PAIR
                        break
                else:
                    rows.append(a * d + a)
                    signs.append(1.0)
                    naive.append(c)
                continue
            rows.append(a * d + a)
            signs.append(1.0)
            naive.append(c)
        return rows, signs, naive, nodes


def family_terms(
    nodes: list[tuple[int, Node]],
    items: Sequence[tuple[Hashable, Hashable]],
    n_values: Callable[[int], float],
    a: float,
) -> list[float]:
    """``Σ log((N(y, x_pa, x_j) + α) / (N(y, x_pa, j) + α S_j))`` by class over the
    family ``nodes`` of :meth:`Plan.rows` (``n_values(item)``: ``S_j`` of the item's feature).

    Examples
    --------
    >>> node = [[2.0, 0.0], {"v": [2.0, 0.0]}]
    >>> family_terms([(1, node)], [("", ""), ("b", "v")], lambda item: 2.0, 1.0)
    [-0.2876820724517809, -0.6931471805599453]
    """
    out: list[float] | None = None
    log = _log
    for item, node in nodes:
        sa = a * n_values(item)
        ctx = node[0]
        row = node[1].get(items[item][1], [0.0] * len(ctx))
        terms = [log((r + a) / (c + sa)) for r, c in zip(row, ctx, strict=True)]
        out = terms if out is None else [u + v for u, v in zip(out, terms, strict=True)]
    assert out is not None
    return out
