"""Per-request options of the searches and the indexer: typed dataclasses whose fields are the
rows of the one settings table (dataflows/common/settings.py).

Each field is written out with its type, so type checkers and IDEs see it; its default, help and
bounds come from its row (`Setting`, kept in the field's metadata), so they have one home. The
command line makes one flag per field, and a test pins the fields to the table's rows."""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, ClassVar

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common.settings import (
    BASIC_SETTINGS, DRIFT_OWN_SETTINGS, GLOBAL_SETTINGS, INDEX_SETTINGS, LOCAL_SETTINGS, Setting,
)

MAX_QUERY_CHARS = 4000
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def checked_query(query: Any) -> str:
    """The question as a search reads it, or BadInput saying why it cannot be one (no store or DAG
    needed, so the command line checks it before it imports either)."""
    if not isinstance(query, str):
        raise BadInput("the query is empty")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError:  # bytes that were not UTF-8 reach Python as lone surrogates
        raise BadInput("the query is not valid UTF-8 text") from None
    query = _CONTROL_RE.sub(" ", query)  # NUL cannot be stored or compared in PostgreSQL text
    if not query.strip():
        raise BadInput("the query is empty (or only control characters)")
    if len(query) > MAX_QUERY_CHARS:
        raise BadInput(f"the query is {len(query)} characters long; the limit is {MAX_QUERY_CHARS}")
    return query


def _rows(*tables: tuple[Setting, ...]) -> dict[str, Setting]:
    return {s.name: s for table in tables for s in table}


_LOCAL = _rows(LOCAL_SETTINGS)
_GLOBAL = _rows(GLOBAL_SETTINGS)
_BASIC = _rows(BASIC_SETTINGS)
_DRIFT = _rows(DRIFT_OWN_SETTINGS)
_INDEX = _rows(INDEX_SETTINGS)


def _field(rows: dict[str, Setting], name: str) -> Any:
    """A field whose default, help and bounds are its settings row's."""
    setting = rows[name]
    return dataclasses.field(default=setting.default, metadata={"setting": setting})


@functools.cache
def settings_of(cls: type) -> tuple[Setting, ...]:
    """The settings rows of an options class, in field order."""
    return tuple(f.metadata["setting"] for f in dataclasses.fields(cls))


class _Options:
    """What every options class does: check itself, and hand its values to the nodes."""

    SETTINGS: ClassVar[tuple[Setting, ...]]  # its rows, in field order (set below each class)

    def validate(self) -> None:
        """Coerce and check every value (a fresh instance per request, so defaults are read per
        request), then the rules that tie two settings together."""
        for s in settings_of(type(self)):
            setattr(self, s.name, s.check(getattr(self, s.name)))
        for budget, reserve in (("map_budget", "map_output_reserve"), ("reduce_budget", "reduce_output_reserve")):
            if hasattr(self, budget) and getattr(self, reserve) >= getattr(self, budget):
                raise BadInput(f"{reserve.replace('_', ' ')} must be smaller than the {budget.replace('_', ' ')}")


@dataclasses.dataclass
class LocalOptions(_Options):
    """Local search's settings."""

    top_k: int = _field(_LOCAL, "top_k")
    level: int | None = _field(_LOCAL, "level")
    rrf_k: float = _field(_LOCAL, "rrf_k")
    hops: int = _field(_LOCAL, "hops")
    hop_neighbour_cap: int = _field(_LOCAL, "hop_neighbour_cap")
    hop_total_cap: int = _field(_LOCAL, "hop_total_cap")
    topology_community_cap: int = _field(_LOCAL, "topology_community_cap")
    fuzzy_threshold: float = _field(_LOCAL, "fuzzy_threshold")
    semantic_entity_top_k: int = _field(_LOCAL, "semantic_entity_top_k")
    semantic_min_similarity: float = _field(_LOCAL, "semantic_min_similarity")
    semantic_community_top_k: int = _field(_LOCAL, "semantic_community_top_k")
    max_matched_entities: int = _field(_LOCAL, "max_matched_entities")
    ranking_alpha: float = _field(_LOCAL, "ranking_alpha")
    ranking_beta: float = _field(_LOCAL, "ranking_beta")
    ranking_gamma: float = _field(_LOCAL, "ranking_gamma")
    selection_min_ratio: float = _field(_LOCAL, "selection_min_ratio")
    vector_chunk_top_k: int = _field(_LOCAL, "vector_chunk_top_k")
    keyword_chunk_limit: int = _field(_LOCAL, "keyword_chunk_limit")
    keyword_candidate_cap: int = _field(_LOCAL, "keyword_candidate_cap")
    evidence_chunk_cap: int = _field(_LOCAL, "evidence_chunk_cap")
    claim_candidate_limit: int = _field(_LOCAL, "claim_candidate_limit")
    claim_cap: int = _field(_LOCAL, "claim_cap")
    ppr_damping: float = _field(_LOCAL, "ppr_damping")
    source_entity_cap: int = _field(_LOCAL, "source_entity_cap")
    units_per_entity_cap: int = _field(_LOCAL, "units_per_entity_cap")
    source_cap: int = _field(_LOCAL, "source_cap")
    titled_unit_cap: int = _field(_LOCAL, "titled_unit_cap")
    context_token_budget: int = _field(_LOCAL, "context_token_budget")


