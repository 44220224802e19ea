"""Every tunable of the two searches, with its default, in one table (not a DAG module).

The nodes take their parameter defaults from here, `drivers/api/options.py` builds `LocalOptions` and
`GlobalOptions` from the same rows, and the CLI makes one `query` flag per row with the default in
its help: adding a knob is one row here plus the node parameter that uses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from graphrag_dag.dataflows.common.errors import BadInput


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    help: str
    kind: type = int
    minimum: float | None = None  # inclusive
    maximum: float | None = None  # inclusive
    choices: tuple[str, ...] = ()
    optional: bool = False  # None is allowed: the flow decides (e.g. the leaf level)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def check(self, value: Any) -> Any:
        """The value as this setting's type, or BadInput naming the flag the way the CLI spells it."""
        label = self.name.replace("_", "-")
        if value is None and self.optional:
            return None
        if self.choices:
            if value not in self.choices:
                raise BadInput(f"{label} must be one of {', '.join(self.choices)}, not {value!r}")
            return value
        if self.kind is str:
            if not isinstance(value, str) or not value:
                raise BadInput(f"{label} must be a non-empty string, got {value!r}")
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise BadInput(f"{label} must be a number, got {value!r}")
        if self.kind is int:
            if not isinstance(value, int):
                raise BadInput(f"{label} must be an integer, got {value!r}")
        else:
            value = float(value)
        if self.minimum is not None and value < self.minimum:
            raise BadInput(f"{label} must be >= {self.minimum:g}, got {value!r}")
        if self.maximum is not None and value > self.maximum:
            raise BadInput(f"{label} must be <= {self.maximum:g}, got {value!r}")
        return value


def _positive(name: str, default: int, help: str) -> Setting:
    return Setting(name, default, help, int, minimum=1)


LEVEL = Setting("level", None, "community level to search (default: the leaf communities)", int, minimum=0,
                optional=True)

LOCAL_SETTINGS: tuple[Setting, ...] = (
    _positive("top_k", 8, "communities kept after ranking"),
    LEVEL,
    Setting("rrf_k", 60.0, "k of reciprocal rank fusion (larger flattens the ranks)", float, minimum=0),
    Setting("hops", 2, "graph hops walked from the matched entities", int, minimum=0, maximum=2),
    _positive("hop_neighbour_cap", 10, "strongest neighbours taken per entity and hop"),
    _positive("hop_total_cap", 100, "new entities taken per hop in all"),
    _positive("topology_community_cap", 48, "communities reached through the graph that go on to ranking"),
    Setting("fuzzy_threshold", 85.0, "least fuzzy ratio (0-100) for a typo match", float, minimum=0, maximum=100),
    _positive("semantic_entity_top_k", 8, "entities recalled by embedding"),
    Setting("semantic_min_similarity", 0.2, "least cosine similarity for a semantic entity match", float),
    _positive("semantic_community_top_k", 16, "communities recalled by summary embedding"),
    _positive("max_matched_entities", 12, "entities kept after channel fusion"),
    Setting("ranking_alpha", 1.0, "weighted ranking (--config ranking=weighted): weight of summary similarity",
            float, minimum=0),
    Setting("ranking_beta", 1.0, "weighted ranking: weight of entity overlap", float, minimum=0),
    Setting("ranking_gamma", 1.0, "weighted ranking: weight of structure (edge weight)", float, minimum=0),
    Setting("selection_min_ratio", 0.5, "offline selection keeps communities scoring this share of the best",
            float),
    _positive("vector_chunk_top_k", 12, "evidence chunks recalled by embedding"),
    _positive("keyword_chunk_limit", 24, "evidence chunks recalled by keyword"),
    _positive("keyword_candidate_cap", 32, "keyword candidates taken per term from the word table"),
    _positive("evidence_chunk_cap", 40, "evidence chunks kept after recall"),
    _positive("claim_candidate_limit", 400, "claims read before ranking"),
    _positive("claim_cap", 20, "claims kept as evidence"),
    Setting("ppr_damping", 0.5, "personalised PageRank: share of rank passed on along edges per step", float,
            minimum=0, maximum=0.99),
    _positive("source_entity_cap", 40, "best-ranked reached entities whose text units become sources"),
    _positive("units_per_entity_cap", 32, "text units read per entity for the sources"),
    _positive("source_cap", 20, "ranked sources kept"),
    _positive("titled_unit_cap", 8, "pages named by the question whose entities seed the graph walk"),
    _positive("context_token_budget", 12000, "tokens of the answer context"),
)

