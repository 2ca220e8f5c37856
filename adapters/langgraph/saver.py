"""The checkpointer: a LangGraph `BaseCheckpointSaver` over the harness's
durable store, in which every write LangGraph makes is one commit.

`aput` (a checkpoint) and `aput_writes` (a task's writes, saved before the
next checkpoint) each become one atomic commit of opaque `Put` entries,
values serialised with the saver's own serde (msgpack, base64 here):

    lg:checkpoint|<thread>|<ns>|<id>              the checkpoint, its metadata, parent and sequence number
    lg:blob|<thread>|<ns>|<channel>|<version>     one channel's value at one version (as InMemorySaver keeps them)
    lg:write|<thread>|<ns>|<checkpoint>|<task>|<idx>   one pending write

The same commit carries what the session asks to ride along (its
`riders`): the transcript projected into the store's vocabulary, and its
own entries.

The latest checkpoint is the one with the highest sequence number, a
counter kept in the store, not the highest id: LangGraph's ids (uuid6) are
ordered by time only within one process, and a process restarted at the
same virtual instant draws ids that may sort before its predecessor's.
"""

import base64

from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)

SEQUENCE_KEY = "lg:sequence"


def _encode(typed):
    kind, data = typed
    return {"type": kind, "base64": base64.b64encode(data).decode("ascii")}


def _decode(value):
    return value["type"], base64.b64decode(value["base64"])


def _place(config):
    configurable = config["configurable"]
    return configurable["thread_id"], configurable.get("checkpoint_ns", "")


class StoreSaver(BaseCheckpointSaver):
    def __init__(self, host, session):
        super().__init__()
        self._host = host
        # Its `riders(config, checkpoint, writes)` gives the writes a commit carries along, and
        # `committed()` hears that the commit was taken.
        self._session = session

    @property
    def _entries(self):
        return self._host.store.state["extra"]

    def _commit(self, writes, config, checkpoint=None, pending=()):
        reply = self._host.store.commit(writes + self._session.riders(config, checkpoint, pending))
        if not reply.get("ok"):
            raise StoreRefused(reply.get("error") or "the store refused a commit")
        self._session.committed()

    # ---- reads -----------------------------------------------------------

    def _checkpoint_ids(self, thread, ns):
        prefix = f"lg:checkpoint|{thread}|{ns}|"
        found = [(entry["sequence"], key[len(prefix):]) for key, entry in self._entries.items()
                 if key.startswith(prefix)]
        return [checkpoint_id for _, checkpoint_id in sorted(found)]

    def _tuple(self, thread, ns, checkpoint_id):
        saved = self._entries.get(f"lg:checkpoint|{thread}|{ns}|{checkpoint_id}")
        if saved is None:
            return None
        checkpoint = self.serde.loads_typed(_decode(saved["checkpoint"]))
        values = {}
        for channel, version in checkpoint["channel_versions"].items():
            blob = self._entries.get(f"lg:blob|{thread}|{ns}|{channel}|{version}")
            if blob is not None and blob["type"] != "empty":
                values[channel] = self.serde.loads_typed(_decode(blob))
        prefix = f"lg:write|{thread}|{ns}|{checkpoint_id}|"
        writes = sorted((entry for key, entry in self._entries.items() if key.startswith(prefix)),
                        key=lambda entry: writes_sort_key(entry["path"], entry["task"], entry["idx"]))
        parent = saved["parent"]
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}},
            checkpoint={**checkpoint, "channel_values": values},
            metadata=self.serde.loads_typed(_decode(saved["metadata"])),
            parent_config=None if parent is None else {
                "configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": parent}},
            pending_writes=[(entry["task"], entry["channel"], self.serde.loads_typed(_decode(entry["value"])))
                            for entry in writes],
        )

    def tuple_at(self, config):
        """The checkpoint `config` names, as the store holds it now (None if it holds none)."""
        thread, ns = _place(config)
        return self._tuple(thread, ns, config["configurable"]["checkpoint_id"])

    async def aget_tuple(self, config):
        thread, ns = _place(config)
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id is None:
            ids = self._checkpoint_ids(thread, ns)
            if not ids:
                return None
            checkpoint_id = ids[-1]
        return self._tuple(thread, ns, checkpoint_id)

    async def alist(self, config, *, filter=None, before=None, limit=None):
        thread, ns = _place(config)
        ids = self._checkpoint_ids(thread, ns)
        if before is not None and get_checkpoint_id(before) in ids:
            ids = ids[:ids.index(get_checkpoint_id(before))]
        for checkpoint_id in reversed(ids):
            found = self._tuple(thread, ns, checkpoint_id)
            if filter and any(found.metadata.get(key) != value for key, value in filter.items()):
                continue
            yield found
            if limit is not None:
                limit -= 1
                if limit <= 0:
                    return

    # ---- writes: one commit each -------------------------------------------

    async def aput(self, config, checkpoint, metadata, new_versions):
        thread, ns = _place(config)
        saved = checkpoint.copy()
        values = saved.pop("channel_values")
        writes = []
        for channel, version in new_versions.items():
            blob = _encode(self.serde.dumps_typed(values[channel])) if channel in values else {"type": "empty"}
            writes.append({"Put": {"key": f"lg:blob|{thread}|{ns}|{channel}|{version}", "value": blob}})
        sequence = self._entries.get(SEQUENCE_KEY, 0) + 1
        entry = {"sequence": sequence, "checkpoint": _encode(self.serde.dumps_typed(saved)),
                 "metadata": _encode(self.serde.dumps_typed(get_checkpoint_metadata(config, metadata))),
                 "parent": config["configurable"].get("checkpoint_id")}
        writes.append({"Put": {"key": f"lg:checkpoint|{thread}|{ns}|{checkpoint['id']}", "value": entry}})
        writes.append({"Put": {"key": SEQUENCE_KEY, "value": sequence}})
        written = {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}
        self._commit(writes, written, {**checkpoint, "channel_values": values})
        return written

    async def aput_writes(self, config, writes, task_id, task_path=""):
        thread, ns = _place(config)
        checkpoint_id = config["configurable"]["checkpoint_id"]
        batch = []
        for index, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, index)
            key = f"lg:write|{thread}|{ns}|{checkpoint_id}|{task_id}|{idx}"
            if idx >= 0 and key in self._entries:
                continue  # a task's regular writes are saved once (InMemorySaver's rule)
            batch.append({"Put": {"key": key, "value": {
                "task": task_id, "channel": channel, "idx": idx, "path": task_path,
                "value": _encode(self.serde.dumps_typed(value))}}})
        if batch:
            self._commit(batch, config, pending=writes)

    async def adelete_thread(self, thread_id):
        removed = [{"Remove": key} for key in self._entries
                   if key.split("|")[1:2] == [thread_id] and key.startswith(("lg:checkpoint|", "lg:blob|", "lg:write|"))]
        if removed:
            self._commit(removed, {"configurable": {"thread_id": thread_id}})


class StoreRefused(Exception):
    """The harness's store refused a checkpoint commit."""
