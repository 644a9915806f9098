"""Lake tables kept from an archive: a Delta Lake copy of every table, current after each
run, exactly once (:func:`mirror`), in the Delta types of :mod:`.deltatypes`, read back
whole by :func:`read_copy`. Needs ``deltalake`` (the ``delta`` extra)."""

from __future__ import annotations

from .deltatypes import delta_type, to_delta
from .reading import read_copy
from .mirror import (APP_ID, MirrorRun, MirrorWarning, apply_batch, held_lsn, mirror, mirror_version_at,
                     mirror_table, refuse_inside, table_path, target_locked, widens)

__all__ = ["mirror", "mirror_version_at", "table_path", "held_lsn", "apply_batch", "widens", "MirrorRun", "APP_ID",
           "MirrorWarning", "target_locked", "mirror_table", "refuse_inside", "delta_type", "to_delta", "read_copy"]
