"""Time Microsoft GraphRAG's own local-search context builder on a GraphRAG-format index.

Reference point for the scale benchmark: how long does upstream GraphRAG take to
build the local-search context (entity mapping via vector search + entity /
relationship / claim / community-report / text-unit tables, token-budgeted)
on the same synthetic index we benchmark? No LLM call is made; only
``LocalSearchMixedContext.build_context`` is timed.

Runs in its own venv (graphrag is NOT a dependency of this project), offline:

    python3 -m venv /tmp/grvenv && /tmp/grvenv/bin/pip install -q graphrag
    /tmp/grvenv/bin/python tests/benchmarks/graphrag_context_builder.py --index /tmp/synth-2000 --queries 30
    /tmp/grvenv/bin/python tests/benchmarks/graphrag_context_builder.py --index /tmp/synth-20000 --queries 30

Stand-ins (the index has no embeddings and there is no network):
- entity description embeddings come from a deterministic 256-dim hashing
  bag-of-words embedder (duck-types graphrag_llm's ``LLMEmbedding.embedding``),
  stored in graphrag's own LanceDB vector store in a temp dir, keyed by entity
  id and embedding "title:description" like GraphRAG's indexer;
- the tokenizer is GraphRAG's default (tiktoken o200k_base), loaded from the
  BPE file litellm bundles (TIKTOKEN_CACHE_DIR), so no download is needed.

Prints one JSON line: index, queries, p50_ms, p95_ms, mean_ms, load_s
(load_s = one-time parquet loading + adapter conversion + embedding/indexing).
"""

if __name__ == "__main__":
    import argparse
    import hashlib
    import json
    import math
    import os
    import random
    import re
    import statistics
    import sys
    import time
    from pathlib import Path
    from types import SimpleNamespace

    # The builder as eval assembles it (this script runs in GraphRAG's venv, without graphrag-dag).
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "drivers" / "tools" / "quality"))
    from graphrag_context_sources import context_builder

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", required=True, help="directory holding the GraphRAG parquet files")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5, help="untimed queries run first")
    ap.add_argument("--community-level", type=int, default=2, help="graphrag query CLI default")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    DIMS = 256

    class HashingEmbedder:
        """Lower-cased word + char-trigram feature hashing, L2-normalised (deterministic, offline)."""

        def vector(self, text: str) -> list[float]:
            v = [0.0] * DIMS
            for word in re.findall(r"\w+", text.lower()):
                for feat in [word] + [word[i:i + 3] for i in range(max(1, len(word) - 2))]:
                    h = int.from_bytes(hashlib.blake2b(feat.encode(), digest_size=8).digest(), "little")
                    v[h % DIMS] += 1.0 if (h >> 32) & 1 else -1.0
            norm = math.sqrt(sum(x * x for x in v)) or 1.0
            return [x / norm for x in v]

        def embedding(self, input: list[str], **_: object) -> SimpleNamespace:  # noqa: A002
            vectors = [self.vector(t) for t in input]
            return SimpleNamespace(embeddings=vectors, first_embedding=vectors[0] if vectors else [])

    root = Path(args.index)
    t0 = time.perf_counter()
    embedder = HashingEmbedder()
    builder, params, _tables, tmp = context_builder(
        root, lambda e: embedder.vector(f"{e.title}:{e.description or ''}"), DIMS, embedder, args.community_level)
    entities = list(builder.entities.values())
    load_s = time.perf_counter() - t0

    # Query mix mirrors drivers/bench.py: plain mention, typo, two-entity, lower-case.
    rng = random.Random(args.seed)
    names = rng.sample([e.title for e in entities], min(len(entities), 2 * (args.queries + args.warmup)))

    def typo(name: str) -> str:
        i = rng.randrange(1, max(2, len(name) - 2))
        return name[:i] + name[i + 1] + name[i] + name[i + 2:] if i + 1 < len(name) else name

    forms = [
        lambda: f"What is {rng.choice(names).title()} known for?",
        lambda: f"Tell me about {typo(rng.choice(names).title())}",
        lambda: f"How are {rng.choice(names).title()} and {rng.choice(names).title()} connected?",
        lambda: f"what role does {rng.choice(names).lower()} play",
    ]
    queries = [forms[i % len(forms)]() for i in range(args.warmup + args.queries)]

    times_ms, tokens = [], []
    for i, q in enumerate(queries):
        t = time.perf_counter()
        result = builder.build_context(query=q, **params)
        if i >= args.warmup:
            times_ms.append((time.perf_counter() - t) * 1000)
            tokens.append(len(builder.tokenizer.encode(str(result.context_chunks))))
    tmp.cleanup()

    def pct(values: list[float], q: float) -> float:  # same interpolation as drivers/bench.py
        o, k = sorted(values), (len(values) - 1) * q
        lo, hi = int(k), min(int(k) + 1, len(values) - 1)
        return o[lo] + (o[hi] - o[lo]) * (k - lo)

    print(json.dumps({"index": str(root), "queries": len(times_ms), "p50_ms": round(pct(times_ms, 0.5), 3),
                      "p95_ms": round(pct(times_ms, 0.95), 3), "mean_ms": round(statistics.fmean(times_ms), 3),
                      "load_s": round(load_s, 3), "entities": len(entities),
                      "mean_context_tokens": round(statistics.fmean(tokens))}))
    os._exit(0)  # skip slow interpreter teardown of lancedb/litellm threads
