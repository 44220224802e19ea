"""Global search: what a whole corpus says about a question, map-reduced over community summaries.

See README.md in this folder for the nodes and the picture.
"""

from graphrag_dag.dataflows.global_search import (
    dynamic_selection,
    global_batches,
    global_map,
    global_map_tasks,
    global_reduce,
    global_summaries,
    llm_prompts,
)

MODULES = [llm_prompts, global_summaries, dynamic_selection, global_batches, global_map, global_map_tasks,
           global_reduce]
FINAL = "global_result"
