"""An append-only, in-memory column buffer with a fixed Arrow schema, written atomically to Parquet.

Why: appending to Python lists costs well under a microsecond per value, so the step loop can
record every step; conversion to Arrow happens only on ``write``. ``write`` snapshots the lists, so
it may run while other threads keep appending, and it may be called repeatedly: each call rewrites
the whole file (tmp file + rename, so readers never see a half-written file).
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


class TableBuffer:
    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.columns: dict[str, list] = {name: [] for name in schema.names}
        self._names = schema.names

    def append(self, *values) -> None:
        """Append one row, values in schema order."""
        for name, value in zip(self._names, values, strict=True):
            self.columns[name].append(value)

    def __len__(self) -> int:
        return len(self.columns[self._names[0]])

    def to_table(self) -> pa.Table:
        n = len(self)  # snapshot length first: concurrent appends beyond it are left for next time
        return pa.table(
            {
                name: pa.array(self.columns[name][:n], type=self.schema.field(name).type)
                for name in self._names
            },
            schema=self.schema,
        )

    def write(self, path: str | Path) -> Path:
        return write_table_atomic(self.to_table(), path)


def write_table_atomic(table: pa.Table, path: str | Path) -> Path:
    """Write ``table`` to ``path`` via a temp file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return path
