"""Semi-naive Bayes learned online: SPODE, AODE, TAN and KDB over one sparse pair store.

See ``docs/seminaive.md`` for formulas, design choices and measured figures.
"""

from __future__ import annotations

from stream_nb.seminaive.aode import AODE
from stream_nb.seminaive.discretise import Discretiser
from stream_nb.seminaive.kdb import KDB
from stream_nb.seminaive.spode import SPODE
from stream_nb.seminaive.tan import TAN

__all__ = ["AODE", "KDB", "SPODE", "TAN", "Discretiser"]
