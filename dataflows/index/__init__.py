"""Ways into a namespace: the Microsoft GraphRAG import now (the indexer joins it), each ending in
`prepare`, which decides what the store writes. See README.md in this folder."""

from graphrag_dag.dataflows.index import (
    graphrag_claims,
    graphrag_embeddings,
    graphrag_graph,
    graphrag_records,
    graphrag_source,
    graphrag_text,
    prepare,
)

IMPORT_MODULES = [graphrag_source, graphrag_text, graphrag_graph, graphrag_claims, graphrag_embeddings,
                  graphrag_records]
PREPARE_MODULES = [prepare]
IMPORT_FINAL = "index_records"
PREPARE_FINAL = "write_set"
