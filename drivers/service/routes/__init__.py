"""The service's routers, one module per group of routes as /docs groups them:

    health.py      /healthz, /metrics (no key)
    search.py      /v1/search/{local,global,drift,basic}
    namespaces.py  /v1/namespaces and the lookups inside one
    jobs.py        imports and uploads run as background jobs, /v1/jobs
    lineage.py     the lineage page, /v1/dag and /v1/run
"""

from graphrag_dag.drivers.service.routes import health, jobs, lineage, namespaces, search

ROUTERS = (health.router, search.router, namespaces.router, jobs.router, lineage.router)
