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
