"""Implementation switches: Hamilton `@config` resolvers for the local flow (not a DAG module).

Two config keys, both optional (an empty config is the default flow):

* `channels`: the entity-matching channels that are on, e.g. "exact,alias,semantic" (or a list).
  A channel that is off resolves to its `<channel>_matches__off` node, which returns [] and reads
  nothing, so `matched_entities` fuses only the channels that are on.
* `selector`: "llm" (default: an LLM re-reads the ranked communities, falling back to the score
  rule when offline) or "score" (always the documented score rule, no LLM call).

`normalize` validates a config and drops defaults, so equivalent configs share one driver.
"""

from __future__ import annotations

from typing import Any, Callable

from hamilton.function_modifiers import config

from graphrag_dag.dataflows.common.errors import BadInput

CHANNELS = ("exact", "alias", "fuzzy", "semantic", "intent")
SELECTORS = ("llm", "score")
SWITCHES: dict[str, tuple[str, ...]] = {"local": ("channels", "selector"), "global": ()}


def _channels_on(cfg: dict[str, Any]) -> set[str]:
    value = cfg.get("channels")
    if value is None:
        return set(CHANNELS)
    return {c.strip() for c in str(value).split(",") if c.strip()}


def channel_on(name: str) -> Callable:
    """Include the decorated (real) channel node when `name` is on (the default)."""
    return config(lambda cfg: name in _channels_on(cfg), config_used=["channels"])


def channel_off(name: str) -> Callable:
    """Include the decorated `__off` variant when `name` is missing from `channels`."""
    return config(lambda cfg: name not in _channels_on(cfg), config_used=["channels"])


def selector_is(name: str) -> Callable:
    return config(lambda cfg: (cfg.get("selector") or "llm") == name, config_used=["selector"])


def normalize(flow: str, cfg: dict[str, Any] | None) -> dict[str, str]:
    """A validated, canonical config: channels in their fixed order, defaults dropped."""
    if not cfg:
        return {}
    allowed = SWITCHES.get(flow, ())
    unknown = sorted(set(cfg) - set(allowed))
    if unknown:
        known = ", ".join(allowed) or "none"
        raise BadInput(f"unknown config key(s) for {flow} search: {', '.join(unknown)} (known: {known})")
    out: dict[str, str] = {}
    if cfg.get("channels") is not None:
        value = cfg["channels"]
        items = value.split(",") if isinstance(value, str) else list(value)
        names = {str(c).strip() for c in items if str(c).strip()}
        bad = sorted(names - set(CHANNELS))
        if bad:
            raise BadInput(f"unknown channel(s) {', '.join(bad)}: choose from {', '.join(CHANNELS)}")
        if names != set(CHANNELS):
            out["channels"] = ",".join(c for c in CHANNELS if c in names)
    if cfg.get("selector") is not None:
        if cfg["selector"] not in SELECTORS:
            raise BadInput(f"unknown selector {cfg['selector']!r}: choose from {', '.join(SELECTORS)}")
        if cfg["selector"] != "llm":
            out["selector"] = cfg["selector"]
    return out
