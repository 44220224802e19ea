"""Local search: what the index says about the entities a question names.

See README.md in this folder for the nodes and the picture.
"""

from graphrag_dag.dataflows.local import (
    chunk_recall,
    community_ranking,
    community_recall,
    community_selection,
    entity_matching,
    entity_walk,
    evidence,
    llm_prompts,
    local_answer,
    local_context,
    pages,
    query_parsing,
    sources,
    sub_questions,
)

MODULES = [llm_prompts, query_parsing, entity_matching, community_recall, chunk_recall, community_ranking,
           community_selection, pages, entity_walk, sources, evidence, local_context, local_answer, sub_questions]
FINAL = "local_result"
# The nodes that build what a process keeps per namespace version (`titled_units` builds the page
# titles' index): GraphRag.load_indexes runs them before a first search would.
MEMOIZED = ["name_index", "graph_index", "community_reports", "unit_total", "titled_units"]
