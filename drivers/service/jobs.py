"""Background jobs of the service: imports of Microsoft GraphRAG output and indexing of uploaded
documents. A job runs on a thread of the process that accepted it, with a CancelToken; its row
in `service_jobs` holds its status and last progress lines, so any worker process can report on
it, and a cancel asked of any worker reaches it (the running process watches the row). Writes are
one transaction, so a cancelled or failed job leaves the namespace as it was.

A process can die with its jobs running (kill -9, a crash, a lost machine). The running process
writes each job's heartbeat as it watches the row; a job whose heartbeat is older than
LEASE_SECONDS is marked failed by whichever process looks next: any server as it starts, and any
read of the job."""

from __future__ import annotations

import json
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from psycopg.types.json import Jsonb

from graphrag_dag.drivers.runtime.cancel import CancelToken
from graphrag_dag.drivers.service.runner import status_of

KEEP_LINES = 50
WATCH_SECONDS = 0.25  # how often a running job looks for a cancel asked elsewhere (and beats)
LEASE_SECONDS = 30.0  # a running job whose heartbeat is older belongs to a dead process

INSERT = "INSERT INTO service_jobs (id, kind, namespace, owner, status) VALUES (%s, %s, %s, %s, 'running')"
PROGRESS = "UPDATE service_jobs SET progress = %s, heartbeat_at = now() WHERE id = %s RETURNING cancel_requested"
FINISH = "UPDATE service_jobs SET status = %s, result = %s, error = %s, progress = %s, finished_at = now() WHERE id = %s"
SELECT = """SELECT id, kind, namespace, owner, status, progress, result, error, created_at, finished_at
            FROM service_jobs WHERE id = %s"""
CANCEL = "UPDATE service_jobs SET cancel_requested = true WHERE id = %s AND status = 'running'"
# Jobs whose process died: marked failed when their lease has run out (one job, or every job).
EXPIRE = """UPDATE service_jobs SET status = 'failed', error = %(error)s, finished_at = now()
            WHERE status = 'running' AND heartbeat_at < now() - make_interval(secs => %(lease)s)
              AND (%(id)s::text IS NULL OR id = %(id)s)"""
DIED = "the process running the job stopped (no heartbeat)"
# Jobs a stopped process left running can never finish: they are marked when that process stops.
ABANDON = "UPDATE service_jobs SET status = 'failed', error = %s, finished_at = now() WHERE id = ANY(%s) AND status = 'running'"


def _row_json(row: tuple) -> dict[str, Any]:
    jid, kind, ns, owner, status, progress, result, error, created, finished = row
    return {"id": jid, "kind": kind, "namespace": ns, "status": status, "progress": progress, "result": result,
            "error": error, "created": created.isoformat(), "finished": finished.isoformat() if finished else None,
            "owner": owner}


class Jobs:
    def __init__(self, store: Any, *, lease: float = LEASE_SECONDS) -> None:
        self.store, self.lease = store, lease
        self._local: dict[str, CancelToken] = {}  # the jobs this process runs
        self._lock = threading.Lock()
        self._expire(None)  # the jobs of processes that died before this one started

    def _execute(self, query: str, params: tuple | dict[str, Any]) -> list[tuple]:
        with self.store.pool.connection() as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else []

    def _expire(self, job_id: str | None) -> None:
        self._execute(EXPIRE, {"error": DIED, "lease": self.lease, "id": job_id})

    def get(self, job_id: str) -> dict[str, Any] | None:
        self._expire(job_id)
        rows = self.store.admin_rows(SELECT, (job_id,))
        return _row_json(rows[0]) if rows else None

    def start(self, kind: str, namespace: str, owner: str, work: Callable[[Callable[[str], None], CancelToken], Any],
              cleanup: Path | None = None) -> dict[str, Any]:
        """Run `work(progress, cancel)` on a thread; `cleanup` (an upload folder) is removed after."""
        job_id, cancel, lines = uuid.uuid4().hex[:12], CancelToken(), []
        self._execute(INSERT, (job_id, kind, namespace, owner))
        with self._lock:
            self._local[job_id] = cancel

        def flush() -> None:
            rows = self._execute(PROGRESS, (Jsonb(lines[-KEEP_LINES:]), job_id))
            if rows and rows[0][0]:
                cancel.cancel()

        def progress(line: str) -> None:
            cancel.check()  # every progress step is a point where a cancelled job stops
            lines.append(line)
            del lines[:-KEEP_LINES]

        def watch() -> None:
            while not cancel.wait(WATCH_SECONDS):
                try:
                    flush()
                except Exception:  # noqa: BLE001 - a failed flush is retried on the next turn
                    continue

        def run() -> None:
            result, error, status = None, None, "completed"
            watcher = threading.Thread(target=watch, name=f"graphrag-job-watch-{job_id}", daemon=True)
            watcher.start()
            try:
                result = work(progress, cancel)
            except Exception as exc:  # noqa: BLE001 - a job reports its failure, it does not raise
                status = "cancelled" if cancel.cancelled else "failed"
                error = status_of(exc)[1]
            finally:
                cancel.cancel()  # ends the watcher
                watcher.join()
                self._execute(FINISH, (status, None if result is None else Jsonb(json.loads(json.dumps(result, default=str))),
                                       error, Jsonb(lines[-KEEP_LINES:]), job_id))
                with self._lock:
                    self._local.pop(job_id, None)
                cancel.close()
                if cleanup is not None:
                    shutil.rmtree(cleanup, ignore_errors=True)

        threading.Thread(target=run, name=f"graphrag-job-{job_id}", daemon=True).start()
        return self.get(job_id) or {}

    def cancel(self, job_id: str) -> dict[str, Any] | None:
        self._execute(CANCEL, (job_id,))
        with self._lock:
            local = self._local.get(job_id)
        if local is not None:
            local.cancel()
        return self.get(job_id)

    def close(self, wait: float = 5.0) -> None:
        """Cancel this process's jobs; those that have not ended within `wait` are marked failed."""
        with self._lock:
            running = dict(self._local)
        for token in running.values():
            token.cancel()
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with self._lock:
                if not self._local:
                    return
            time.sleep(0.05)
        with self._lock:
            left = list(self._local)
        if left:
            self._execute(ABANDON, ("the server stopped while the job ran", left))
