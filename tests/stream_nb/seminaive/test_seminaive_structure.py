"""TAN and KDB recover the structure of a known tree-structured Bayesian network."""

from __future__ import annotations

from _bn import TREE, bn_stream

from stream_nb import KDB, TAN

TRUE_EDGES = {frozenset((f, p)) for f, p in TREE.items() if p is not None}


def test_tan_recovers_the_true_tree() -> None:
    model = TAN(rebuild_every=500)
    for x, y in bn_stream(seed=1, n=2000):
        model.learn_one(x, y)
    edges = {frozenset((f, pa[0])) for f, pa in model.parents.items() if pa}
    assert edges == TRUE_EDGES
    roots = [f for f, pa in model.parents.items() if not pa]
    assert len(roots) == 1  # one connected tree


def test_tan_structure_is_rebuilt_on_schedule() -> None:
    model = TAN(rebuild_every=100)
    events = list(bn_stream(seed=2, n=400))
    for x, y in events[:31]:
        model.learn_one(x, y)
    assert model.parents == {}  # first rebuild after 32 units of weight
    model.learn_one(*events[31])
    assert set(model.parents) == set(TREE)


def test_kdb_k1_recovers_the_true_parents() -> None:
    model = KDB(k=1, rebuild_every=500)
    for x, y in bn_stream(seed=3, n=2000):
        model.learn_one(x, y)
    assert model.parents == {f: () if p is None else (p,) for f, p in TREE.items()}


def test_kdb_k2_ranks_the_true_parent_first() -> None:
    model = KDB(k=2, rebuild_every=500)
    for x, y in bn_stream(seed=4, n=2000):
        model.learn_one(x, y)
    parents = model.parents
    for f, p in TREE.items():
        if p is None:
            assert parents[f] == ()
        else:
            assert parents[f][0] == p
            assert len(parents[f]) <= 2
    assert any(len(pa) == 2 for pa in parents.values())
