"""What the job routes receive: uploaded files saved under a fresh folder with their bare names,
a zip extracted within limits and without letting any member escape that folder, and
server-side paths accepted only under the configured import root.

A zip is checked before anything is extracted, from its central directory: member count, total
uncompressed size and the ratio of that size to the archive's. A directory can lie about sizes,
so extraction also counts the bytes it writes and stops at the first one past a member's declared
size or the total limit. Extraction runs on a worker thread: a large archive never stalls the event
loop that answers other requests."""

from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import anyio

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.drivers.service.guard import HttpError

CHUNK = 1 << 20
MAX_NAME_BYTES = 255  # a file name longer than this cannot be created on common file systems
TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


@dataclass(frozen=True)
class ZipLimits:
    """Limits on an uploaded zip; past any of them the upload is refused with 413."""

    max_bytes: int = 2_000_000_000  # total uncompressed size
    max_members: int = 10_000
    max_ratio: float = 200.0  # uncompressed size / archive size (parquet and text compress far less)


def _safe_name(name: str) -> str:
    base = PurePosixPath((name or "").replace("\\", "/")).name
    if not base or base in (".", "..") or base.startswith(".") or "\x00" in base:
        raise BadInput(f"unusable upload file name {name!r}")
    if len(base.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise BadInput(f"upload file name {base[:40]!r}… is over {MAX_NAME_BYTES} bytes")
    return base


def form_flag(value: Any, name: str) -> bool:
    """A boolean form field or JSON value: a JSON boolean, or one of the usual words. Anything else
    is refused rather than read as true (a "no" once meant replace)."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise BadInput(f"{name} must be true or false, not {value!r}")


def embeddings_mode(value: Any) -> str:
    from graphrag_dag.drivers.ingest.importer import EMBEDDING_MODES

    mode = "auto" if value is None or value == "" else value
    if mode not in EMBEDDING_MODES:
        raise BadInput(f"embeddings must be {', '.join(EMBEDDING_MODES)}, not {value!r}")
    return mode


async def save_files(files: list[Any], folder: Path) -> list[Path]:
    saved: list[Path] = []
    for f in files:
        target = folder / _safe_name(f.filename)
        if target.exists():
            raise BadInput(f"two uploads are named {target.name!r}")
        with target.open("wb") as out:
            while chunk := await f.read(CHUNK):
                out.write(chunk)
        saved.append(target)
    if not saved:
        raise BadInput("no files were uploaded")
    return saved


def _too_large(detail: str) -> HttpError:
    return HttpError(413, detail)


def _check(zf: zipfile.ZipFile, archive_bytes: int, folder: Path, limits: ZipLimits) -> None:
    members = zf.infolist()
    if len(members) > limits.max_members:
        raise _too_large(f"the zip has {len(members):,} members; the limit is {limits.max_members:,}")
    total = sum(m.file_size for m in members)
    if total > limits.max_bytes:
        raise _too_large(f"the zip holds {total:,} bytes uncompressed; the limit is {limits.max_bytes:,}")
    if total > limits.max_ratio * max(archive_bytes, 1):
        ratio = total / max(archive_bytes, 1)
        raise _too_large(f"the zip expands {ratio:,.0f} times; the limit is {limits.max_ratio:g}")
    root = folder.resolve()
    for member in members:
        if "\x00" in member.filename or not (folder / member.filename).resolve().is_relative_to(root):
            raise BadInput(f"zip member {member.filename!r} would land outside the upload folder")


def _extract(archive: Path, folder: Path, limits: ZipLimits) -> Path:
    try:
        with zipfile.ZipFile(archive) as zf:
            _check(zf, archive.stat().st_size, folder, limits)
            written = 0
            for member in zf.infolist():
                target = folder / member.filename
                if member.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(member) as src, target.open("wb") as out:
                    size = 0
                    while chunk := src.read(CHUNK):
                        size += len(chunk)
                        written += len(chunk)
                        if size > member.file_size or written > limits.max_bytes:
                            raise _too_large("the zip expands past the sizes it declares")
                        out.write(chunk)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError):
        raise BadInput("the upload is not a zip file that can be read") from None
    archive.unlink()
    # a zip of the output folder itself holds one folder: import what is inside it
    entries = [p for p in folder.iterdir() if not p.name.startswith((".", "__MACOSX"))]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else folder


def _server_path(path: str, root: Path | None) -> Path:
    if root is None:
        raise BadInput("this server accepts no server-side import paths (start it with --import-root DIR); upload a zip")
    if "\x00" in path:
        raise BadInput("an import path cannot contain a NUL character")
    target = (root / path).resolve() if not Path(path).is_absolute() else Path(path).resolve()
    if not target.is_relative_to(root.resolve()):
        raise BadInput(f"import path {path!r} is outside the server's import root")
    if not target.is_dir():
        raise BadInput(f"import path {path!r} is not a folder")
    return target


@dataclass(frozen=True)
class ImportSource:
    """What an import request asks for: the folder to import, the folder to remove when the job
    ends (an upload's; None for a server-side path), the embeddings mode and whether to replace."""

    folder: Path
    cleanup: Path | None
    embeddings: str
    replace: bool


async def import_source(request: Any, root: Path | None, limits: ZipLimits) -> ImportSource:
    """The request's import source. Every field is checked before anything is written; an upload
    that is refused leaves no folder behind."""
    kind = request.headers.get("content-type", "")
    if kind.startswith("multipart/form-data"):
        form = await request.form()
        upload = form.get("file")
        if upload is None or not hasattr(upload, "read"):
            raise BadInput("a multipart import needs a zip in the field 'file'")
        embeddings, replace = embeddings_mode(form.get("embeddings")), form_flag(form.get("replace"), "replace")
        folder = Path(tempfile.mkdtemp(prefix="graphrag-import-"))
        try:
            archive = folder / "upload.zip"
            with archive.open("wb") as out:
                while chunk := await upload.read(CHUNK):
                    out.write(chunk)
            source = await anyio.to_thread.run_sync(_extract, archive, folder, limits)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return ImportSource(source, folder, embeddings, replace)
    try:
        body = json.loads(await request.body() or b"null")
    except (ValueError, RecursionError):
        raise BadInput("the import request is not JSON (or a multipart upload)") from None
    if not isinstance(body, dict) or not isinstance(body.get("path"), str):
        raise BadInput('the import request needs {"path": "..."} (or a multipart zip upload)')
    unknown = set(body) - {"path", "embeddings", "replace"}
    if unknown:
        raise BadInput(f"unknown import fields: {', '.join(sorted(unknown))}")
    if not isinstance(body.get("replace", False), bool):
        raise BadInput(f"replace must be true or false (a JSON boolean), not {body['replace']!r}")
    embeddings = embeddings_mode(body.get("embeddings"))
    return ImportSource(_server_path(body["path"], root), None, embeddings, body.get("replace", False))
