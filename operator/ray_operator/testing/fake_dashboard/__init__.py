"""A fake Ray Dashboard that is a real HTTP server on 127.0.0.1.

It serves the Serve multi-application API and the Jobs API with states the test controls,
rejects malformed bodies with 400 like Ray, can answer with errors or slowly, and journals every
request it answers so a test can assert which calls were made, when, and with what.

``server`` is the HTTP side (lifecycle, faults, journal, dispatch); ``serve_api`` and
``jobs_api`` are the two APIs; ``api`` is what they share.
"""

from .jobs_api import JOB_STATUSES, JOB_TERMINAL, JOBS_PATH
from .serve_api import APP_STATUSES, DEPLOYMENT_STATUSES, SERVE_PATH, ServePolicy
from .server import FakeRayDashboard, JournalEntry

__all__ = [
    "APP_STATUSES",
    "DEPLOYMENT_STATUSES",
    "JOBS_PATH",
    "JOB_STATUSES",
    "JOB_TERMINAL",
    "SERVE_PATH",
    "FakeRayDashboard",
    "JournalEntry",
    "ServePolicy",
]
