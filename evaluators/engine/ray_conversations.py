"""The Ray engine's conversations: the turns of each conversation met whole in one task and scored there.

A trace that may be a turn of a conversation is held by the router that read it
(`SpecRouter.route`), and the case a conversation answers is known only once all its traces are
in (`SpecRouter.finish`: a turn's case id, else the first turn's input). A spec with multi-turn
cases therefore takes one more stage between the groups and the entries stage (`ray_entries.py`):

1. Each group hands its held traces on as rows of their own (`ray_entries.sample_rows`: kind
   `TURNS`, one per conversation key, its traces pickled), partitioned by a stable hash of the
   conversation's key (its conversation id, else the trace's own id), so that the turns a
   conversation has in every group meet in one partition.
2. Ray's shuffle groups the rows by partition. The task (`score_conversations`) joins each
   conversation's traces and scores them as the local engine does (`score_held`, under the scorer
   time limit, judges asked of the run's pool), then hands their samples on as a group does
   (`sample_rows`: keyed by their case's partition, the cases' tallies, and a hand-over with the
   unmatched traces, the scorer counts and the run statistics). The other rows pass through.
3. The entries stage decides every case from its rows, conversations included: the driver
   receives tallies and outcomes, as for a spec without conversations.
"""

from __future__ import annotations

import asyncio

import pyarrow as pa
import pyarrow.compute as pc

from evaltrace.evaluators.engine._loop import score_held
from evaltrace.evaluators.engine.ray_data import ListSpill, RunParts, ShardResult
from evaltrace.evaluators.engine.ray_entries import BLOB, CASE, KIND, PART, TURNS, sample_rows
from evaltrace.evaluators.engine.ray_judges import pool_judges
from evaltrace.evaluators.engine.time_limit import scorer_time_limit


def score_conversations(rows: pa.Table, parts_blob: bytes) -> pa.Table:
    """The middle stage: one partition's conversations scored, their samples keyed by case; other rows passed on."""
    import ray

    turns = pc.equal(rows.column(KIND), TURNS)
    held = rows.filter(turns)
    if not held.num_rows:
        return rows
    parts: RunParts = ray.cloudpickle.loads(parts_blob)
    router, stats, spill = parts.router, parts.stats, ListSpill()
    keys, blobs = held.column(CASE).to_pylist(), held.column(BLOB)
    # In key order: the partition's conversations are scored in one order whatever the shuffle's
    # (each one's traces are put in start-time order by `finish`).
    for index in sorted(range(held.num_rows), key=keys.__getitem__):
        router.state.conversations.setdefault(keys[index], []).extend(ray.cloudpickle.loads(blobs[index].as_py()))
    with scorer_time_limit(parts.options.scorer_timeout), pool_judges(router):
        asyncio.run(score_held(router, stats, spill))
    part: int = held.column(PART)[0].as_py()
    # Its hand-over sorts after every group's (keys below `parts.count`), as the driver's
    # conversations came after the groups' traces.
    scored = sample_rows(parts.count + part, ShardResult(spill.rows, router.state, stats), parts)
    return pa.concat_tables([rows.filter(pc.invert(turns)), scored])
