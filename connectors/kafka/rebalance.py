"""A group member's partitions: rebalances, and snapshot offsets reconciled with commits.

:class:`Partitions` keeps what the group assigned to a :class:`KafkaSource` and where
it reads each partition: the next offset of every partition it handed out records
from (or restored from a snapshot), checked against the group's committed offset
before anything is fetched. :class:`RebalanceListener` is the kafka-python listener
that drives it. :func:`refuse_lost_model` compares the group's commits with the
absence of a snapshot at start.

Threads. kafka-python 3.x runs the listener on the client's IO thread, inside the main
thread's ``poll`` (which blocks until the rebalance is done), and keeps sending
heartbeats while it is suspended; blocking calls from the IO thread raise. So the
listener does only bookkeeping and local seeks itself, and awaits a helper thread
(:meth:`~stream_nb.connectors.kafka.client.ClientAdapter.await_in_thread`) for
anything blocking: the checkpoint and commit on revoke, the committed-offset check on
assignment. :class:`Partitions` guards its state with a lock for that reason.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import orjson
from kafka import AsyncConsumerRebalanceListener, TopicPartition
from kafka.errors import KafkaError

from stream_nb._exceptions import SourceError, StreamNBError
from stream_nb.connectors.kafka.url import log

if TYPE_CHECKING:
    from stream_nb.connectors.kafka.metrics import KafkaMetrics
    from stream_nb.connectors.kafka.source import KafkaSource
    from stream_nb.connectors.kafka.topics import TopicInfo

__all__ = ["Partitions", "RebalanceListener", "refuse_lost_model"]

#: A rebalance callback's kind, as counted in :attr:`Partitions.rebalances`.
EVENTS = ("assigned", "revoked", "lost")


class Partitions:
    """The partitions assigned to a group member, and where it reads each one.

    Without model sync a snapshot's offsets win: a partition assigned to this member
    is positioned at the offset its snapshot recorded, then compared with the
    group's commit (:meth:`check_committed`). With model sync (``transactional``) the
    group's committed offsets win: offsets are committed exactly when the model
    delta of their events is.

    Parameters
    ----------
    consumer
        Returns the consumer (created on first use).
    group_id
        The consumer group, for messages.
    call_ms
        Bound of a blocking consumer call (committed offsets).
    auto_offset_reset
        Where a partition without snapshot offset or commit starts (``earliest`` or
        ``latest``).

    Attributes
    ----------
    positions
        Next offset of every partition handed out (or restored from a snapshot).
    rebalances
        ``{"assigned": n, "revoked": n, "lost": n}`` rebalance callbacks seen.
    replayed
        Events re-read below the group's committed offset (snapshot older than commit).
    transactional
        Model sync: the group's committed offsets win over the snapshot's.
    metrics
        Where rebalances and replayed events are counted, if anywhere.
    """

    def __init__(
        self,
        consumer: Callable[[], Any],
        *,
        group_id: str,
        call_ms: int,
        auto_offset_reset: str,
    ) -> None:
        self._consumer = consumer
        self.group_id = group_id
        self.call_ms = call_ms
        self.auto_offset_reset = auto_offset_reset
        self._lock = threading.Lock()
        self.positions: dict[TopicPartition, int] = {}
        # partitions assigned by the group
        self._assigned: set[TopicPartition] = set()
        # partition -> snapshot offset it was positioned at, not yet compared with the commit
        self._unchecked: dict[TopicPartition, int] = {}
        self.rebalances: dict[str, int] = dict.fromkeys(EVENTS, 0)
        self.replayed = 0
        self.transactional = False
        self.metrics: KafkaMetrics | None = None
        # partitions left without a commit: lost, or (model sync) a failed revoke transaction
        self._needs_rollback = False

    def assigned(self) -> set[TopicPartition]:
        """Partitions currently assigned (a copy)."""
        with self._lock:
            return set(self._assigned)

    def unchecked(self) -> dict[TopicPartition, int]:
        """Partitions positioned at a snapshot offset not yet compared with the group's
        commit (a copy)."""
        with self._lock:
            return dict(self._unchecked)

    def committable(self) -> dict[TopicPartition, int]:
        """Next offsets of the assigned partitions that records were handed out from."""
        assigned = self.assigned()
        return {tp: o for tp, o in self.positions.items() if tp in assigned}

    # ------------------------------------------------------------ rebalance callbacks
    def assign(self, partitions: set[TopicPartition]) -> None:
        """Partitions were assigned: position each at its snapshot offset, if it has one,
        to be checked against the commit (a local seek: safe on the IO thread)."""
        with self._lock:
            self._assigned |= partitions
            self.rebalances["assigned"] += 1
            for tp in partitions:
                offset = None if self.transactional else self.positions.get(tp)
                if offset is not None:
                    self._unchecked[tp] = offset
                    self._consumer().seek(tp, offset)
        if self.metrics is not None:
            self.metrics.rebalance("assigned")

    def revoke(self, partitions: set[TopicPartition], event: str, *, settled: bool) -> None:
        """Partitions were revoked or lost (``event``); ``settled`` when everything
        handed out from them is committed.

        A settled partition's position is dropped: whoever owns it next (this worker
        included) starts from the commit, not from an older snapshot position. Lost
        partitions, and with model sync any unsettled ones, ask for a rollback
        (:meth:`take_rollback`).
        """
        with self._lock:
            self._assigned -= partitions
            for tp in partitions:
                self._unchecked.pop(tp, None)
                if settled:
                    self.positions.pop(tp, None)
            self.rebalances[event] += 1
            if partitions and not settled and (self.transactional or event == "lost"):
                self._needs_rollback = True
        if self.metrics is not None:
            self.metrics.rebalance(event)
            self.metrics.forget(partitions)  # their new owner publishes their lag

    def take_rollback(self) -> bool:
        """Whether partitions were left without a commit since the last call."""
        if not self._needs_rollback:
            return False
        with self._lock:
            self._needs_rollback = False
        return True

    # ------------------------------------------------------------ snapshot vs commit
    def check_committed(self, partitions: Mapping[TopicPartition, int], worker_id: str) -> None:
        """Compare snapshot offsets with the group's commits (blocking: never on the IO
        thread).

        Committed offset ahead of the snapshot's: if this worker (``worker_id``)
        committed it, its newest snapshot was lost and an older one restored — the
        snapshot wins (the model learned exactly up to it) and the re-read events are
        counted as replayed. If another worker committed it, that worker learned those
        events: continue from its commit.
        """
        if not partitions:
            return
        consumer = self._consumer()
        for tp, mine in partitions.items():
            try:
                committed = consumer.committed(tp, metadata=True, timeout_ms=self.call_ms)
            except KafkaError as exc:
                # Unchecked, the snapshot's offset could re-learn events another worker
                # learned: stop rather than risk it (a restart checks again).
                raise SourceError(
                    f"cannot read the committed offset of {tp.topic}[{tp.partition}] "
                    f"(consumer group {self.group_id!r}): {exc!r}; exiting so that a "
                    "supervisor restarts from the last snapshot"
                ) from exc
            finally:
                with self._lock:
                    if self._unchecked.get(tp, -1) == mine:
                        del self._unchecked[tp]
            if committed is None or committed.offset <= mine:
                continue
            if _committed_by(committed.metadata, worker_id):
                self.replayed += committed.offset - mine
                if self.metrics is not None:
                    self.metrics.replayed.inc(committed.offset - mine)
            else:
                with self._lock:
                    if tp in self._assigned:
                        consumer.seek(tp, committed.offset)
                    if self.positions.get(tp) == mine:
                        del self.positions[tp]

    def restore(self, offsets: dict[TopicPartition, int]) -> None:
        """Take a snapshot's offsets; assigned partitions are positioned there now, the
        others when they are assigned."""
        with self._lock:
            self.positions = offsets
            for tp in self._assigned:
                if tp in offsets:
                    self._consumer().seek(tp, offsets[tp])

    def reposition(self) -> None:
        """After the engine returned to its snapshot (:meth:`restore` ran): every
        assigned partition resumes from its snapshot offset, checked against the
        commit before the next poll, or from the committed offset without one."""
        for tp in self.assigned():
            mine = self.positions.get(tp)
            if mine is None:
                self.seek_committed(tp)
            else:
                with self._lock:
                    self._unchecked[tp] = mine  # restore() positioned it there

    def reset(self, *, reseek: bool) -> None:
        """Forget positions; with ``reseek``, go back to the committed offsets (main thread)."""
        self.positions = {}
        if not reseek:
            return
        for tp in self.assigned():
            self.seek_committed(tp)

    def seek_committed(self, tp: TopicPartition) -> None:
        """Position ``tp`` at the group's committed offset (or the reset policy's end)."""
        consumer = self._consumer()
        try:
            committed = consumer.committed(tp, timeout_ms=self.call_ms)
        except KafkaError as exc:
            raise SourceError(
                f"cannot read the committed offset of {tp.topic}[{tp.partition}]: {exc}"
            ) from exc
        if committed is None and self.auto_offset_reset == "latest":
            consumer.seek_to_end(tp)
        elif committed is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, committed)


def refuse_lost_model(
    consumer: Any,
    *,
    group_id: str,
    topics: list[str],
    topic_info: Mapping[str, TopicInfo],
    sync_topic: str | None,
    call_ms: int,
) -> None:
    """Refuse to start a daemon with checkpoints but no snapshot on a group with commits.

    The commits say that a model learned the events before them; starting an empty
    one there loses it without a word (an ephemeral checkpoint volume would reset the
    model on every restart). With model sync (``sync_topic``) the model is rebuilt
    from the sync topic instead, which is refused only once its retention deleted
    deltas.

    Raises
    ------
    SourceError
        Naming the commits (or the deleted deltas) and the two ways out.
    """
    if sync_topic is not None:
        info = topic_info.get(sync_topic)
        count = 1 if info is None or not info.partitions else info.partitions
        tps = [TopicPartition(sync_topic, p) for p in range(count)]
        starts = consumer.beginning_offsets(tps, timeout_ms=call_ms)
        deleted = {tp.partition: o for tp, o in starts.items() if o > 0}
        if deleted:
            raise SourceError(
                f"the checkpoint directory has no snapshot, and model-sync topic "
                f"{sync_topic!r} of consumer group {group_id!r} no longer holds its "
                f"first deltas (retention deleted offsets below {deleted}): the model "
                "cannot be rebuilt. Restore the checkpoint directory, or pass "
                "--reset-state to start a new model from the deltas that are left"
            )
        return
    found: dict[str, int] = {}
    for topic in topics:
        info = topic_info.get(topic)
        for partition in range(info.partitions if info and info.partitions else 0):
            tp = TopicPartition(topic, partition)
            try:
                committed = consumer.committed(tp, timeout_ms=call_ms)
            except KafkaError as exc:
                raise SourceError(
                    f"cannot read the committed offsets of consumer group "
                    f"{group_id!r} ({exc}); is the broker up?"
                ) from exc
            if committed is not None:
                found[f"{topic}[{partition}]"] = committed
    if found:
        shown = ", ".join(f"{k}@{v}" for k, v in sorted(found.items())[:5])
        raise SourceError(
            f"consumer group {group_id!r} has committed offsets ({shown}"
            f"{' …' if len(found) > 5 else ''}) but the checkpoint directory has no "
            "snapshot: the model that learned the events before them is lost (a new "
            "or emptied --checkpoint-dir?). Restore the checkpoint directory, or pass "
            "--reset-state to start a new, empty model at the committed offsets"
        )


def _committed_by(metadata: str | bytes | None, worker_id: str) -> bool:
    """Whether commit metadata (``{"snapshot", "worker"}``) names ``worker_id``.

    Examples
    --------
    >>> _committed_by('{"snapshot": "000000000007", "worker": "w1"}', "w1")
    True
    >>> _committed_by("", "w1"), _committed_by("not json", "w1")
    (False, False)

    librdkafka writes metadata with a trailing NUL byte, which kafka-python reads back:

    >>> _committed_by('{"worker": "w1"}\\x00', "w1")
    True
    """
    if isinstance(metadata, str):
        metadata = metadata.rstrip("\x00")
    elif isinstance(metadata, bytes):
        metadata = metadata.rstrip(b"\x00")
    try:
        data = orjson.loads(metadata or b"{}")
    except (orjson.JSONDecodeError, TypeError):
        return False
    return isinstance(data, dict) and data.get("worker") == worker_id


class RebalanceListener(AsyncConsumerRebalanceListener):
    """The rebalance listener of a :class:`KafkaSource` (kafka-python awaits it on its IO
    thread, see the module docstring).

    A rebalance runs only inside the main thread's ``poll`` (kafka-python drives the
    group join from there), so the engine is between batches and every record handed
    out is processed; :meth:`polling` marks that window. Outside it (a revoke while
    closing) the listener does only bookkeeping.
    """

    def __init__(self, source: KafkaSource) -> None:
        self._source = source
        self._polling = False
        # an error of a helper thread, raised in the main thread (raise_failure)
        self._failure: BaseException | None = None

    @contextlib.contextmanager
    def polling(self) -> Iterator[None]:
        """Around the main thread's ``poll``: the window in which rebalances run."""
        self._polling = True
        try:
            yield
        finally:
            self._polling = False

    async def on_partitions_revoked(self, revoked: Any) -> None:
        """Checkpoint and commit what was processed before the partitions move.

        The blocking work (flush, snapshot, commit; or a sync transaction) runs on a
        helper thread while this coroutine waits for it: kafka-python keeps
        heartbeating meanwhile, and the group cannot finish the rebalance, so no other
        member fetches these partitions' committed offsets before the commit is done.
        """
        partitions = set(revoked)
        source = self._source
        settled = False
        if partitions and self._polling and source.engine is not None:
            settled = await self._in_thread(source.settle)
        source.partitions.revoke(partitions, "revoked", settled=settled)

    async def on_partitions_lost(self, lost: Any) -> None:
        """Nothing can be committed any more: bookkeeping only (the source then returns
        to its snapshot, or with model sync to its base, after ``poll``)."""
        self._source.partitions.revoke(set(lost), "lost", settled=False)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        """Position new partitions at the snapshot's offsets, then compare those with the
        group's committed offsets before any record is fetched (helper thread)."""
        partitions = self._source.partitions
        partitions.assign(set(assigned))
        if not self._polling:
            return
        pending = partitions.unchecked()
        if pending:
            worker_id = self._source.worker_id

            def check() -> bool:
                partitions.check_committed(pending, worker_id)
                return True

            await self._in_thread(check)

    async def _in_thread(self, work: Callable[[], bool]) -> bool:
        """Run ``work()`` on a helper thread and wait for it without blocking the IO loop.

        An error there is kept and raised in the main thread after ``poll`` returns
        (:meth:`raise_failure`): the same failure (an undeliverable flush, a snapshot
        that cannot be written) ends the daemon outside a rebalance too.
        """
        try:
            return await self._source.adapter.await_in_thread(self._source.consumer, work)
        except Exception as exc:
            log.error("rebalance work (checkpoint, commit or offset check) failed: %r", exc)
            if self._failure is None:
                self._failure = exc
            return False

    def raise_failure(self) -> None:
        """Raise, in the main thread, what a helper thread hit."""
        failure, self._failure = self._failure, None
        if failure is None:
            return
        if isinstance(failure, StreamNBError):
            raise failure
        raise SourceError(
            f"consumer group {self._source.group_id!r}: {failure!r} during a rebalance; "
            "exiting so that a supervisor restarts from the last snapshot"
        ) from failure
