"""The durable store, on the harness's side: `state` mirrors what the store
holds (loaded from `init.state`, the JSON of `DurableState`), and `commit`
asks the harness to take a batch of writes, all or none. A taken batch is
folded into the mirror with the store's own rules (`DurableState::apply` in
engine/src/durable.rs), so the two never drift.
"""

import copy

_DEFAULTS = (("messages", list), ("next_id", int), ("incidents", dict), ("alarms", list), ("deliveries", dict),
             ("extra", dict))


class Store:
    def __init__(self, host, state):
        self._host = host
        self.state = copy.deepcopy(state or {})
        for key, make in _DEFAULTS:
            if self.state.get(key) is None:
                self.state[key] = make()

    def commit(self, writes):
        """Commits `writes` (a list of `Write` JSON): `{"ok": True}` or
        `{"ok": False, "error": ...}`; only a taken batch changes `state`."""
        if self._host.store_may_refuse:
            reply = self._host.request({"type": "commit", "writes": writes})
        else:  # a store that refuses nothing in this run is told, not asked: a round trip saved
            self._host.effect({"type": "commit", "writes": writes, "no_reply": True})
            reply = {"ok": True}
        if reply.get("ok"):
            for write in writes:
                apply_write(self.state, write)
        return reply

    def get(self, key, default=None):
        """One of the engine's own opaque entries (`Write::Put`)."""
        return self.state["extra"].get(key, default)


def _put_message(state, message):
    messages = state["messages"]
    for index, stored in enumerate(messages):
        if stored["id"] == message["id"]:
            messages[index] = copy.deepcopy(message)
            return
    messages.append(copy.deepcopy(message))


def _put_message_after(state, value):
    message = value["message"]
    messages = [stored for stored in state["messages"] if stored["id"] != message["id"]]
    at = next((index + 1 for index, stored in enumerate(messages) if stored["id"] == value["after"]), len(messages))
    messages.insert(at, copy.deepcopy(message))
    state["messages"] = messages


def _set(key):
    def set_value(state, value):
        state[key] = copy.deepcopy(value)

    return set_value


def _put_alarm(state, alarm):
    state["alarms"] = [kept for kept in state["alarms"] if kept["id"] != alarm["id"]] + [copy.deepcopy(alarm)]


def _remove_alarm(state, alarm_id):
    state["alarms"] = [kept for kept in state["alarms"] if kept["id"] != alarm_id]


_APPLY = {
    "PutMessage": _put_message,
    "PutMessageAfter": _put_message_after,
    "RemoveMessage": lambda state, message_id: state.__setitem__(
        "messages", [stored for stored in state["messages"] if stored["id"] != message_id]),
    "NextId": _set("next_id"),
    "Intent": _set("continuation_intent"),
    "InFlight": _set("in_flight"),
    "Progress": _set("progress"),
    "Terminal": _set("terminal_status"),
    "PutIncident": lambda state, incident: state["incidents"].__setitem__(incident["id"], copy.deepcopy(incident)),
    "RemoveIncident": lambda state, incident_id: state["incidents"].pop(incident_id, None),
    "PutAlarm": _put_alarm,
    "RemoveAlarm": _remove_alarm,
    "PutDelivery": lambda state, delivery: state["deliveries"].__setitem__(delivery["id"], copy.deepcopy(delivery)),
    "Put": lambda state, entry: state["extra"].__setitem__(entry["key"], copy.deepcopy(entry["value"])),
    "Remove": lambda state, key: state["extra"].pop(key, None),
}


def apply_write(state, write):
    """`DurableState::apply`, for the JSON shapes."""
    kind, value = (write, None) if isinstance(write, str) else next(iter(write.items()))
    apply = _APPLY.get(kind)
    if apply is None:
        raise ValueError(f"a write the store does not have: {write!r}")
    apply(state, value)


class Write:
    """`Write` constructors, named after its variants."""

    put_message = staticmethod(lambda message: {"PutMessage": message})
    put_message_after = staticmethod(lambda after, message: {"PutMessageAfter": {"after": after, "message": message}})
    remove_message = staticmethod(lambda message_id: {"RemoveMessage": message_id})
    next_id = staticmethod(lambda value: {"NextId": value})
    put = staticmethod(lambda key, value: {"Put": {"key": key, "value": value}})
    remove = staticmethod(lambda key: {"Remove": key})
    put_delivery = staticmethod(lambda delivery: {"PutDelivery": delivery})
    put_incident = staticmethod(lambda incident: {"PutIncident": incident})
    remove_incident = staticmethod(lambda incident_id: {"RemoveIncident": incident_id})
    put_alarm = staticmethod(lambda alarm: {"PutAlarm": alarm})
    remove_alarm = staticmethod(lambda alarm_id: {"RemoveAlarm": alarm_id})