@dataclasses.dataclass
class GlobalOptions(_Options):
    """Global search's settings."""

    level: int | None = _field(_GLOBAL, "level")
    seed: int = _field(_GLOBAL, "seed")
    map_budget: int = _field(_GLOBAL, "map_budget")
    reduce_budget: int = _field(_GLOBAL, "reduce_budget")
    map_output_reserve: int = _field(_GLOBAL, "map_output_reserve")
    reduce_output_reserve: int = _field(_GLOBAL, "reduce_output_reserve")
    map_concurrency: int = _field(_GLOBAL, "map_concurrency")
    map_fanout: str = _field(_GLOBAL, "map_fanout")
    claims_per_summary: int = _field(_GLOBAL, "claims_per_summary")
    excerpts_per_summary: int = _field(_GLOBAL, "excerpts_per_summary")
    rating_threshold: int = _field(_GLOBAL, "rating_threshold")


@dataclasses.dataclass
class BasicOptions(_Options):
    """Basic search's settings."""

    basic_top_k: int = _field(_BASIC, "basic_top_k")
    rrf_k: float = _field(_BASIC, "rrf_k")
    context_token_budget: int = _field(_BASIC, "context_token_budget")


@dataclasses.dataclass
class DriftOptions(LocalOptions):
    """DRIFT's settings: its follow-ups' local ones, then its own."""

    drift_primer_k: int = _field(_DRIFT, "drift_primer_k")
    drift_follow_ups: int = _field(_DRIFT, "drift_follow_ups")
    drift_depth: int = _field(_DRIFT, "drift_depth")
    drift_concurrency: int = _field(_DRIFT, "drift_concurrency")
    drift_reduce_budget: int = _field(_DRIFT, "drift_reduce_budget")


@dataclasses.dataclass
class IndexOptions(_Options):
    """The indexer's settings."""

    unit_tokens: int = _field(_INDEX, "unit_tokens")
    unit_overlap: int = _field(_INDEX, "unit_overlap")
    text_field: str = _field(_INDEX, "text_field")
    title_field: str = _field(_INDEX, "title_field")
    max_cluster_size: int = _field(_INDEX, "max_cluster_size")
    leiden_seed: int = _field(_INDEX, "leiden_seed")
    description_chars: int = _field(_INDEX, "description_chars")
    extraction_concurrency: int = _field(_INDEX, "extraction_concurrency")
    extraction_fanout: str = _field(_INDEX, "extraction_fanout")
    gleanings: int = _field(_INDEX, "gleanings")
    report_budget: int = _field(_INDEX, "report_budget")


for _cls in (LocalOptions, GlobalOptions, BasicOptions, DriftOptions, IndexOptions):
    _cls.SETTINGS = settings_of(_cls)


def option_values(options: Any) -> dict[str, Any]:
    """The options as node inputs, by field name. Every value is a checked scalar, so this is
    `dataclasses.asdict` without its deep copy."""
    return {s.name: getattr(options, s.name) for s in settings_of(type(options))}


OPTIONS = {"local": LocalOptions, "global": GlobalOptions, "basic": BasicOptions, "drift": DriftOptions}
