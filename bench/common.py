"""What every benchmark shares: where results go, how a series is summarised, how it is saved."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def spread(values: list[float], digits: int = 4) -> dict[str, float]:
    """Median, min, max and count of a series of measurements."""
    return {"n": len(values), "median": round(statistics.median(values), digits),
            "min": round(min(values), digits), "max": round(max(values), digits)}


def save_json(path: Path, data: Any) -> Path:
    """Write ``data`` as indented JSON (making the directory) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def read(review: dict[str, Any], what: str) -> dict[str, Any]:
    """The review, if it read this finding: its ``read`` patterns (what its reader saw in
    the reports: ``extra: pods <resource>-worker-small-group-\\*``) match the finding's
    text; else none (a point keeps its label while what it finds changes: a rerun of the
    operations bench found worker Pods of a removed group where its review had read a head
    Service's annotations, and counted it read)."""
    patterns = review.get("read") or []
    if any(re.search(pattern, what) for pattern in patterns):
        return review
    return {"verdict": "unreviewed: the finding is not what its review read"
            if review else "unreviewed", "why": review.get("why", "")}
