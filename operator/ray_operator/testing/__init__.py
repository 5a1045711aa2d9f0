"""Ray-specific test doubles: a fake Ray Dashboard (a real HTTP server) and a fleet of them.

They use the Kubernetes client where they must (to watch head Pods) and nothing of any test
framework, so any test harness can use them.
"""

from .fake_dashboard import JOBS_PATH, SERVE_PATH, FakeRayDashboard, JournalEntry, ServePolicy
from .fleet import FakeDashboardFleet, HeadReadyWatcher
from .mapfile import MAP_ENV, FileResolver, file_resolver, write_dashboard_map

__all__ = [
    "JOBS_PATH",
    "MAP_ENV",
    "SERVE_PATH",
    "FakeDashboardFleet",
    "FakeRayDashboard",
    "FileResolver",
    "HeadReadyWatcher",
    "JournalEntry",
    "ServePolicy",
    "file_resolver",
    "write_dashboard_map",
]
