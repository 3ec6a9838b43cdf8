"""Records written under an older point id (before a RunPoint field existed, before every stated option was part of
ids, before repeats): found by reading (``older_records``) and renamed to the id their point has now
(``adopt_older_records``, a sweep's explicit tidy step: sweep.tidy_set). Regenerating every committed record's id once
retires this module with point.py's former-id rules."""
from __future__ import annotations

from pathlib import Path

from reproduce.harness.record_store import ids_from_name, read_record, write_record
from reproduce.harness.records import former_point_ids, point_id


def older_records(out_dir: str | Path, wanted: set[str] | None) -> dict[Path, Path]:
    """Records in ``out_dir`` written under an older point id (before a RunPoint field existed, so their id hashed
    fewer fields; before every stated option was part of ids) or before repeats (``<id>.json``, repeat 0), by the
    path their point and repeat have now, when that is one of ``wanted`` ids (None: any record named by one of its
    point's former ids) and has no record yet. Reads only."""
    found: dict[Path, Path] = {}
    for f in sorted(Path(out_dir).glob("*.json")):
        stem, _ = ids_from_name(f)
        if f.stem != stem and wanted is not None and stem in wanted:
            continue  # already under its id
        try:
            rec = read_record(f)
            pid = point_id(rec.point)
            mine = pid in wanted if wanted is not None else stem != pid and stem in former_point_ids(rec.point)
        except (ValueError, KeyError, TypeError):
            continue  # not a record of a point this code can read: left alone
        target = f.with_name(f"{pid}.r{rec.repeat}.json")
        if mine and not target.exists() and target not in found:
            found[target] = f
    return found


def adopt_older_records(out_dir: str | Path, wanted: set[str] | None) -> int:
    """Move each of ``older_records`` to the name its point and repeat have now (id and repeat set in the record);
    returns how many."""
    moved = 0
    for target, f in older_records(out_dir, wanted).items():
        rec = read_record(f)
        rec.point_id = target.name.rsplit(".r", 1)[0]
        write_record(target, rec)
        f.unlink()
        moved += 1
    return moved
