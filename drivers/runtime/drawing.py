"""DAG pictures: the whole flow, or the executed path with each node's time and cache status."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from graphrag_dag.dataflows.common.errors import BadInput

FORMATS = (".dot", ".svg", ".png")


def check_picture_path(path: str | Path | None) -> Path | None:
    if path is None:
        return None
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise BadInput(f"unsupported picture format {p.suffix or '(none)'!r}: use .svg, .png or .dot")
    if p.suffix.lower() != ".dot" and shutil.which("dot") is None:
        raise BadInput("rendering .svg/.png needs the graphviz 'dot' program (e.g. apt-get install graphviz); "
                       "use a .dot file instead")
    return p


def _write(digraph: Any, p: Path | None) -> Any:
    if p is None:
        return digraph
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix.lower() == ".dot":
        p.write_text(digraph.source, encoding="utf-8")
    else:
        p.write_bytes(digraph.pipe(format=p.suffix.lower()[1:]))
    return digraph


def draw_flow(flow: str, path: str | Path | None = None, config: dict[str, Any] | None = None) -> Any:
    """The flow's DAG as its config switches it (validated like a search's config)."""
    from graphrag_dag.dataflows.common import switches
    from graphrag_dag.drivers.runtime import engine

    final = engine.final_node(flow)
    p = check_picture_path(path)
    cfg = switches.normalize(flow, config) if flow in switches.SWITCHES else (config or {})
    if flow not in switches.SWITCHES and config:
        raise BadInput(f"the {flow} DAG has no switches")
    dr = engine.builder(flow, cfg).build()
    digraph = dr.visualize_execution([final], output_file_path=None, inputs={}, bypass_validation=True,
                                     orient="TB", hide_inputs=False, show_legend=True)
    return _write(digraph, p)


def draw_trace(trace: list[Any], edges: list[tuple[str, str]], path: str | Path | None = None) -> Any:
    """Only the nodes that ran, labelled with their time and whether the cache served them."""
    import graphviz

    p = check_picture_path(path)
    g = graphviz.Digraph("trace", graph_attr={"rankdir": "TB"})
    ran = {t.node: t for t in trace}
    for name, t in ran.items():
        label = f"{name}\n{t.ms:.1f} ms" + ("\n(cached)" if t.cached else "")
        g.node(name, label=label, shape="box", style="rounded,filled",
               fillcolor="#d9ead3" if t.cached else "#cfe2f3")
    for a, b in edges:
        if a in ran and b in ran:
            g.edge(a, b)
    return _write(g, p)
