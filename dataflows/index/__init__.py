"""Ways into a namespace: the indexer (a user's own documents) and the Microsoft GraphRAG import,
each ending in `prepare`, which decides what the store writes. See README.md in this folder."""

from graphrag_dag.dataflows.index import (
    corpus,
    extraction,
    extraction_tasks,
    graphrag_claims,
    graphrag_embeddings,
    graphrag_graph,
    graphrag_records,
    graphrag_source,
    graphrag_text,
    indexed,
    leiden,
    llm_extraction,
    prepare,
    relations,
    reports,
    resolution,
    units,
)

INDEX_MODULES = [corpus, units, llm_extraction, extraction_tasks, extraction, resolution, relations, leiden, reports, indexed]

IMPORT_MODULES = [graphrag_source, graphrag_text, graphrag_graph, graphrag_claims, graphrag_embeddings,
                  graphrag_records]
PREPARE_MODULES = [prepare]
IMPORT_FINAL = "index_records"
PREPARE_FINAL = "write_set"
