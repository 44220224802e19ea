"""Run inside a Python that has Microsoft GraphRAG (a separate venv: graphrag is not our
dependency): the text units its local search puts in its context, per question, in context order.

    PY graphrag_context_sources.py --index DIR --vectors FILE.json --out FILE.json

DIR is an index in GraphRAG v3 parquet (`graphrag-dag export --format graphrag`). FILE.json holds
the vectors our embedder made: `{"dim", "entities": {id: vector}, "questions": [{"id", "question",
"vector"}]}`, so GraphRAG maps each question to entities with the same embeddings local search
uses (entity text "title:description", as GraphRAG's indexer embeds it). The context is built by
`LocalSearchMixedContext.build_context` with the parameters GraphRAG's query factory passes; no
LLM is called. Writes `[{"question_id", "text_unit_ids", "ms"}]`, `ms` the time of build_context.

This file imports nothing of graphrag-dag: it runs where graphrag-dag is not installed.
tests/benchmarks/graphrag_context_builder.py times the same builder with `context_builder`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable


def context_builder(index: Path, vector_of_entity: Callable[[Any], list[float] | None], dim: int,
                    query_embedder: Any, community_level: int = 2) -> tuple[Any, dict[str, Any], Any, Any]:
    """GraphRAG's local-search context builder over `index`, as graphrag.api.query.local_search
    assembles it, with entity vectors from `vector_of_entity` in its own LanceDB store. Returns the
    builder, the build_context parameters GraphRAG's query factory passes, the parquet tables and
    the temporary folder of the vector store (clean it up when done)."""
    import logging
    import tempfile

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch on import
    import litellm  # noqa: F401  (points tiktoken at its bundled encodings: no download)
    import pandas as pd
    from graphrag.config.defaults import graphrag_config_defaults
    from graphrag.query.context_builder.entity_extraction import EntityVectorStoreKey
    from graphrag.query.indexer_adapters import (
        read_indexer_covariates,
        read_indexer_entities,
        read_indexer_relationships,
        read_indexer_reports,
        read_indexer_text_units,
    )
    from graphrag.query.structured_search.local_search.mixed_context import LocalSearchMixedContext
    from graphrag.tokenizer.get_tokenizer import get_tokenizer
    from graphrag_vectors import VectorStoreDocument
    from graphrag_vectors.lancedb import LanceDBVectorStore

    logging.getLogger("graphrag").setLevel(logging.ERROR)  # it warns once per query at the budget
    df = {n: pd.read_parquet(index / f"{n}.parquet") for n in
          ("entities", "relationships", "communities", "community_reports", "covariates", "text_units")}
    entities = read_indexer_entities(df["entities"], df["communities"], community_level)
    tmp = tempfile.TemporaryDirectory(prefix="graphrag-lancedb-")
    store = LanceDBVectorStore(db_uri=tmp.name, index_name="entity_description", vector_size=dim)
    store.connect()
    store.create_index()
    store.load_documents([VectorStoreDocument(id=e.id, vector=v) for e in entities
                          if (v := vector_of_entity(e)) is not None])
    builder = LocalSearchMixedContext(
        entities=entities, entity_text_embeddings=store, text_embedder=query_embedder,
        text_units=read_indexer_text_units(df["text_units"]),
        community_reports=read_indexer_reports(df["community_reports"], df["communities"], community_level),
        relationships=read_indexer_relationships(df["relationships"]),
        covariates={"claims": read_indexer_covariates(df["covariates"])}, tokenizer=get_tokenizer(),
        embedding_vectorstore_key=EntityVectorStoreKey.ID,
    )
    ls = graphrag_config_defaults.local_search
    params = dict(
        text_unit_prop=ls.text_unit_prop, community_prop=ls.community_prop,
        conversation_history_max_turns=ls.conversation_history_max_turns,
        conversation_history_user_turns_only=True, top_k_mapped_entities=ls.top_k_entities,
        top_k_relationships=ls.top_k_relationships, include_entity_rank=True, include_relationship_weight=True,
        include_community_rank=False, return_candidate_context=False,
        embedding_vectorstore_key=EntityVectorStoreKey.ID, max_context_tokens=ls.max_context_tokens,
    )
    return builder, params, df, tmp


def main() -> None:
    import argparse
    import json
    import time
    from types import SimpleNamespace

    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--vectors", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--community-level", type=int, default=2, help="graphrag query's default")
    args = ap.parse_args()
    data = json.loads(Path(args.vectors).read_text(encoding="utf-8"))
    by_question = {q["question"]: q["vector"] for q in data["questions"]}

    class GivenVectors:
        """Answers GraphRAG's embedding calls with the vectors graphrag-dag computed."""

        def embedding(self, input: list[str], **_: object) -> SimpleNamespace:  # noqa: A002
            vectors = [by_question[t] for t in input]
            return SimpleNamespace(embeddings=vectors, first_embedding=vectors[0] if vectors else [])

    builder, params, df, tmp = context_builder(Path(args.index), lambda e: data["entities"].get(e.id),
                                               int(data["dim"]), GivenVectors(), args.community_level)
    units = df["text_units"]
    short_to_id = {str(h): i for h, i in zip(units["human_readable_id"], units["id"], strict=True)}
    out = []
    for q in data["questions"]:
        started = time.perf_counter()
        result = builder.build_context(query=q["question"], **params)
        ms = (time.perf_counter() - started) * 1000
        table = result.context_records.get("sources")
        ids = [] if table is None or "id" not in table else [short_to_id.get(str(i), str(i)) for i in table["id"]]
        out.append({"question_id": q["id"], "text_unit_ids": ids, "ms": ms})
    Path(args.out).write_text(json.dumps(out), encoding="utf-8")
    tmp.cleanup()
    os._exit(0)  # skip the slow teardown of lancedb/litellm threads


if __name__ == "__main__":
    main()
