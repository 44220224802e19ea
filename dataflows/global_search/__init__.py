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
# The seed's stages, in order (see the local flow's STAGES): the level's summaries with their leaf
# claims, the batches, the map with its validated scores, and the reduce within its budget.
STAGES = {
    "summaries": [global_summaries, dynamic_selection],
    "batch": [global_batches],
    "map": [global_map, global_map_tasks],
    "reduce": [global_reduce],
}
