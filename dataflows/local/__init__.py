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
# The seed's stages, in order, by the modules whose nodes they hold: the lineage page draws each
# as one box until opened. A module not named here (the prompts) lends each node to the stage of
# its first consumer. Sources and evidence come after the selection, whose claims they rank.
STAGES = {
    "parse": [query_parsing, sub_questions],
    "match": [entity_matching],
    "recall": [community_recall, chunk_recall, pages],
    "rank": [community_ranking, entity_walk],
    "select": [community_selection],
    "answer": [sources, evidence, local_context, local_answer],
}
# The nodes that build what a process keeps per namespace version (`titled_units` builds the page
# titles' index): GraphRag.load_indexes runs them before a first search would.
MEMOIZED = ["name_index", "graph_index", "community_reports", "unit_total", "titled_units"]
