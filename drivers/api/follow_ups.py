"""DRIFT's follow-up searches: local search run inside the DRIFT request (dataflows/drift).

A follow-up reads the request's own snapshot (one REPEATABLE READ transaction, so every step sees
the same index), uses the request's chat model (so LLM caps and accounting cover the whole
request) and its cancellation token, and runs under the request's local switches."""

from __future__ import annotations

import re
from typing import Any

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common.resources import LocalSearcher
from graphrag_dag.drivers.runtime import engine
from graphrag_dag.drivers.runtime.cancel import CancelToken

_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class FollowUpSearcher(LocalSearcher):
    def __init__(self, rag: Any, inputs: dict[str, Any], config: dict[str, str], cancel: CancelToken,
                 max_chars: int) -> None:
        self.rag = rag
        self.inputs = dict(inputs)  # the request's resources and settings; the query is replaced
        self.config = dict(config)
        self.cancel = cancel
        self.max_chars = max_chars

    def search(self, question: str) -> Any:
        text = _CONTROL_RE.sub(" ", question).strip()[:self.max_chars]
        if not text:
            raise ValueError("the follow-up question is empty")
        dr = self.rag.engine.driver("local", config=self.config, adapters=self.rag._adapters)
        state = engine.RunState(cancel=self.cancel, flow="local", namespace=self.inputs["namespace"],
                                usage=self.inputs["chat_model"].usage)
        try:
            values = engine.execute(dr, ["local_result"], {**self.inputs, "query": text}, state)
        except BadInput as exc:  # a model's odd question must not fail the whole request
            raise ValueError(str(exc)) from None
        return values["local_result"]
