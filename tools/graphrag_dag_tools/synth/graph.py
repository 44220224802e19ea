"""The synthetic graph: a community hierarchy over a hidden entity order, and power-law
relationships that mostly stay inside communities."""

from __future__ import annotations

import numpy as np

from graphrag_dag_tools.synth.arrays import pick_in, random_sizes
from graphrag_dag_tools.synth.constants import BRANCHING, EDGES_PER_ENTITY, LEAF_SIZE, ZIPF_EXPONENT


class Hierarchy:
    """Communities over entity *positions* 0..n-1: each is a contiguous range [start, end)."""

    def __init__(self, rng: np.random.Generator, n: int) -> None:
        self.levels = 3 if n < 1500 else 4
        # Level 0 holds `roots` communities; each level down splits communities ~`branching` ways
        # until ~LEAF_SIZE entities remain (smaller leaves and binary splits for tiny indexes).
        deepest = self.levels - 1
        roots = max(1, min(max(2, round(n / (LEAF_SIZE * BRANCHING**deepest))), n // 2))
        branching = max(2.0, (n / (LEAF_SIZE * roots)) ** (1 / deepest))
        target = [n / (roots * branching**lv) for lv in range(self.levels)]
        level: list[int] = []
        start: list[int] = []
        end: list[int] = []
        parent: list[int] = []
        children: list[list[int]] = []

        def add(lv: int, s: int, e: int, up: int) -> None:
            level.append(lv)
            start.append(s)
            end.append(e)
            parent.append(up)
            children.append([])
            if up >= 0:
                children[up].append(len(level) - 1)

        s = 0
        for size in random_sizes(rng, n, roots, minimum=min(2, n)).tolist():
            add(0, s, s + size, -1)
            s += size
        frontier = list(range(len(level)))
        for lv in range(1, self.levels):
            nxt: list[int] = []
            for c in frontier:
                size = end[c] - start[c]
                k = min(round(size / target[lv]), size // 4)
                if k < 2:
                    continue  # a small community is not split further (as in Leiden output)
                s = start[c]
                for child_size in random_sizes(rng, size, k, minimum=2).tolist():
                    add(lv, s, s + child_size, c)
                    nxt.append(len(level) - 1)
                    s += child_size
            frontier = nxt
        self.level = np.array(level, dtype=np.int64)
        self.start = np.array(start, dtype=np.int64)
        self.end = np.array(end, dtype=np.int64)
        self.parent = np.array(parent, dtype=np.int64)
        self.children = children
        self.count = len(level)
        # community of each position at each level (-1 below a position's deepest community)
        self.at_level = np.full((self.levels, n), -1, dtype=np.int64)
        for c in range(self.count):
            self.at_level[level[c], start[c] : end[c]] = c
        self.leaf = self.at_level[0].copy()
        for lv in range(1, self.levels):
            deeper = self.at_level[lv] >= 0
            self.leaf[deeper] = self.at_level[lv][deeper]
        up = self.parent[self.leaf]
        self.group = np.where(up >= 0, up, self.leaf)  # the community one level above the leaf




def draw_edges(rng: np.random.Generator, n: int, h: Hierarchy) -> tuple[np.ndarray, np.ndarray]:
    """Distinct undirected (source, target) position pairs, about EDGES_PER_ENTITY * n of them."""
    if n < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    wanted = min(round(EDGES_PER_ENTITY * n), max(1, n * (n - 1) // 4))
    popularity = (rng.permutation(n) + 1.0) ** -ZIPF_EXPONENT
    cdf = np.cumsum(popularity)
    cdf /= cdf[-1]

    def zipf(m: int) -> np.ndarray:
        return np.minimum(np.searchsorted(cdf, rng.random(m), side="right"), n - 1)

    leaf_start, leaf_size = h.start[h.leaf], h.end[h.leaf] - h.start[h.leaf]
    group_start, group_size = h.start[h.group], h.end[h.group] - h.start[h.group]
    # Every entity links to a hub of its own leaf community, so none is isolated.
    everyone = np.arange(n, dtype=np.int64)
    hub = pick_in(rng, leaf_start, leaf_size)
    own = hub == everyone  # a hub links to the next member of its community instead of itself
    hub[own] = leaf_start[own] + (everyone[own] - leaf_start[own] + 1) % leaf_size[own]
    sources = [everyone]
    targets = [hub]
    kept = np.zeros(0, dtype=np.int64)
    for _ in range(20):
        m = max(wanted, 64)
        src = zipf(m)
        mode = rng.random(m)
        local = pick_in(rng, leaf_start[src], leaf_size[src])
        regional = pick_in(rng, group_start[src], group_size[src])
        tgt = np.where(mode < 0.3, local, np.where(mode < 0.6, regional, zipf(m)))
        sources.append(src)
        targets.append(tgt)
        s, t = np.concatenate(sources), np.concatenate(targets)
        ok = np.flatnonzero(s != t)
        key = np.minimum(s[ok], t[ok]) * n + np.maximum(s[ok], t[ok])
        _, first = np.unique(key, return_index=True)
        kept = ok[np.sort(first)]
        if len(kept) >= wanted:
            break
    kept = kept[:wanted]
    return np.concatenate(sources)[kept], np.concatenate(targets)[kept]


# --------------------------------------------------------------------------------------------
# the writer


