"""What the job routes receive: uploaded files saved under a fresh folder with their bare names,
a zip extracted without letting any member escape that folder, and server-side paths accepted
only under the configured import root."""

from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

from graphrag_dag.dataflows.common.errors import BadInput

CHUNK = 1 << 20


def _safe_name(name: str) -> str:
    base = PurePosixPath((name or "").replace("\\", "/")).name
    if not base or base in (".", "..") or base.startswith("."):
        raise BadInput(f"unusable upload file name {name!r}")
    return base


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


def _extract(archive: Path, folder: Path) -> Path:
    try:
        with zipfile.ZipFile(archive) as zf:
            for member in zf.infolist():
                target = (folder / member.filename).resolve()
                if not target.is_relative_to(folder.resolve()):
                    raise BadInput(f"zip member {member.filename!r} would land outside the upload folder")
            zf.extractall(folder)
    except zipfile.BadZipFile:
        raise BadInput("the upload is not a zip file") from None
    archive.unlink()
    # a zip of the output folder itself holds one folder: import what is inside it
    entries = [p for p in folder.iterdir() if not p.name.startswith((".", "__MACOSX"))]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else folder


def _server_path(path: str, root: Path | None) -> Path:
    if root is None:
        raise BadInput("this server accepts no server-side import paths (start it with --import-root DIR); upload a zip")
    target = (root / path).resolve() if not Path(path).is_absolute() else Path(path).resolve()
    if not target.is_relative_to(root.resolve()):
        raise BadInput(f"import path {path!r} is outside the server's import root")
    if not target.is_dir():
        raise BadInput(f"import path {path!r} is not a folder")
    return target


async def import_source(request: Any, root: Path | None) -> tuple[Path, Path | None, str, bool]:
    """(folder to import, folder to remove afterwards or None, embeddings mode, replace)."""
    kind = request.headers.get("content-type", "")
    if kind.startswith("multipart/form-data"):
        form = await request.form()
        upload = form.get("file")
        if upload is None or not hasattr(upload, "read"):
            raise BadInput("a multipart import needs a zip in the field 'file'")
        folder = Path(tempfile.mkdtemp(prefix="graphrag-import-"))
        try:
            archive = folder / "upload.zip"
            with archive.open("wb") as out:
                while chunk := await upload.read(CHUNK):
                    out.write(chunk)
            source = _extract(archive, folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return source, folder, str(form.get("embeddings") or "auto"), str(form.get("replace", "")).lower() in ("1", "true", "yes")
    try:
        body = json.loads(await request.body() or b"null")
    except ValueError:
        raise BadInput("the import request is not JSON (or a multipart upload)") from None
    if not isinstance(body, dict) or not isinstance(body.get("path"), str):
        raise BadInput('the import request needs {"path": "..."} (or a multipart zip upload)')
    unknown = set(body) - {"path", "embeddings", "replace"}
    if unknown:
        raise BadInput(f"unknown import fields: {', '.join(sorted(unknown))}")
    return _server_path(body["path"], root), None, str(body.get("embeddings", "auto")), bool(body.get("replace", False))
