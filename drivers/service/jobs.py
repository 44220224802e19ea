"""Background jobs of the service: imports of Microsoft GraphRAG output and indexing of uploaded
documents. A job runs on its own thread with a CancelToken; its progress lines are kept, and
cancelling it stops the work at its next step. Writes are one transaction, so a cancelled or
failed job leaves the namespace as it was."""

from __future__ import annotations

import shutil
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from graphrag_dag.drivers.cancel import CancelToken
from graphrag_dag.drivers.service.runner import status_of

KEEP_LINES = 50


@dataclass
class Job:
    id: str
    kind: str  # "import" or "documents"
    namespace: str
    owner: str  # the key id that started it: only its namespaces may see it
    status: str = "queued"  # queued, running, completed, failed, cancelled
    progress: list[str] = field(default_factory=list)
    result: dict[str, Any] | None = None
    error: str | None = None
    created: float = field(default_factory=time.time)
    finished: float | None = None
    cancel: CancelToken = field(default_factory=CancelToken, repr=False)

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "namespace": self.namespace, "status": self.status,
                "progress": self.progress[-KEEP_LINES:], "result": self.result, "error": self.error,
                "created": self.created, "finished": self.finished}


class Jobs:
    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def start(self, kind: str, namespace: str, owner: str, work: Callable[[Callable[[str], None], CancelToken], Any],
              cleanup: Path | None = None) -> Job:
        """Run `work(progress, cancel)` on a thread; `cleanup` (an upload folder) is removed after."""
        job = Job(uuid.uuid4().hex[:12], kind, namespace, owner)
        with self._lock:
            self._jobs[job.id] = job

        def progress(line: str) -> None:
            job.cancel.check()  # every progress step is a point where a cancelled job stops
            job.progress.append(line)
            del job.progress[:-KEEP_LINES]

        def run() -> None:
            job.status = "running"
            try:
                job.result = work(progress, job.cancel)
                job.status = "completed"
            except Exception as exc:  # noqa: BLE001 - a job reports its failure, it does not raise
                job.status = "cancelled" if job.cancel.cancelled else "failed"
                job.error = status_of(exc)[1]
            finally:
                job.finished = time.time()
                job.cancel.close()
                if cleanup is not None:
                    shutil.rmtree(cleanup, ignore_errors=True)

        threading.Thread(target=run, name=f"graphrag-job-{job.id}", daemon=True).start()
        return job

    def cancel(self, job_id: str) -> Job | None:
        job = self.get(job_id)
        if job is not None and job.status in ("queued", "running"):
            job.cancel.cancel()
        return job

    def close(self) -> None:
        with self._lock:
            for job in self._jobs.values():
                job.cancel.cancel()
