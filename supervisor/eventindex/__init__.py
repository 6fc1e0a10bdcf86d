"""The event layer: a searchable index of what happened, with time decay (issue 16, section 3).

The third memory layer of the seeds: constraints are injected every turn,
facts are kept by module, and *events* — what the agents did and said (the
heads and tails of their turns in the clean transcripts; for Codex and Claude
Code, their own records), every decision of every epoch, engram notes, facts,
the cycles' "where you stopped" — are searched by words and ranked by
relevance and recency.  The index is a cache over those files (:mod:`.index`), kept up to
date by a background thread in the daemon (:mod:`.indexer`), rebuilt by
``agentd recall --reindex``.

:mod:`.turns` (turns, grams, times: pure), :mod:`.shaping` (what of a turn
is indexed: pure), :mod:`.sources` (which files, and the events of the memory
files), :mod:`.transcripts` (a growing transcript, a bounded step at a time),
:mod:`.trails` (an agent's own record, a step at a time), :mod:`.index`
(SQLite FTS5: update, search),
:mod:`.search` (a query's candidates and their score),
:mod:`.indexer` (the thread).
"""

from .index import DEFAULT_HALF_LIFE_DAYS, EventIndex, IndexUnavailable, UpdateResult, default_db
from .search import EventHit
from .sources import EventKind, Reading, UnitReadings

__all__ = ["DEFAULT_HALF_LIFE_DAYS", "EventHit", "EventIndex", "EventKind", "IndexUnavailable", "Reading", "UnitReadings",
           "UpdateResult", "default_db"]
