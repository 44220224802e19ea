"""Run the indexer flow: a user's files in, one namespace written atomically out; or an existing
namespace brought up to date with what changed, or with some of its documents removed.

Checks that cannot depend on the data (namespace name, --replace) run before anything is read,
so a refused run costs nothing; the flow ends in `prepare` (vectors, leaf communities, claim
quotes) and the store writes the result in one transaction, so a crash at any moment leaves the
namespace as it was.

An update (`--update`, `delete-documents`) runs the same flow on the documents as they are now:
- documents are keyed by their content (a document's id holds a hash of its text), so when the
  documents and the indexer's settings are those the namespace was written with, nothing is
  computed and nothing is written;
- otherwise the LLM's replies come from the extraction cache (keyed by prompt), vectors of texts
  the namespace already embeds are taken from it (`ReusingEmbedder`), as are the token counts of
  its evidence lines (`KnownCounts`), only the entities whose edges changed move between
  communities (dataflows/index/leiden.py), and the store writes only the rows that differ
  (drivers/store/writer.py), so readers see the namespace old or new.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from graphrag_dag.dataflows import index
from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common.line_tokens import stored_tokens
from graphrag_dag.dataflows.common.records import Document
from graphrag_dag.dataflows.index.corpus import Corpus
from graphrag_dag.drivers.api.options import IndexOptions, option_values
from graphrag_dag.drivers.llm.chat import ChatConfig, chat_for_request
from graphrag_dag.drivers.llm.embedders import ReusingEmbedder
from graphrag_dag.drivers.llm.tokens import KnownCounts, token_counter
from graphrag_dag.drivers.runtime import engine
from graphrag_dag.drivers.runtime.cancel import CancelToken
from graphrag_dag.drivers.runtime.config import package_version
from graphrag_dag.drivers.store import IndexedState, validate_namespace
from graphrag_dag.drivers.store.cache import StoreExtractionCache

# Options that say how the work runs, not what it computes: a change of them changes no row.
EXECUTION_OPTIONS = ("extraction_concurrency", "extraction_fanout")
_NO_ROWS = {"deleted": 0, "written": 0}


def index_corpus(rag: Any, paths: Sequence[str | Path], namespace: str, *, replace: bool = False,
                 options: Any = None, progress: Callable[[str], None] | None = None,
                 cancel: CancelToken | None = None, offline: bool = False,
                 chat: ChatConfig | None = None, update: bool = False) -> dict[str, Any]:
    """Index `paths` (files or folders) into `namespace`, with the configured chat model unless
    `offline` (or none is configured); returns counts, warnings, LLM calls and tokens per stage,
    extraction cache hits and the time of each stage in milliseconds.

    `update` syncs an existing namespace with `paths` as they are now (see the module docstring)
    and reports, under "update", what it kept, reused and redid. `replace` rebuilds with the same
    caches; `update` refuses a namespace that does not exist yet."""
    validate_namespace(namespace)
    if not paths:
        raise BadInput("give at least one file or folder to index")
    if update and replace:
        raise BadInput("--update and --replace do not go together: --update syncs, --replace rebuilds")
    stored = rag.store.indexed_state(namespace)
    if update and stored is None:
        raise BadInput(f"namespace {namespace!r} does not exist; index it first (without --update)")
    if stored is not None and not (replace or update):
        raise BadInput(f"namespace {namespace!r} already exists; pass --replace to overwrite it or --update to sync it")
    opts = options or IndexOptions()
    opts.validate()
    run = _Run(rag, namespace, opts, ChatConfig() if offline else (chat or rag.chat), progress, cancel, paths)
    try:
        if not update:
            return run.write(None, stored)
        corpus = run.execute(["corpus"])["corpus"]
        return run.write(corpus, stored)
    finally:
        run.close()


def delete_documents(rag: Any, namespace: str, ids: Sequence[str], *, progress: Callable[[str], None] | None = None,
                     cancel: CancelToken | None = None, chat: ChatConfig | None = None) -> dict[str, Any]:
    """Remove documents from an indexed namespace: the rest is indexed again as it was, through the
    same path as an update, so the removed documents' units, chunks, claims and mentions go, and
    entities and edges that nothing else supports go with them. See `planned_deletion` for what
    is refused (nothing changes then)."""
    plan = planned_deletion(rag, namespace, ids, chat)
    stored = rag.store.indexed_state(namespace, texts=True)  # the texts, read once the names are known
    if stored is None:
        raise BadInput(f"unknown namespace {namespace!r} (see `graphrag-dag namespaces`)")
    kept = [d for d in stored.documents if d.id not in plan.gone]
    run = _Run(rag, namespace, plan.options, plan.chat, progress, cancel, ())
    try:
        corpus = Corpus(kept, [], {d.id for d in kept if d.record_title})
        return {**run.write(corpus, stored), "deleted_documents": sorted(plan.gone)}
    finally:
        run.close()


@dataclass
class Deletion:
    gone: set[str]  # the ids of the documents removed
    options: IndexOptions  # those the namespace was indexed with
    chat: ChatConfig


def planned_deletion(rag: Any, namespace: str, ids: Sequence[str], chat: ChatConfig | None = None) -> Deletion:
    """What removing `ids` from `namespace` means, or bad input: no such namespace, one not written
    by this indexer, an unknown name, every document named, or a chat model other than the one
    the namespace was indexed with. A document is named by its id or by what precedes the id's
    `#` (its file's path in the corpus, which names all its documents)."""
    validate_namespace(namespace)
    if not ids:
        raise BadInput("name at least one document to delete")
    stored = rag.store.indexed_state(namespace)  # ids and titles: enough to check the names
    if stored is None:
        raise BadInput(f"unknown namespace {namespace!r} (see `graphrag-dag namespaces`)")
    if stored.settings is None:
        raise BadInput(f"namespace {namespace!r} was not written by this version's indexer (it was "
                       f"{'imported' if stored.source == 'import' else 'written before documents could be removed'}): "
                       "index its documents again instead")
    gone = _named(stored.documents, ids)
    if len(gone) == len(stored.documents):
        raise BadInput(f"that removes every document of {namespace!r}: drop the namespace instead")
    settings = stored.settings
    offline = settings["chat"] is None
    chat = ChatConfig() if offline else (chat or rag.chat)
    if not offline and chat.model != settings["chat"]:
        raise BadInput(f"namespace {namespace!r} was indexed with the chat model {settings['chat']!r}; "
                       f"configure it to remove documents (the configured one is {chat.model or 'none'})")
    return Deletion(gone, IndexOptions(**settings["options"]), chat)


def _named(documents: list[Document], names: Sequence[str]) -> set[str]:
    ids = {d.id for d in documents}
    by_key: dict[str, set[str]] = {}
    for d in documents:
        by_key.setdefault(d.id.rsplit("#", 1)[0], set()).add(d.id)
    found: set[str] = set()
    unknown = []
    for name in names:
        matched = {name} if name in ids else by_key.get(name)
        if matched:
            found |= matched
        else:
            unknown.append(name)
    if unknown:
        raise BadInput(f"no such document: {', '.join(unknown[:5])}{' …' if len(unknown) > 5 else ''} "
                       "(see `graphrag-dag documents`)")
    return found


def index_settings(opts: IndexOptions, chat_model: Any, chat: ChatConfig, embedder: Any) -> dict[str, Any]:
    """What decides the rows an index run writes, apart from the documents: the options that
    change results, the chat model (None offline), the embedder and this package's version (its
    rules). Stored with the namespace; an update with other settings recomputes everything."""
    return {"options": {k: v for k, v in option_values(opts).items() if k not in EXECUTION_OPTIONS},
            "chat": None if chat_model.offline else chat.model,
            "embedder": f"{embedder.model}/{embedder.dim}", "version": package_version()}


class _Run:
    """One index run's resources and its pieces of the flow."""

    def __init__(self, rag: Any, namespace: str, opts: IndexOptions, chat: ChatConfig,
                 progress: Callable[[str], None] | None, cancel: CancelToken | None,
                 paths: Sequence[str | Path]) -> None:
        self.rag, self.namespace, self.progress = rag, namespace, progress
        self.started = time.perf_counter()
        self.cancel = cancel or CancelToken()
        self.chat_model = chat_for_request(chat, self.cancel)
        self.settings = index_settings(opts, self.chat_model, chat, rag.embedder)
        self.inputs = {"corpus_paths": [str(p) for p in paths], "token_counter": token_counter(),
                       "embedder": rag.embedder, "progress": progress, "chat_model": self.chat_model,
                       "extraction_cache": StoreExtractionCache(rag.store.pool, namespace), **dataclasses.asdict(opts)}
        self.state = engine.RunState(cancel=self.cancel, flow="index", namespace=namespace, usage=self.chat_model.usage)
        fanout = self.inputs.pop("extraction_fanout", "threads")  # an execution choice, not a node input
        self.driver = (rag.engine.task_driver("index", engine.ray_executor()) if fanout == "ray"
                       and not self.chat_model.offline else rag.engine.driver("index"))

    def close(self) -> None:
        self.cancel.close()
        if hasattr(self.chat_model, "close"):
            self.chat_model.close()

    def execute(self, final_vars: list[str], overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            return engine.execute(self.driver, final_vars, self.inputs, self.state, overrides)
        except KeyboardInterrupt:
            self.cancel.cancel()  # stop the LLM calls in flight before the interpreter exits (as a search does)
            raise

    def write(self, corpus: Corpus | None, stored: IndexedState | None) -> dict[str, Any]:
        """Run the flow (from `corpus` when given, else from the paths) and write its result: the
        whole namespace, or, for an update of a namespace indexed with the same settings, only
        the rows that differ; nothing when the documents are those the namespace holds."""
        rag, namespace = self.rag, self.namespace
        update: dict[str, Any] | None = None
        if corpus is not None and stored is not None:
            before = {d.id for d in stored.documents}
            now = {d.id for d in corpus.documents}
            update = {"documents": {"kept": len(before & now), "added": len(now - before),
                                    "removed": len(before - now)}}
            same = _settled(stored.settings) == self.settings
            if same and before == now and _titles(stored.documents) == _titles(corpus.documents):
                return self._report(rag.store.stats(namespace), corpus.warnings, None,
                                    {**update, "rewritten": False, "rows": dict(_NO_ROWS),
                                     "vectors": {"reused": 0, "embedded": 0}})
            self.inputs["prior_graph"] = rag.store.stored_graph(namespace)
            if stored_tokens(self.inputs["token_counter"]):  # the counts stored are this tokenizer's
                self.inputs["token_counter"] = KnownCounts(self.inputs["token_counter"],
                                                           rag.store.known_line_tokens(namespace))
            if stored.embed_model == rag.embedder.model:
                known: dict[str, Any] = {}
                for vectors in rag.store.known_vectors(namespace, rag.embedder.model).values():
                    known.update(vectors)
                self.inputs["embedder"] = ReusingEmbedder(rag.embedder, known)
        values = self.execute([index.PREPARE_FINAL, "extractions"], {"corpus": corpus} if corpus is not None else None)
        write_set = values[index.PREPARE_FINAL]
        # A unit the LLM could not read is asked again by the next update, even of the same documents.
        settings = {**self.settings, "unfinished": True} if values["extractions"].warnings else self.settings
        if update is not None and stored is not None and _equal_settings(stored.settings, self.settings):
            changes = rag.store.update_index(namespace, write_set, settings=settings, progress=self.progress)
            counts = write_set.records.counts()
            update["rewritten"] = False
            update["rows"] = {k: sum(c[k] for c in changes.values()) for k in ("deleted", "written")}
            update["tables"] = changes
        else:
            counts = rag.store.write_index(namespace, write_set, replace=True, source="index",
                                           progress=self.progress, settings=settings)
            if update is not None:
                update["rewritten"] = True
        if update is not None:
            reuser = self.inputs["embedder"]
            update["vectors"] = ({"reused": reuser.reused, "embedded": reuser.embedded}
                                 if isinstance(reuser, ReusingEmbedder) else None)
        return self._report(counts, list(write_set.records.warnings), values["extractions"].cache_hits, update)

    def _report(self, counts: dict[str, int], warnings: list[str], cache_hits: int | None,
                update: dict[str, Any] | None) -> dict[str, Any]:
        timings: dict[str, float] = {}
        for t in self.state.trace:
            timings[t.node] = round(timings.get(t.node, 0.0) + t.ms, 3)
        seconds = time.perf_counter() - self.started
        if self.progress:
            rows = (update or {}).get("rows")
            self.progress(f"{self.namespace!r} is up to date ({counts['documents']} documents)" if rows == _NO_ROWS
                          else f"indexed {counts['documents']} documents into {self.namespace!r} in {seconds:.1f} s")
        usage = self.chat_model.usage
        out = {**counts, "warnings": warnings, "offline": self.chat_model.offline,
               "llm": {"calls": usage.calls, "prompt_tokens": usage.prompt_tokens,
                       "completion_tokens": usage.completion_tokens, "by_stage": usage.by_stage},
               "extraction_cache_hits": cache_hits or 0, "timings_ms": timings, "seconds": round(seconds, 3)}
        if update is not None:
            out["update"] = update
        return out


def _settled(settings: dict[str, Any] | None) -> dict[str, Any] | None:
    """The stored settings when the run that wrote them finished its work, else None (unequal to
    any run's settings, so the next update runs the flow)."""
    return None if settings is None or settings.get("unfinished") else settings


def _equal_settings(stored: dict[str, Any] | None, settings: dict[str, Any]) -> bool:
    """Whether rows written with `stored` settings compare with rows made with `settings`."""
    return stored is not None and {k: v for k, v in stored.items() if k != "unfinished"} == settings


def _titles(documents: list[Document]) -> dict[str, tuple[str, bool]]:
    return {d.id: (d.title, d.record_title) for d in documents}
