"""The namespace's graph in memory, loaded once per namespace version and shared by requests (as
the fuzzy name index is): edges, each entity's name, leaf community and text units, and the
community tree with its members.

The walk asks for the strongest few neighbours of a hundred entities, then the community of each
entity it reached; the ranking asks how the matched entities sit in each candidate community; the
sources ask for the units of the entities the walk ranked. In SQL those are statements of
hundreds of index probes each; here they are array slices. The price is a load of every edge,
membership and entity unit, and the memory to keep them (docs/benchmarks.md has the figures).
The first request of each version in each process pays it, unless `GraphRag.load_indexes` ran.

Each entity's neighbours are filed strongest first, ties by the other entity's id in code-point
order, so a capped neighbour list is the same on every run (an index scan broke weight ties by
where the rows happened to lie on disk).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
from hamilton.caching import fingerprinting

Row = tuple[str, str, float]  # from, other, weight
Edges = tuple[np.ndarray, np.ndarray, np.ndarray]  # source and target numbers, weight
Members = tuple[np.ndarray, np.ndarray]  # community number, entity number
Units = tuple[np.ndarray, np.ndarray, np.ndarray]  # entity number, unit number, whether the unit is about the entity


@dataclass
class EntityUnits:
    """Text units of some entities, one row per (entity, unit), as columns (`GraphIndex.entity_units`).
    Units are numbered by their place in `unit_ids`, which is id order, so comparing numbers
    compares ids. As an object a row, a search's few hundred rows cost more to make than to rank."""

    entity_ids: list[str]  # the entities, in code-point order
    unit_ids: list[str]  # the units the rows name, in code-point order
    entity: np.ndarray  # each row's entity, by its place in entity_ids
    unit: np.ndarray  # each row's unit, by its place in unit_ids
    about: np.ndarray  # whether the row's unit is about its entity
    units: np.ndarray  # per entity: how many units mention it in all (the rows may be capped)

    def rows(self) -> list[tuple[str, str, bool, int]]:
        return [(self.entity_ids[e], self.unit_ids[u], a, int(self.units[e]))
                for e, u, a in zip(self.entity.tolist(), self.unit.tolist(), self.about.tolist(), strict=True)]


