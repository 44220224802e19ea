"""Local search: what the index says about the entities a question names.

See README.md in this folder for the nodes and the picture.
"""

from graphrag_dag.dataflows.local import (
    chunk_recall,
    community_ranking,
    community_recall,
    community_selection,
    entity_matching,
    evidence,
    llm_prompts,
    local_answer,
    local_context,
    query_parsing,
    sources,
)

MODULES = [llm_prompts, query_parsing, entity_matching, community_recall, chunk_recall, community_ranking,
           community_selection, sources, evidence, local_context, local_answer]
FINAL = "local_result"
