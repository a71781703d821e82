"""Count nodes: the shape shared by the pair counts and KDB's family counts.

A *node* is ``[ctx, values]`` for one context (a parent value ``(i, x_i)``, or
a configuration of parent values) and one child feature ``j``:
``ctx[k] = N(y_k, context, j)``, the weight of class ``k`` with the context and
``j`` present, and ``values[x_j][k] = N(y_k, context, x_j)``. Vectors are lists
indexed by class, in the order classes were first learned. A *table* maps an
outer key to ``{inner key: node}``: the sparse pair counts
``pairs[(i, x_i)][j]`` (:mod:`stream_nb.seminaive._store`) and the family
counts ``families[j][x_pa(j)]`` (:mod:`stream_nb.seminaive._dependence`).

The hot learning loop of the pair store updates its nodes inline; everything
else goes through these functions.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from stream_nb._exceptions import ModelStateError
from stream_nb._state import read_count, read_pairs

__all__ = [
    "Node",
    "Table",
    "add_class",
    "add_node",
    "add_vector",
    "count",
    "load_node",
    "load_vector",
    "rescale",
    "size",
]

Node = list[Any]  # [ctx: list by class, values: dict x_j -> list by class]
Table = Mapping[Any, Mapping[Any, Node]]


def count(
    nodes: dict[Any, Node], key: Hashable, value: Hashable, k: int, w: float, n_classes: int
) -> None:
    """Add ``w`` for class index ``k`` to node ``nodes[key]`` and to its row ``value``
    (each created as ``n_classes`` zeros when missing).

    Examples
    --------
    >>> nodes = {}
    >>> count(nodes, "j", "x", 1, 2.0, n_classes=2)
    >>> nodes
    {'j': [[0.0, 2.0], {'x': [0.0, 2.0]}]}
    """
    node = nodes.get(key)
    if node is None:
        node = nodes[key] = [[0.0] * n_classes, {}]
    node[0][k] += w
    row = node[1].get(value)
    if row is None:
        row = node[1][value] = [0.0] * n_classes
    row[k] += w


def add_node(
    nodes: dict[Any, Node],
    key: Hashable,
    node: Node,
    cmap: list[int],
    vmap: Mapping[Hashable, Hashable],
    factor: float,
    n_classes: int,
) -> None:
    """Add ``factor ×`` another model's ``node`` to ``nodes[key]``: class ``k`` there is
    ``cmap[k]`` here (of ``n_classes``), child value ``v`` there is ``vmap[v]`` here."""
    ctx, values = node
    dst = nodes.get(key)
    if dst is None:
        dst = nodes[key] = [[0.0] * n_classes, {}]
    add_vector(dst[0], ctx, cmap, factor)
    rows = dst[1]
    for v, row in values.items():
        t = vmap[v]
        target = rows.get(t)
        if target is None:
            target = rows[t] = [0.0] * n_classes
        add_vector(target, row, cmap, factor)


def add_class(table: Table) -> None:
    """Append a ``0.0`` (a new class) to every vector of ``table``."""
    for nodes in table.values():
        for ctx, values in nodes.values():
            ctx.append(0.0)
            for row in values.values():
                row.append(0.0)


def rescale(table: Table, factor: float) -> None:
    """Multiply every weight of ``table`` by ``factor``."""
    for nodes in table.values():
        for ctx, values in nodes.values():
            ctx[:] = [v * factor for v in ctx]
            for row in values.values():
                row[:] = [v * factor for v in row]


def size(table: Table) -> int:
    """Stored numbers: ``K (1 + values)`` per node."""
    n = 0
    for nodes in table.values():
        for ctx, values in nodes.values():
            n += len(ctx) * (1 + len(values))
    return n


def add_vector(dst: list[float], src: list[float], cmap: list[int], factor: float) -> None:
    """``dst[cmap[k]] += factor × src[k]``: add a class vector of another model."""
    for k, v in enumerate(src):
        dst[cmap[k]] += v * factor


def load_vector(values: Any, n_classes: int, where: str = "state") -> list[float]:
    """A class vector from a state: ``n_classes`` finite weights ≥ 0."""
    if not isinstance(values, list) or len(values) != n_classes:
        raise ModelStateError(
            f"{where}: count vectors must hold one number per class ({n_classes})"
        )
    return [read_count(v, f"{where}[{k}]") for k, v in enumerate(values)]


def load_node(
    ctx: Any, rows: Any, n_classes: int, where: str, value: Callable[[Any, str], Hashable]
) -> tuple[list[float], dict[Hashable, list[float]]]:
    """``(ctx, values)`` of a node from a state entry ``where`` = ``[key, ctx, rows]``
    (vectors checked by :func:`load_vector`, values read with ``value``)."""
    return load_vector(ctx, n_classes, f"{where}[1]"), read_pairs(
        rows, f"{where}[2]", lambda r, w: load_vector(r, n_classes, w), key=value
    )
