"""Basic search: naive RAG over the evidence chunks, our baseline. See README.md in this folder."""

from graphrag_dag.dataflows.basic import basic_search

MODULES = [basic_search]
FINAL = "basic_result"
