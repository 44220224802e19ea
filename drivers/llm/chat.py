"""Chat models handed to the DAG as inputs: an offline one (rule-based parsing, extractive
answers), one at an OpenAI-compatible endpoint per request (with its caps, cancellation and
usage), and a local stand-in with a fixed latency for benchmarks."""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable


from graphrag_dag.dataflows.common.errors import GraphRagError
from graphrag_dag.dataflows.common import resources as protocols
from graphrag_dag.dataflows.common.resources import ChatReply, LlmUsage
from graphrag_dag.drivers.runtime.cancel import CancelToken, shut_down, track_sockets
from graphrag_dag.drivers.llm.tokens import token_counter



@dataclass
class LlmLimits:
    max_calls: int | None = None
    max_tokens: int | None = None


class LlmBudgetExceeded(GraphRagError):
    pass


class LlmUnreachable(Exception):
    """An earlier call of this request timed out or could not connect: the endpoint is not asked
    again within the request, so a hung model costs one timeout, not one per stage."""


RETRY_BASE_S, RETRY_CAP_S = 0.5, 30.0


def _retry_delay(exc: Any, attempt: int) -> float:
    """Seconds before the next attempt: the server's Retry-After (seconds, or -ms), else an
    exponential backoff with jitter; never more than RETRY_CAP_S."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return min(RETRY_CAP_S, max(0.0, float(headers.get(name, "")) * scale))
        except ValueError:
            continue
    return min(RETRY_CAP_S, RETRY_BASE_S * 2 ** attempt * (0.75 + 0.5 * random.random()))


@dataclass
class ChatConfig:
    """How to reach an OpenAI-compatible chat endpoint; None model means offline."""

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    timeout: float = 60.0
    max_retries: int = 2
    limits: LlmLimits = field(default_factory=LlmLimits)
    # Benchmarks: a local stand-in "LLM" with this latency instead of an endpoint.
    stand_in_latency_ms: float | None = None

    @property
    def identity(self) -> str:
        if self.stand_in_latency_ms is not None:
            return f"stand-in:{self.stand_in_latency_ms}ms"
        return "offline" if not self.model else f"openai:{self.model}@{self.base_url or 'default'}"

    @classmethod
    def from_env(cls, offline: bool = False) -> "ChatConfig":
        if offline:
            return cls()
        base_url = os.environ.get("OPENAI_BASE_URL") or None
        api_key = os.environ.get("OPENAI_API_KEY") or None
        model = os.environ.get("GRAPHRAG_DAG_CHAT_MODEL") or None
        if not (api_key or base_url):
            return cls()
        return cls(model=model or "gpt-4o-mini", base_url=base_url, api_key=api_key)


class OfflineChat(protocols.ChatModel):
    """No LLM: nodes see `offline` and use their rule-based, score-based or extractive paths."""

    offline = True
    model = "offline"
    identity = "offline"

    def __init__(self) -> None:
        self.usage = LlmUsage()

    def complete(self, stage: str, prompt: str, *, json_mode: bool = False,
                 max_tokens: int | None = None) -> ChatReply:
        raise GraphRagError("the offline chat model makes no LLM calls")


# The stages whose reply is the answer a person reads: with a token sink set, these stream.
STREAMED_STAGES = frozenset({"answer", "reduce"})


class RequestChat(protocols.ChatModel):
    """An OpenAI-compatible chat model for one request: it counts usage per stage, enforces the
    request's call/token caps, and aborts its in-flight HTTP requests when the request is cancelled
    (each request owns its HTTP client, so closing it touches no one else)."""

    offline = False

    def __init__(self, config: ChatConfig, cancel: CancelToken | None = None) -> None:
        import openai

        self.config = config
        self.model = config.model or ""
        self.identity = config.identity
        self.cancel = cancel or CancelToken()
        self.usage = LlmUsage()
        self._lock = threading.Lock()
        # openai's own client class: openai>=3 is built on httpx2, not httpx, so naming either
        # library here would break on the other major version.
        self._http = openai.DefaultHttpxClient(timeout=config.timeout)
        # Retries are ours (`complete`): a rate limit or a server error is tried again, honouring
        # Retry-After, but a call that timed out or could not connect is not, so a hung or absent
        # model costs a request one timeout rather than one per attempt and stage.
        self._client = openai.OpenAI(base_url=config.base_url, api_key=config.api_key or "not-needed",
                                     timeout=config.timeout, max_retries=0, http_client=self._http)
        self._sockets = track_sockets(self._http)
        self._unregister = self.cancel.on_cancel(self._abort)
        self._unreachable: str | None = None  # why the endpoint is not asked again in this request
        # A service streaming the answer sets this: the answer and reduce calls then stream, and
        # each piece of text is handed over as it arrives (validation still sees the whole reply).
        self.on_token: Callable[[str], None] | None = None

    def _abort(self) -> None:
        """Cancelling: shut the sockets down first (closing a socket does not wake a thread blocked
        reading it, so the call would wait for the server's reply), then close the client."""
        shut_down(self._sockets)
        self._http.close()

    def close(self) -> None:
        self._unregister()
        self._http.close()

    def __reduce__(self) -> tuple:
        """A copy sent to another process (a Ray task) opens its own client; its usage comes back
        on the results."""
        return (RequestChat, (self.config,))

    def _reserve(self) -> None:
        limits = self.config.limits
        with self._lock:
            if limits.max_calls is not None and self.usage.calls >= limits.max_calls:
                raise LlmBudgetExceeded(f"LLM call cap of {limits.max_calls} per request reached")
            used = self.usage.prompt_tokens + self.usage.completion_tokens
            if limits.max_tokens is not None and used >= limits.max_tokens:
                raise LlmBudgetExceeded(f"LLM token cap of {limits.max_tokens} per request reached")
            self.usage.calls += 1

    def _interruptible(self, call: Any) -> Any:
        """Run a blocking HTTP call so that cancelling returns at once: closing an httpx client
        does not interrupt a read already in progress, so the caller stops waiting instead and
        the abandoned call ends with the closed client (or its own timeout)."""
        box: dict[str, Any] = {}
        done = threading.Event()

        def target() -> None:
            try:
                box["value"] = call()
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=target, daemon=True, name="llm-call").start()
        while not done.wait(0.05):
            if self.cancel.cancelled:
                raise self.cancel.error()
        if "error" in box:
            if self.cancel.cancelled:
                raise self.cancel.error() from box["error"]
            raise box["error"]
        return box["value"]

    def complete(self, stage: str, prompt: str, *, json_mode: bool = False,
                 max_tokens: int | None = None) -> ChatReply:
        import openai

        self.cancel.check()
        if self._unreachable is not None:
            raise LlmUnreachable(f"not asked: an earlier call of this request {self._unreachable}")
        self._reserve()
        for attempt in range(self.config.max_retries + 1):
            try:
                return self._complete(stage, prompt, json_mode=json_mode, max_tokens=max_tokens)
            except openai.APITimeoutError:
                self._unreachable = f"timed out after {self.config.timeout:g} s"
                raise
            except openai.APIConnectionError:
                self._unreachable = "could not connect"
                raise
            except (openai.RateLimitError, openai.InternalServerError) as exc:
                if attempt == self.config.max_retries:
                    raise
                if self.cancel.wait(_retry_delay(exc, attempt)):
                    raise self.cancel.error() from exc
        raise AssertionError("unreachable")  # the loop returns or raises

    def _complete(self, stage: str, prompt: str, *, json_mode: bool, max_tokens: int | None) -> ChatReply:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "extra_headers": {"X-Stage": stage},
        }
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        if self.on_token is not None and stage in STREAMED_STAGES:
            text, pt, ct = self._interruptible(lambda: self._streamed(kwargs, self.on_token))
        else:
            resp = self._interruptible(lambda: self._client.chat.completions.create(**kwargs))
            text = (resp.choices[0].message.content or "") if resp.choices else ""
            pt = getattr(resp.usage, "prompt_tokens", 0) or 0
            ct = getattr(resp.usage, "completion_tokens", 0) or 0
        with self._lock:
            self.usage.add(stage, 1, pt, ct, total_calls=False)  # counted by _reserve
        return ChatReply(text=text, prompt_tokens=pt, completion_tokens=ct)


    def _streamed(self, kwargs: dict[str, Any], sink: Callable[[str], None]) -> tuple[str, int, int]:
        """One streamed call: the text goes to `sink` piece by piece, usage comes from the final
        chunk when the server sends one; a cancelled request stops reading and closes the stream."""
        parts: list[str] = []
        pt = ct = 0
        stream = self._client.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True})
        try:
            for chunk in stream:
                if self.cancel.cancelled:  # closing the client does not end a read in progress
                    break
                if chunk.usage is not None:
                    pt, ct = chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0
                for choice in chunk.choices:
                    piece = choice.delta.content if choice.delta else None
                    if piece:
                        parts.append(piece)
                        sink(piece)
        finally:
            stream.close()
        return "".join(parts), pt, ct


