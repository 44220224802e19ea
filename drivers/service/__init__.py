"""`graphrag-dag serve` and `graphrag-dag mcp`: the library over HTTP and MCP.

    app.py       the app: its services, limits and error answers
    routes/      the routers, one module per group of routes
    deps.py      what routes share: services, the caller's key, the namespace check
    runner.py    searches on worker threads, SSE
    keys.py      API keys and who may do what
    guard.py     size limits and metrics per request
    jobs.py      background imports and indexing
    uploads.py   uploaded files and import paths
    lineage.py   a flow's graph and runs of chosen nodes (the lineage page's data)
    metrics.py   Prometheus text
    mcp_tools.py the MCP tools, over stdio and HTTP
    protocol.py  uvicorn without Nagle's delay
    commands.py  the command line: serve, keys, mcp
"""
