"""RayService controller: clusters named in status, Serve through the Dashboard, promotion.

``controller`` orders a reconcile; ``clusters``, ``serve`` (with the seed's head-Pod gate) and
``services`` are its steps; ``status`` is the one home of RayService status (vocabulary, edits,
the writer).
"""

from .controller import RayServiceController
from .serve import GateReason, GateSkip

__all__ = ["GateReason", "GateSkip", "RayServiceController"]
