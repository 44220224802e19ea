"""The models handed to the DAG as inputs: chat models, embedders and the token counter."""
