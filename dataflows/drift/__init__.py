"""DRIFT search: a primer over the nearest community reports drafts an answer and follow-up
questions, each follow-up runs as a local search inside the request, and a reduce writes the
answer from every step's evidence.

See README.md in this folder for the nodes and the picture.
"""

from graphrag_dag.dataflows.drift import drift_answer, drift_prompts, follow_ups, primer

MODULES = [primer, follow_ups, drift_prompts, drift_answer]
FINAL = "drift_result"
