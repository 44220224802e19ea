"""Prompts as values, and the one way nodes talk to a chat model (not a DAG module).

A rendered prompt is a node's output (`parse_prompt`, `map_prompts`, ...), so a run can show it,
and an override can replace it, exactly as sent. `ask` is the only place that calls the model,
validates its reply and says why a reply could not be used; each LLM node then falls back on its
own documented rule and reports that reason as a warning, so an LLM problem degrades a request
instead of failing it.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Mapping, TypeVar

from graphrag_dag.dataflows.common.errors import BadInput, Cancelled
from graphrag_dag.dataflows.common.resources import ChatModel

T = TypeVar("T")

# Errors an LLM node must never turn into a fallback: the caller asked to stop, or the request is wrong.
PASSTHROUGH_ERRORS: tuple[type[BaseException], ...] = (Cancelled, BadInput)


@dataclass(frozen=True)
class Prompt:
    """What one call sends. `stage` names the node family that sends it (parse, select, answer,
    map, reduce): chat models label their requests with it, and a stand-in model answers by it.
    `fields` are the values filled into the template; `choices` the ids a reply may pick from."""

    stage: str
    text: str
    fields: Mapping[str, str] = field(default_factory=dict)
    choices: tuple[str, ...] = ()


_PLACEHOLDER_RE = re.compile(r"\{([a-z_]+)\}")


def render(template: str, **values: str) -> str:
    """Fill `{name}` placeholders in one pass, so a value that itself contains `{query}` or
    `{context}` is never substituted again; JSON braces in a template need no escaping."""
    return _PLACEHOLDER_RE.sub(lambda m: values[m.group(1)] if m.group(1) in values else m.group(0), template)


def prompt(stage: str, template: str, *, choices: tuple[str, ...] = (), **fields: str) -> Prompt:
    return Prompt(stage, render(template, **fields), dict(fields), choices)


_FENCE_RE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def strip_fences(text: str) -> str:
    """Models often wrap JSON in ``` fences; accept that, nothing looser."""
    m = _FENCE_RE.match(text or "")
    return m.group(1) if m else (text or "").strip()


class ReplyInvalid(ValueError):
    """A reply that arrived but cannot be used; the message completes "<task> by LLM ..."."""


def json_object(text: str, what: str) -> dict[str, Any]:
    """The reply as a JSON object, or ReplyInvalid saying it was not `what`."""
    try:
        data = json.loads(strip_fences(text))
    except (json.JSONDecodeError, TypeError):
        data = None
    if not isinstance(data, dict):
        raise ReplyInvalid(f"was not valid JSON {what}")
    return data


@dataclass
class Asked(Generic[T]):
    """The outcome of `ask`: a validated value, or None and the reason (`problem`)."""

    value: T | None
    problem: str = ""  # completes "<task> by LLM ...": "failed (APITimeoutError)", "was not valid JSON ..."
    error: str = ""  # the last failure as "Type: message"
    attempts: int = 0
    usage: dict[str, int] = field(default_factory=lambda: {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})

    def warning(self, task: str, fallback: str) -> str:
        return f"{task} by LLM {self.problem}; {fallback}"


def ask(chat_model: ChatModel, prompt: Prompt, validate: Callable[[str], T], *, json_mode: bool = False,
        max_tokens: int | None = None, attempts: int = 1, stop: threading.Event | None = None) -> Asked[T]:
    """Send `prompt`, validate the reply, and try again up to `attempts` times in all.

    Cancellation and bad input pass through; any other failure (HTTP errors, timeouts, call caps,
    invalid replies) ends in `Asked(None, problem)`. `stop`, shared by the calls of one map fan-out,
    makes a cancelled request start no further attempt anywhere."""
    out: Asked[T] = Asked(None)
    for _ in range(attempts):
        if stop is not None and stop.is_set():
            raise Cancelled("the request was cancelled")
        out.attempts += 1
        out.usage["calls"] += 1
        try:
            reply = chat_model.send(prompt, json_mode=json_mode, max_tokens=max_tokens)
            out.usage["prompt_tokens"] += reply.prompt_tokens
            out.usage["completion_tokens"] += reply.completion_tokens
            out.value = validate(reply.text)
            return out
        except Cancelled:
            if stop is not None:
                stop.set()
            raise
        except PASSTHROUGH_ERRORS:
            raise
        except ReplyInvalid as exc:
            out.problem, out.error = str(exc), f"ReplyInvalid: {exc}"
        except Exception as exc:  # noqa: BLE001 - every model failure becomes the node's fallback
            out.problem, out.error = f"failed ({type(exc).__name__})", f"{type(exc).__name__}: {exc}"
    return out
