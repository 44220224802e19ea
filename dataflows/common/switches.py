"""Implementation switches: Hamilton `@config` resolvers for the search flows (not a DAG module).

Every key is optional, and an empty config is the default flow. A switch is a config key so that
the alternatives are one DAG each (`graphrag-dag dag local --config ranking=weighted` draws it)
and two runs of the same questions differ only in that switch.

Local search:

* `channels`: the entity-matching channels that are on, e.g. "exact,alias,semantic" (or a list).
  A channel that is off resolves to its `<channel>_matches__off` node, which returns [] and reads
  nothing, so `matched_entities` fuses only the channels that are on.
* `selector`: "llm" (default: an LLM re-reads the ranked communities, falling back to the score
  rule when offline) or "score" (always the documented score rule, no LLM call).
* `ranking`: "rrf" (default: reciprocal rank fusion of the three signals' ranks) or "weighted"
  (α·similarity + β·overlap + γ·structure over min-max normalised signals; design note 3.5).
* `decompose`: "off" (default) or "on": the parse step also splits the question into
  sub-questions and expansions, and each sub-question runs the match and recall channels.

DRIFT search takes local search's switches and hands them to its follow-up local searches; its
own DAG has none.

Global search:

* `global_selection`: "static" (default: every community of the level is mapped) or "dynamic"
  (communities are rated from the roots down and only the relevant branches are mapped).

`normalize` validates a config and drops defaults, so equivalent configs share one driver.
"""

from __future__ import annotations

from typing import Any, Callable

from graphrag_dag.dataflows.common.errors import BadInput

CHANNELS = ("exact", "alias", "fuzzy", "semantic", "intent")
# key → (allowed values, default); `channels` is a set of CHANNELS and handled on its own
CHOICES: dict[str, tuple[tuple[str, ...], str]] = {
    "selector": (("llm", "score"), "llm"),
    "ranking": (("rrf", "weighted"), "rrf"),
    "decompose": (("off", "on"), "off"),
    "global_selection": (("static", "dynamic"), "static"),
}
SWITCHES: dict[str, tuple[str, ...]] = {"local": ("channels", "selector", "ranking", "decompose"),
                                        "global": ("global_selection",), "basic": (),
                                        "drift": ("channels", "selector", "ranking", "decompose")}


def _channels_on(cfg: dict[str, Any]) -> set[str]:
    value = cfg.get("channels")
    if value is None:
        return set(CHANNELS)
    return {c.strip() for c in str(value).split(",") if c.strip()}


def _config(resolves: Callable[[dict[str, Any]], bool], key: str) -> Callable:
    """Hamilton's `@config` resolver, imported here: the command line reads this module's choices
    to build its flags and should not pay for importing Hamilton."""
    from hamilton.function_modifiers import config

    return config(resolves, config_used=[key])


def channel_on(name: str) -> Callable:
    """Include the decorated (real) channel node when `name` is on (the default)."""
    return _config(lambda cfg: name in _channels_on(cfg), "channels")


def channel_off(name: str) -> Callable:
    """Include the decorated `__off` variant when `name` is missing from `channels`."""
    return _config(lambda cfg: name not in _channels_on(cfg), "channels")


def switch_is(key: str, value: str) -> Callable:
    """Include the decorated node when config `key` is `value` (a missing key is its default)."""
    default = CHOICES[key][1]
    return _config(lambda cfg: (cfg.get(key) or default) == value, key)


def selector_is(name: str) -> Callable:
    return switch_is("selector", name)


def _bool_word(key: str, value: Any) -> Any:
    """`decompose` also takes booleans, as a flag would give them."""
    if key == "decompose" and isinstance(value, bool):
        return "on" if value else "off"
    return value


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
    for key, (choices, default) in CHOICES.items():
        value = _bool_word(key, cfg.get(key))
        if key not in allowed or value is None:
            continue
        if value not in choices:
            noun = "selector" if key == "selector" else key.replace("_", " ")
            raise BadInput(f"unknown {noun} {value!r}: choose from {', '.join(choices)}")
        if value != default:
            out[key] = value
    return out


def parse_pairs(pairs: list[str] | None) -> dict[str, str]:
    """`KEY=VALUE` words (the CLI's and the picture's `--config`) as a config dict."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"--config takes KEY=VALUE, got {pair!r}")
        out[key.strip()] = value.strip()
    return out
