"""Retrieval quality: `graphrag-dag eval` scores every system on a benchmark folder by one code
path (see evaluate.py)."""
