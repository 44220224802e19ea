"""Tests for the fake OpenAI server, driven by the real openai client over HTTP.

Other tests rely on this server to simulate rate limits, failures, timeouts
and concurrency, so its behaviour as seen by the real client is pinned here.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from llm_server import LlmServer, Recorded, Reply, fake_embedding, scripted


@pytest.fixture
def srv() -> Iterator[LlmServer]:
    with LlmServer() as server:
        yield server


def client(server: LlmServer, **kwargs: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, **kwargs)  # type: ignore[arg-type]


def ask(c: openai.OpenAI, text: str = "hello", **kwargs: object):
    return c.chat.completions.create(
        model="test-model", messages=[{"role": "user", "content": text}], **kwargs  # type: ignore[arg-type]
    )


def test_content_round_trip_and_usage(srv: LlmServer) -> None:
    srv.responder = lambda req: Reply(content='{"ok": true}', prompt_tokens=11, completion_tokens=3)
    resp = ask(client(srv), "ping")
    assert resp.object == "chat.completion"
    assert resp.model == "test-model"
    assert resp.choices[0].message.role == "assistant"
    assert resp.choices[0].message.content == '{"ok": true}'
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage is not None
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens, resp.usage.total_tokens) == (11, 3, 14)


def test_default_responder_and_default_usage(srv: LlmServer) -> None:
    text = "x" * 40
    resp = ask(client(srv), text)
    assert resp.choices[0].message.content == "{}"
    assert resp.usage is not None
    assert resp.usage.prompt_tokens == 10  # len(prompt) // 4
    assert resp.usage.completion_tokens == 0


def test_request_recorded_with_prompt_and_stage(srv: LlmServer) -> None:
    c = client(srv)
    c.chat.completions.create(
        model="m",
        messages=[{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Extract entities"}],
        extra_headers={"X-Stage": "parse"},
    )
    ask(c, "no stage")
    reqs = srv.chat_requests()
    assert len(reqs) == 2
    first = reqs[0]
    assert first.path == "/chat/completions"
    assert first.stage == "parse"
    assert "You are terse." in first.prompt and "Extract entities" in first.prompt
    assert first.body["model"] == "m"
    assert first.finished is not None and first.finished >= first.started
    assert reqs[1].stage is None


def test_rate_limit_429_with_retry_after(srv: LlmServer) -> None:
    srv.responder = lambda req: Reply(status=429, content="slow down", headers={"Retry-After": "1"})
    with pytest.raises(openai.RateLimitError) as info:
        ask(client(srv))
    assert info.value.status_code == 429
    assert info.value.response.headers["Retry-After"] == "1"
    assert "slow down" in str(info.value)


def test_500_is_internal_server_error(srv: LlmServer) -> None:
    srv.responder = lambda req: Reply(status=500)
    with pytest.raises(openai.InternalServerError):
        ask(client(srv))


def test_drop_is_connection_error(srv: LlmServer) -> None:
    srv.responder = scripted(Reply(drop=True), "after")
    c = client(srv)
    with pytest.raises(openai.APIConnectionError) as info:
        ask(c)
    assert not isinstance(info.value, openai.APITimeoutError)
    assert srv.chat_requests()[0].finished is None
    assert ask(c).choices[0].message.content == "after"


def test_client_timeout_then_server_still_usable(srv: LlmServer) -> None:
    srv.responder = scripted(Reply(content="late", delay=2), "fine")
    c = client(srv, timeout=0.3)
    t0 = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        ask(c)
    assert time.monotonic() - t0 < 1.0
    assert ask(c).choices[0].message.content == "fine"
    # The server notices the abandoned request (well before its 2 s delay)
    # and never counts it as answered.
    deadline = time.monotonic() + 1.0
    while srv._in_flight and time.monotonic() < deadline:
        time.sleep(0.02)
    assert srv._in_flight == 0
    assert srv.chat_requests()[0].finished is None


def test_max_in_flight_counts_concurrent_requests(srv: LlmServer) -> None:
    srv.responder = lambda req: Reply(content="ok", delay=0.3)
    c = client(srv)
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda i: ask(c, f"q{i}").choices[0].message.content, range(6)))
    assert results == ["ok"] * 6
    assert srv.max_in_flight == 6
    srv.reset()
    assert srv.requests == [] and srv.max_in_flight == 0
    ask(c)
    assert srv.max_in_flight == 1


def test_embeddings_shape_and_determinism(srv: LlmServer) -> None:
    c = client(srv)
    resp = c.embeddings.create(model="emb", input=["alpha", "beta", "alpha"])
    assert [d.index for d in resp.data] == [0, 1, 2]
    assert all(d.object == "embedding" and len(d.embedding) == 8 for d in resp.data)
    assert resp.data[0].embedding == pytest.approx(resp.data[2].embedding)
    assert resp.data[0].embedding != pytest.approx(resp.data[1].embedding)
    assert resp.data[0].embedding == pytest.approx(fake_embedding("alpha", 8), abs=1e-6)
    assert resp.usage.total_tokens > 0

    floats = c.embeddings.create(model="emb", input="alpha", dimensions=16, encoding_format="float")
    assert len(floats.data) == 1 and len(floats.data[0].embedding) == 16
    assert [r.path for r in srv.requests] == ["/embeddings", "/embeddings"]
    assert srv.chat_requests() == []


def test_models_endpoint(srv: LlmServer) -> None:
    models = client(srv).models.list()
    assert [m.id for m in models.data] == ["test-model"]


def test_scripted_order_repeat_and_thread_safety() -> None:
    dummy = Recorded(path="/chat/completions", body={}, started=0.0, finished=None, stage=None)
    r = scripted("a", Reply(content="b", status=429))
    assert r(dummy).content == "a"
    second = r(dummy)
    assert (second.content, second.status) == ("b", 429)
    assert r(dummy).content == "b"

    many = scripted(*[str(i) for i in range(200)])
    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(lambda _: many(dummy).content, range(200)))
    assert sorted(got, key=int) == [str(i) for i in range(200)]


def test_stop_returns_promptly_with_pending_delayed_request() -> None:
    server = LlmServer(lambda req: Reply(content="never", delay=30)).start()
    c = client(server, timeout=10)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            ask(c)
        except BaseException as exc:  # noqa: BLE001 - recorded for assertion
            errors.append(exc)

    t = threading.Thread(target=call)
    t.start()
    deadline = time.monotonic() + 2
    while not server.chat_requests() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.chat_requests(), "request never reached the server"

    t0 = time.monotonic()
    server.stop()
    assert time.monotonic() - t0 < 1.0
    t.join(timeout=2)
    assert not t.is_alive()
    assert errors and isinstance(errors[0], openai.APIConnectionError)
    assert server.chat_requests()[0].finished is None

    # The port is released: nothing accepts connections any more.
    port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