GLOBAL_SETTINGS: tuple[Setting, ...] = (
    LEVEL,
    Setting("seed", 42, "seed of the summary shuffle before batching", int),
    _positive("map_budget", 8000, "tokens per map prompt, output reserve included"),
    _positive("reduce_budget", 8000, "tokens of the reduce prompt, output reserve included"),
    Setting("map_output_reserve", 512, "tokens of each map budget kept for the reply", int, minimum=0),
    Setting("reduce_output_reserve", 1024, "tokens of the reduce budget kept for the reply", int, minimum=0),
    _positive("map_concurrency", 4, "map calls in flight at once (thread fan-out)"),
    Setting("map_fanout", "threads", "where map calls run: a thread pool, or Hamilton tasks on Ray", str,
            choices=("threads", "ray")),
    Setting("claims_per_summary", 5, "descendant leaf claims added to each summary", int, minimum=0),
    Setting("excerpts_per_summary", 3, "source excerpts added to each summary", int, minimum=0),
    Setting("rating_threshold", 2, "dynamic selection (--global-selection dynamic): least rating (0-10) that keeps a "
            "community and rates its children", int, minimum=0, maximum=10),
)

INDEX_SETTINGS: tuple[Setting, ...] = (
    _positive("unit_tokens", 1200, "tokens per text unit (as Microsoft GraphRAG)"),
    Setting("unit_overlap", 100, "tokens shared by consecutive text units", int, minimum=0),
    Setting("text_field", "text", "field holding the text in .json/.jsonl/.csv records", str),
    Setting("title_field", "title", "field holding the title in .json/.jsonl/.csv records", str),
    Setting("max_cluster_size", 10, "largest community before hierarchical Leiden splits it", int, minimum=2),
    Setting("leiden_seed", 3735928559, "seed of hierarchical Leiden (results are deterministic)", int, minimum=0),
    _positive("description_chars", 600, "characters of an entity description"),
    _positive("extraction_concurrency", 4, "LLM extraction calls in flight at once (thread fan-out)"),
    Setting("extraction_fanout", "threads", "where extraction calls run: a thread pool, or Hamilton tasks on Ray",
            str, choices=("threads", "ray")),
    Setting("gleanings", 0, "follow-up LLM calls per text unit asking for what was missed", int, minimum=0),
    _positive("report_budget", 6000, "tokens of material in one community report prompt"),
)

BASIC_SETTINGS: tuple[Setting, ...] = (
    _positive("basic_top_k", 24, "evidence chunks recalled by embedding (basic search)"),
    *(s for s in LOCAL_SETTINGS if s.name in ("rrf_k", "context_token_budget")),
)

# DRIFT's own knobs; its follow-up local searches take the local settings, so they are its too.
DRIFT_OWN_SETTINGS: tuple[Setting, ...] = (
    _positive("drift_primer_k", 5, "DRIFT: community reports nearest the question that the primer reads"),
    _positive("drift_follow_ups", 3, "DRIFT: follow-up questions run as local searches per step"),
    Setting("drift_depth", 2, "DRIFT: steps of follow-ups (1: the primer's only)", int, minimum=1, maximum=3),
    _positive("drift_concurrency", 2, "DRIFT: follow-up local searches in flight at once"),
    _positive("drift_reduce_budget", 8000, "DRIFT: tokens of the reduce prompt, output reserve included"),
)
DRIFT_SETTINGS: tuple[Setting, ...] = (*LOCAL_SETTINGS, *DRIFT_OWN_SETTINGS)

SETTINGS: dict[str, tuple[Setting, ...]] = {"local": LOCAL_SETTINGS, "global": GLOBAL_SETTINGS,
                                            "basic": BASIC_SETTINGS, "index": INDEX_SETTINGS,
                                            "drift": DRIFT_SETTINGS}
SEARCH_FLOWS = ("local", "global", "basic", "drift")

# Attribute access for node defaults: `top_k: int = LOCAL.top_k`.
LOCAL = SimpleNamespace(**{s.name: s.default for s in LOCAL_SETTINGS})
GLOBAL = SimpleNamespace(**{s.name: s.default for s in GLOBAL_SETTINGS})
INDEX = SimpleNamespace(**{s.name: s.default for s in INDEX_SETTINGS})
BASIC = SimpleNamespace(**{s.name: s.default for s in BASIC_SETTINGS})
DRIFT = SimpleNamespace(**{s.name: s.default for s in DRIFT_SETTINGS})
