"""Argument types of the command line: numbers checked as argparse arguments, and one `query`
flag per search setting, checked by the setting's own rule."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common.settings import SETTINGS, Setting


def _number(kind: type, minimum: float, strict: bool, what: str) -> Callable[[str], Any]:
    """An argparse type: `kind(text)`, above (`strict`) or at least `minimum`."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < minimum or (strict and value == minimum) or value != value or value == float("inf"):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


positive_int = _number(int, 0, True, "a positive integer")
non_negative_int = _number(int, 0, False, "an integer >= 0")
positive_float = _number(float, 0, True, "a finite positive number")


def _setting_type(setting: Setting) -> Callable[[str], Any]:
    """Parse a flag's text as its setting's type and check it with the setting's own rule."""
    def parse(text: str) -> Any:
        try:
            value = setting.kind(text) if not setting.choices and setting.kind is not str else text
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if setting.kind is int else 'a number'}, "
                                             f"got {text!r}") from None
        try:
            return setting.check(value)
        except BadInput as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = setting.kind.__name__
    return parse


def add_settings(parser: argparse.ArgumentParser, flows: tuple[str, ...]) -> None:
    """One flag per setting of the flows (dataflows/common/settings.py), its default in the help. For
    `query`, a flag of the other method is accepted and ignored, as --top-k always was with
    --method global."""
    seen: set[str] = set()
    for flow in flows:
        settings = SETTINGS[flow]
        group = parser.add_argument_group(f"{flow} settings")
        for s in settings:
            if s.name in seen:
                continue
            seen.add(s.name)
            default = "the leaf level" if s.name == "level" else s.default
            metavar = None if s.choices else {int: "N", float: "X", str: "NAME"}[s.kind]
            group.add_argument(s.flag, dest=s.name, type=_setting_type(s), choices=s.choices or None,
                               metavar=metavar, default=None, help=f"{s.help} (default: {default})")


def add_switches(parser: argparse.ArgumentParser) -> None:
    """The implementation switches (dataflows/common/switches.py) as flags, plus `--config KEY=VALUE`
    for any of them; a flag wins over the same key in --config."""
    from graphrag_dag.dataflows.common.switches import CHANNELS, CHOICES

    group = parser.add_argument_group("switches (Hamilton @config)")
    group.add_argument("--channels", help=f"matching channels that stay on, comma-separated "
                                          f"(default: {','.join(CHANNELS)})")
    group.add_argument("--selector", choices=CHOICES["selector"][0], help="who keeps the relevant communities "
                                                                         "(default: llm)")
    group.add_argument("--ranking", choices=CHOICES["ranking"][0],
                       help="community ranking: RRF of the signals' ranks, or α·sim + β·overlap + γ·structure over "
                            "min-max normalised signals (see --ranking-alpha/-beta/-gamma) (default: rrf)")
    group.add_argument("--decompose", action="store_const", const="on",
                       help="split the question into sub-questions and expansions; each sub-question runs the "
                            "match and recall channels (default: off)")
    group.add_argument("--global-selection", choices=CHOICES["global_selection"][0],
                       help="global search: map every community of the level, or rate them from the roots down "
                            "and map the relevant branches (default: static)")
    group.add_argument("--config", action="append", metavar="KEY=VALUE",
                       help="any switch as KEY=VALUE, repeatable (default: none)")


def switch_config(args: argparse.Namespace, flow: str) -> dict[str, str]:
    """The switches given on the command line that apply to `flow` (the others are ignored, as a
    setting of the other method is)."""
    from graphrag_dag.dataflows.common.switches import SWITCHES, parse_pairs

    explicit = parse_pairs(getattr(args, "config", None))
    cfg = dict(explicit)
    for key in ("channels", "selector", "ranking", "decompose", "global_selection"):
        value = getattr(args, key, None)
        if value is not None:
            cfg[key] = value
    allowed = set(SWITCHES.get(flow, ()))
    return {k: v for k, v in cfg.items() if k in allowed or k in explicit}
