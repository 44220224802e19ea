"""Everything around the dataflows, by role: `api` (the Python API), `cli` (the command line),
`service` (HTTP, MCP and the lineage page), `runtime` (running the Hamilton drivers), `llm` (chat
models, embedders, tokens), `store` (PostgreSQL + pgvector) and `ingest` (indexing, import,
export, the demo corpus)."""