class StandInChat(protocols.ChatModel):
    """A local stand-in for an LLM with a fixed latency, for benchmarks of the LLM paths (global
    map fan-out above all) without a network. It knows its task by the prompt's stage, the node
    family that sent it, and answers from the prompt's fields and choices, never by reading the
    prompt's words: editing a prompt file cannot break a benchmark."""

    offline = False
    model = "stand-in"

    def __reduce__(self) -> tuple:
        return (StandInChat, (self.latency * 1000.0,))

    def __init__(self, latency_ms: float, cancel: CancelToken | None = None) -> None:
        self.latency = max(0.0, latency_ms) / 1000.0
        self.identity = f"stand-in:{latency_ms}ms"
        self.cancel = cancel or CancelToken()
        self.usage = LlmUsage()
        self._lock = threading.Lock()

    def _reply(self, prompt: Any) -> str:
        import json

        from graphrag_dag.dataflows.common.textproc import capitalised_phrases, keywords, tokens

        question = prompt.fields.get("query", "")
        if prompt.stage == "parse":
            return json.dumps({"entities": capitalised_phrases(question), "keywords": keywords(question), "themes": []})
        if prompt.stage == "select":
            return json.dumps({"community_ids": list(prompt.choices[: max(1, len(prompt.choices) // 2)])})
        if prompt.stage == "map":
            return json.dumps({"answer": " ".join(prompt.fields.get("content", "").split())[:300], "usefulness": 50})
        if prompt.stage == "extract":
            names = list(dict.fromkeys(capitalised_phrases(prompt.fields.get("text", ""))))[:20]
            return json.dumps({"entities": [{"name": n, "type": "OTHER", "description": n, "aliases": []}
                                            for n in names],
                               "relationships": [{"source": a, "target": b, "description": "", "strength": 5}
                                                 for a, b in zip(names, names[1:], strict=False)], "claims": []})
        if prompt.stage == "rate":  # the share of the question's keywords the report has, 0-10
            asked = keywords(question)
            report = set(tokens(prompt.fields.get("report", "")))
            return json.dumps({"rating": round(10 * sum(k in report for k in asked) / max(1, len(asked)))})
        if prompt.stage == "report":
            first = prompt.fields.get("material", "").split("\n", 1)[0][:120] or "Community"
            return json.dumps({"title": first, "summary": first, "rating": 5, "findings": []})
        return f"Stand-in {prompt.stage} answer."

    def complete(self, stage: str, prompt: str, *, json_mode: bool = False,
                 max_tokens: int | None = None) -> ChatReply:
        from graphrag_dag.dataflows.common.prompting import Prompt

        return self.send(Prompt(stage, prompt), json_mode=json_mode, max_tokens=max_tokens)

    def send(self, prompt: Any, *, json_mode: bool = False, max_tokens: int | None = None) -> ChatReply:
        self.cancel.check()
        started = time.monotonic()
        text = self._reply(prompt)
        counter = token_counter()  # what a benchmark reports is counted as a real model would
        pt, ct = counter.count(prompt.text), counter.count(text)
        # The latency is the model's whole time, reading the prompt included, as a server's is:
        # counting a long map prompt after the wait would add to every round of calls.
        if self.cancel.wait(max(0.0, self.latency - (time.monotonic() - started))):
            raise self.cancel.error()
        with self._lock:
            self.usage.add(prompt.stage, 1, pt, ct)
        return ChatReply(text, pt, ct)


def chat_for_request(config: ChatConfig, cancel: CancelToken | None) -> protocols.ChatModel:
    if config.stand_in_latency_ms is not None:
        return StandInChat(config.stand_in_latency_ms, cancel)
    return OfflineChat() if not config.model else RequestChat(config, cancel)
