"""The namespace's graph topology in memory: edges, each entity's name and leaf community, the
community tree and its members, loaded once per namespace version and shared by requests (as the fuzzy name index is).

The walk asks for the strongest few neighbours of a hundred entities, then the community of
each entity it reached; the ranking asks how the matched entities sit in each candidate
community. In SQL those were two statements of hundreds of index probes each (7 ms apiece at 100k
entities; the walk 40 ms at 1M even with every page in shared buffers); here they are array
slices. The price, measured on the 100k synthetic namespace (300k edges, 370k memberships):
36 MB kept per namespace version, built in about 2 s with a transient peak of 240 MB, paid by
the first request of each version in each process.

Each entity's neighbours are filed strongest first, ties by the other entity's id in code-point
order, so a capped neighbour list is the same on every run (an index scan broke weight ties by
where the rows happened to lie on disk).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
from hamilton.caching import fingerprinting

Row = tuple[str, str, float]  # from, other, weight


class GraphIndex:
    """Entities, communities and text units by position, ids sorted in code-point order (so that
    comparing positions compares ids), with each entity's neighbours, communities and units in
    compressed rows: entry k's rows are [start[k], start[k + 1])."""

    def __init__(self, entities: Iterable[tuple[str, str, str | None]], edges: Iterable[tuple[str, str, float]],
                 communities: Iterable[tuple[str, int, str | None]], members: Iterable[tuple[str, str]],
                 units: Iterable[tuple[str, str, bool]] = (), version: str = "") -> None:
        # entities: (id, name, leaf community id); edges: (source, target, weight);
        # communities: (id, level, parent id); members: (community id, entity id);
        # units: (entity id, unit id, whether the unit's document is about the entity)
        self.version = version
        entities, edges, communities, members, units = (list(entities), list(edges), list(communities),
                                                        list(members), list(units))
        ids = {e for e, _, _ in entities}
        ids.update(s for s, _, _ in edges)  # an edge to an entity not (or no longer) stored still leads there
        ids.update(t for _, t, _ in edges)
        ids.update(e for _, e in members)
        ids.update(e for e, _, _ in units)
        self.ids: list[str] = sorted(ids)
        self.pos: dict[str, int] = {e: n for n, e in enumerate(self.ids)}
        self.names: list[str] = [""] * len(self.ids)
        self.community_ids: list[str] = sorted({c for c, _, _ in communities} | {c for c, _ in members})
        self.cpos: dict[str, int] = {c: n for n, c in enumerate(self.community_ids)}
        self.levels = np.zeros(len(self.community_ids), dtype=np.int32)
        self.parents = np.full(len(self.community_ids), -1, dtype=np.int32)
        for cid, level, parent in communities:
            self.levels[self.cpos[cid]] = level
            self.parents[self.cpos[cid]] = self.cpos.get(parent, -1) if parent is not None else -1
        self.leaves = np.full(len(self.ids), -1, dtype=np.int32)
        for eid, name, leaf in entities:
            self.names[self.pos[eid]] = name
            if leaf is not None:
                self.leaves[self.pos[eid]] = self.cpos.get(leaf, -1)
        self._file_edges(edges)
        self._file_members(members)
        self._file_units(units)

    def _file_edges(self, edges: list[tuple[str, str, float]]) -> None:
        """Both ends of every edge, filed under each end (a walk goes either way along an edge)."""
        src = np.fromiter((self.pos[s] for s, _, _ in edges), dtype=np.int32, count=len(edges))
        tgt = np.fromiter((self.pos[t] for _, t, _ in edges), dtype=np.int32, count=len(edges))
        weight = np.fromiter((w for _, _, w in edges), dtype=np.float64, count=len(edges))
        near, far, w = np.concatenate([src, tgt]), np.concatenate([tgt, src]), np.concatenate([weight, weight])
        order = np.lexsort((far, -w, near))
        self._far, self._weight = far[order], w[order]
        self._start = _starts(near[order], len(self.ids))

    def _file_members(self, members: list[tuple[str, str]]) -> None:
        """Each entity's communities (every level it is a member at), and each community's size."""
        member = np.fromiter((self.pos[e] for _, e in members), dtype=np.int32, count=len(members))
        home = np.fromiter((self.cpos[c] for c, _ in members), dtype=np.int32, count=len(members))
        order = np.argsort(member, kind="stable")
        self._homes = home[order]
        self._home_start = _starts(member[order], len(self.ids))
        self.sizes = np.bincount(home, minlength=len(self.community_ids)).astype(np.int64)

    def _file_units(self, units: list[tuple[str, str, bool]]) -> None:
        """Each entity's units (those about it first, then by id), and each unit's entities. Unit
        ids are kept as one array of UTF-8 bytes, sorted (byte order is code-point order), not as a
        string each: GraphRAG's are 128 characters, and a string costs 49 bytes more."""
        self.unit_ids, unit = np.unique(np.array([u.encode() for _, u, _ in units], dtype=bytes), return_inverse=True)
        unit = unit.astype(np.int32)
        entity = np.fromiter((self.pos[e] for e, _, _ in units), dtype=np.int32, count=len(units))
        about = np.fromiter((a for _, _, a in units), dtype=bool, count=len(units))
        order = np.lexsort((unit, ~about, entity))
        self._units, self._about = unit[order], about[order]
        self._unit_start = _starts(entity[order], len(self.ids))
        order = np.lexsort((entity, unit))
        self._mentions = entity[order]
        self._mention_start = _starts(unit[order], len(self.unit_ids))

    def neighbour_rows(self, frontier: list[str], cap: int) -> list[Row]:
        """The `cap` strongest neighbours of each frontier entity, as (entity, neighbour, weight)."""
        rows: list[Row] = []
        ids = self.ids
        for entity in frontier:
            n = self.pos.get(entity)
            if n is None:
                continue
            lo = int(self._start[n])
            hi = min(int(self._start[n + 1]), lo + max(cap, 0))
            rows += [(entity, ids[o], w) for o, w in zip(self._far[lo:hi].tolist(), self._weight[lo:hi].tolist())]
        return rows

    def communities_at(self, entities: Iterable[str], level: int | None) -> list[tuple[str, str, int]]:
        """(entity, community, level) for each entity with a leaf community: the leaf, or with a
        `level`, the community on the leaf's parent chain closest to it (the deeper of two equally
        close), which is the leaf itself when the leaf lies above the level."""
        out = []
        for entity in entities:
            n = self.pos.get(entity)
            c = -1 if n is None else int(self.leaves[n])
            if c < 0:
                continue
            if level is not None:
                best, seen = c, {c}
                while self.levels[c] > level and self.parents[c] >= 0 and int(self.parents[c]) not in seen:
                    c = int(self.parents[c])
                    seen.add(c)
                    if (abs(int(self.levels[c]) - level), -int(self.levels[c])) < \
                            (abs(int(self.levels[best]) - level), -int(self.levels[best])):
                        best = c
                c = best
            out.append((entity, self.community_ids[c], int(self.levels[c])))
        return out

    def member_signals(self, communities: list[str], entities: list[str]) -> dict[str, tuple[int, int, float, list[str]]]:
        """Per community: its member count, how many of `entities` are members, the summed weight
        of the edges between `entities` and its members (an edge counted once per end in
        `entities` whose other end is a member), and the names of the member `entities` in
        code-point order. Read from the entities' side: a few entities' edges, not the members'
        (a root community has thousands). The weight is rounded to 9 decimals, so that the order
        in which equal sums were added cannot make one outrank the other."""
        wanted = np.array(sorted({self.cpos[c] for c in communities if c in self.cpos}), dtype=np.int32)
        given = sorted({self.pos[e] for e in entities if e in self.pos})
        weights = np.zeros(len(self.community_ids))
        own: dict[int, list[str]] = {}
        if given:
            ends = np.concatenate([np.arange(self._start[e], self._start[e + 1]) for e in given])
            far, w = self._far[ends], self._weight[ends]
            homes, of = self._homes_of(far)
            keep = np.isin(homes, wanted)
            weights = np.bincount(homes[keep], weights=w[of[keep]], minlength=len(self.community_ids))
            homes, of = self._homes_of(np.array(given, dtype=np.int32))
            for c, e in zip(homes.tolist(), of.tolist()):
                own.setdefault(c, []).append(self.names[given[e]])
        return {self.community_ids[c]: (int(self.sizes[c]), len(own.get(c, [])), round(float(weights[c]), 9),
                                        sorted(own.get(c, []))) for c in wanted.tolist()}

    def unit_count(self, entity: str) -> int:
        """How many units mention the entity."""
        n = self.pos.get(entity)
        return 0 if n is None else int(self._unit_start[n + 1] - self._unit_start[n])

    def unit_rows(self, entities: Iterable[str], cap: int) -> list[tuple[str, str, bool, int]]:
        """(entity, unit, about, the entity's unit count) for at most `cap` units of each entity,
        the units about it first, then by id; entities in code-point order."""
        out = []
        for entity in sorted(set(entities)):
            n = self.pos.get(entity)
            if n is None:
                continue
            lo, hi = int(self._unit_start[n]), int(self._unit_start[n + 1])
            top = min(hi, lo + max(cap, 0))
            out += [(entity, self.unit_ids[u].decode(), a, hi - lo)
                    for u, a in zip(self._units[lo:top].tolist(), self._about[lo:top].tolist())]
        return out

    def unit_mentions(self, units: Iterable[str]) -> list[tuple[str, str]]:
        """(unit, entity) for every entity each unit mentions, by unit and then entity id."""
        out = []
        for unit in sorted(set(units)):
            k = int(np.searchsorted(self.unit_ids, unit.encode()))
            if k >= len(self.unit_ids) or self.unit_ids[k] != unit.encode():
                continue
            out += [(unit, self.ids[e]) for e in
                    self._mentions[self._mention_start[k]:self._mention_start[k + 1]].tolist()]
        return out

    def _homes_of(self, entities: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The communities of each given entity, flattened, with the index of the entity each came from."""
        lo, hi = self._home_start[entities], self._home_start[entities + 1]
        counts = hi - lo
        of = np.repeat(np.arange(len(entities)), counts)
        offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        return self._homes[np.repeat(lo, counts) + offsets], of


def _starts(sorted_keys: np.ndarray, n: int) -> np.ndarray:
    """Row starts of compressed rows: entry k's rows are [starts[k], starts[k + 1])."""
    return np.searchsorted(sorted_keys, np.arange(n + 1)).astype(np.int64)


@fingerprinting.hash_value.register(GraphIndex)
def _graph_index_fingerprint(obj: GraphIndex, *args: object, depth: int = 0, **kwargs: object) -> str:
    """A graph index is what its namespace version holds; hashing its arrays per run would cost
    more than the walk."""
    return fingerprinting.hash_value(f"GraphIndex:{obj.version}", depth=depth + 1)