class GraphIndex:
    """Entities, communities and text units by number: their place in id order (code-point
    order, so that comparing numbers compares ids). Each entity's neighbours, communities and
    units are compressed rows: entry k's rows are [start[k], start[k + 1]).

    The database numbers the rows that link them (walk_sql.py), so that a load moves integers
    rather than a Python tuple of strings per row."""

    def __init__(self, entities: Sequence[tuple[str, str, str | None]], communities: Sequence[tuple[str, int, str | None]],
                 unit_ids: Sequence[str], edges: Edges, members: Members, units: Units, version: str = "",
                 concepts: Iterable[str] = ()) -> None:
        # entities: (id, name, leaf community id) and communities: (id, level, parent id), each in id
        # order; unit_ids in order. Rows naming an entity, community or unit not among them are not
        # numbered by the database, and so not here.
        self.version = version
        self.ids: list[str] = [e for e, _, _ in entities]
        self.community_ids: list[str] = [c for c, _, _ in communities]
        self.unit_ids = np.array([u.encode() for u in unit_ids], dtype=bytes)  # UTF-8: byte order is code-point order
        for name, ordered in (("entities", self.ids), ("communities", self.community_ids)):
            if any(a >= b for a, b in itertools.pairwise(ordered)):
                raise ValueError(f"the graph's {name} are not in id order")
        if not np.all(self.unit_ids[:-1] < self.unit_ids[1:]):
            raise ValueError("the graph's units are not in id order")
        self.pos: dict[str, int] = {e: n for n, e in enumerate(self.ids)}
        self.cpos: dict[str, int] = {c: n for n, c in enumerate(self.community_ids)}
        self.names: list[str] = [n for _, n, _ in entities]
        # Entities that are concepts (terms of a subject, not names of one thing): they join the
        # text signals rather than lead the sources (sources.py).
        self.concepts: frozenset[str] = frozenset(concepts)
        self.levels = np.array([lvl for _, lvl, _ in communities], dtype=np.int32)
        self.parents = np.array([self.cpos.get(p, -1) if p is not None else -1 for _, _, p in communities],
                                dtype=np.int32)
        self.leaves = np.array([self.cpos.get(c, -1) if c is not None else -1 for _, _, c in entities], dtype=np.int32)
        self._file_edges(*edges)
        self._file_members(*members)
        self._file_units(*units)

    def _file_edges(self, src: np.ndarray, tgt: np.ndarray, weight: np.ndarray) -> None:
        """Both ends of every edge, filed under each end (a walk goes either way along an edge)."""
        near, far = np.concatenate([src, tgt]).astype(np.int32), np.concatenate([tgt, src]).astype(np.int32)
        w = np.concatenate([weight, weight]).astype(np.float64)
        order = np.lexsort((far, -w, near))
        self._far, self._weight = far[order], w[order]
        self._start = _starts(near[order], len(self.ids))

    def _file_members(self, home: np.ndarray, member: np.ndarray) -> None:
        """Each entity's communities (every level it is a member at), and each community's size."""
        order = np.argsort(member, kind="stable")
        self._homes = home[order].astype(np.int32)
        self._home_start = _starts(member[order], len(self.ids))
        self.sizes = np.bincount(home, minlength=len(self.community_ids)).astype(np.int64)

    def _file_units(self, entity: np.ndarray, unit: np.ndarray, about: np.ndarray) -> None:
        """Each entity's units (those about it first, then by id), and each unit's entities. Unit
        ids are kept as one array of bytes, not as a string each: GraphRAG's are 128 characters,
        and a string costs 49 bytes more."""
        about = about.astype(bool)
        order = np.lexsort((unit, ~about, entity))
        self._units, self._about = unit[order].astype(np.int32), about[order]
        self._unit_start = _starts(entity[order], len(self.ids))
        order = np.lexsort((entity, unit))
        self._mentions = entity[order].astype(np.int32)
        self._mention_start = _starts(unit[order], len(self.unit_ids))

    def neighbour_rows(self, frontier: list[str], cap: int) -> list[Row]:
        """The `cap` strongest neighbours of each frontier entity, as (entity, neighbour, weight)."""
        known = [(entity, n) for entity in frontier if (n := self.pos.get(entity)) is not None]
        if not known or cap <= 0:
            return []
        # Every frontier entity's rows gathered in one go: a walk reads about 110 entities' lists, and
        # slicing and converting each list on its own cost more than the rows themselves.
        at = np.fromiter((n for _, n in known), dtype=np.int64, count=len(known))
        lo = self._start[at]
        counts = np.minimum(self._start[at + 1], lo + cap) - lo
        rows = _spans(lo, counts)
        entities = [entity for (entity, _), c in zip(known, counts.tolist(), strict=True) for _ in range(c)]
        return list(zip(entities, map(self.ids.__getitem__, self._far[rows].tolist()), self._weight[rows].tolist(),
                        strict=True))

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
        numbers = sorted({self.pos[e] for e in entities if e in self.pos})
        given = np.array(numbers, dtype=np.int64)
        weights = np.zeros(len(wanted))
        own: dict[int, list[str]] = {}
        if given.size and wanted.size:
            lo = self._start[given]
            counts = self._start[given + 1] - lo
            ends = _spans(lo, counts)
            homes, of = self._homes_of(self._far[ends])
            # Each home's place among the wanted communities (sorted), and whether it is one.
            place = np.minimum(np.searchsorted(wanted, homes), len(wanted) - 1)
            keep = wanted[place] == homes
            weights = np.bincount(place[keep], weights=self._weight[ends][of[keep]], minlength=len(wanted))
            homes, of = self._homes_of(given)
            for c, e in zip(homes.tolist(), of.tolist(), strict=True):
                own.setdefault(c, []).append(self.names[numbers[e]])
        return {self.community_ids[c]: (size, len(own.get(c, [])), round(weight, 9), sorted(own.get(c, [])))
                for c, size, weight in zip(wanted.tolist(), self.sizes[wanted].tolist(), weights.tolist(), strict=True)}

    def unit_count(self, entity: str) -> int:
        """How many units mention the entity."""
        n = self.pos.get(entity)
        return 0 if n is None else int(self._unit_start[n + 1] - self._unit_start[n])

    def entity_units(self, entities: Iterable[str], cap: int) -> EntityUnits:
        """At most `cap` units of each known entity, the units about it first, then by id; entities
        in code-point order. Gathered as columns in one go, as the neighbours are: the sources
        read some 40 entities' lists, about 380 rows."""
        known = sorted({e for e in entities if e in self.pos})
        at = np.array([self.pos[e] for e in known], dtype=np.int64)
        lo = self._unit_start[at]
        counts = self._unit_start[at + 1] - lo
        taken = np.minimum(counts, max(cap, 0))
        rows = _spans(lo, taken)
        numbers, unit = np.unique(self._units[rows], return_inverse=True)
        return EntityUnits(known, [u.decode() for u in self.unit_ids[numbers].tolist()],
                           np.repeat(np.arange(len(known)), taken), unit.reshape(-1), self._about[rows], counts)

    def unit_rows(self, entities: Iterable[str], cap: int) -> list[tuple[str, str, bool, int]]:
        """`entity_units` as (entity, unit, about, the entity's unit count) rows."""
        return self.entity_units(entities, cap).rows()

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
        return self._homes[_spans(lo, counts)], np.repeat(np.arange(len(entities)), counts)


def _spans(lo: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The row numbers [lo[k], lo[k] + counts[k]) of every k, one after another: many entities'
    compressed rows gathered in one go, instead of a slice and a conversion each."""
    return np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))


def _starts(sorted_keys: np.ndarray, n: int) -> np.ndarray:
    """Row starts of compressed rows: entry k's rows are [starts[k], starts[k + 1])."""
    return np.searchsorted(sorted_keys, np.arange(n + 1)).astype(np.int64)


@fingerprinting.hash_value.register(GraphIndex)
def _graph_index_fingerprint(obj: GraphIndex, *args: object, depth: int = 0, **kwargs: object) -> str:
    """A graph index is what its namespace version holds; hashing its arrays per run would cost
    more than the walk."""
    return fingerprinting.hash_value(f"GraphIndex:{obj.version}", depth=depth + 1)
