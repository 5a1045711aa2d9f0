"""What every benchmark shares: where results go, how a series is summarised, how it is saved."""

from __future__ import annotations

import json
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
