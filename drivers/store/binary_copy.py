"""PostgreSQL's binary COPY format read into NumPy columns (drivers/store/scoped.py `columns`)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from graphrag_dag.dataflows.common.resources import vector_dim

_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"


def binary_columns(data: bytes, types: Sequence[str]) -> list[np.ndarray]:
    """Columns of PostgreSQL's binary COPY format holding fixed-width, non-NULL values: after the
    signature, 32-bit flags and a 32-bit extension length (and the extension), each row is a
    16-bit field count, then per field a 32-bit length and the big-endian value; a 16-bit -1
    ends it. With every width fixed, the rows are one NumPy record array. A kind "vector(D)" is
    pgvector's binary vector of D dimensions (a 16-bit dimension count, 16 reserved bits, then D
    float4s), read as a row of a float32 matrix."""
    if data[:11] != _COPY_SIGNATURE:
        raise ValueError("not a binary COPY")
    body = data[19 + int.from_bytes(data[15:19], "big"):-2]
    fields: list[tuple] = [("fields", ">i2")]
    widths = []
    for k, kind in enumerate(types):
        dim = vector_dim(kind)
        if dim is None:
            fields += [(f"width{k}", ">i4"), (f"value{k}", kind if kind == "?" else ">" + kind)]
            widths.append(np.dtype(kind).itemsize)
        else:
            fields += [(f"width{k}", ">i4"), (f"dim{k}", ">i2"), (f"unused{k}", ">i2"), (f"value{k}", ">f4", (dim,))]
            widths.append(4 + 4 * dim)
    layout = np.dtype(fields)
    if len(body) % layout.itemsize:
        raise ValueError(f"a binary COPY whose rows are not {', '.join(types)}: a NULL, or another type")
    rows = np.frombuffer(body, dtype=layout)
    for k, kind in enumerate(types):
        if rows.size and not (rows[f"width{k}"] == widths[k]).all():
            raise ValueError(f"column {k} of a binary COPY is NULL or not {kind}")
    return [rows[f"value{k}"].astype("f4" if vector_dim(kind) is not None else kind) for k, kind in enumerate(types)]

