// The durable store, on the harness's side: `state` is a mirror of what
// the store holds (loaded from `init.state`, the JSON of `DurableState`),
// and `commit` asks the harness to take a batch of writes, all or none.
// A committed batch is folded into the mirror with the store's own rules
// (`DurableState::apply` in engine/src/durable.rs), so the two never drift.

import { cloneData } from "./clone.mjs";

export class Store {
  constructor(host, state) {
    this.host = host;
    /** The durable state as the store holds it. */
    this.state = normalise(cloneData(state ?? {}));
  }

  /**
   * Commits `writes` (a list of `Write` JSON). Resolves to `{ok: true}` or
   * `{ok: false, error}`; only a taken batch changes `state`.
   */
  async commit(writes) {
    let reply = { ok: true };
    // A store that refuses nothing in this run is told, not asked: a round trip saved.
    if (this.host.storeMayRefuse) reply = this.host.request({ type: "commit", writes });
    else this.host.effect({ type: "commit", writes, no_reply: true });
    if (reply.ok) for (const write of writes) apply(this.state, write);
    return reply;
  }

  /** One of the engine's own opaque entries (`Write::Put`), or undefined. */
  get(key) {
    return this.state.extra[key];
  }
}

function normalise(state) {
  state.messages ??= [];
  state.next_id ??= 0;
  state.incidents ??= {};
  state.alarms ??= [];
  state.deliveries ??= {};
  state.extra ??= {};
  return state;
}

/** `DurableState::apply`, for the JSON shapes. */
export function apply(state, write) {
  const [kind, value] = typeof write === "string" ? [write, undefined] : Object.entries(write)[0];
  switch (kind) {
    case "PutMessage": {
      const at = state.messages.findIndex((message) => message.id === value.id);
      if (at >= 0) state.messages[at] = cloneData(value);
      else state.messages.push(cloneData(value));
      break;
    }
    case "PutMessageAfter": {
      state.messages = state.messages.filter((message) => message.id !== value.message.id);
      const after = state.messages.findIndex((message) => message.id === value.after);
      state.messages.splice(after >= 0 ? after + 1 : state.messages.length, 0, cloneData(value.message));
      break;
    }
    case "NextId":
      state.next_id = value;
      break;
    case "Intent":
      state.continuation_intent = value;
      break;
    case "InFlight":
      state.in_flight = value;
      break;
    case "PutIncident":
      state.incidents[value.id] = value;
      break;
    case "RemoveIncident":
      delete state.incidents[value];
      break;
    case "PutAlarm":
      state.alarms = state.alarms.filter((alarm) => alarm.id !== value.id).concat([value]);
      break;
    case "RemoveAlarm":
      state.alarms = state.alarms.filter((alarm) => alarm.id !== value);
      break;
    case "Progress":
      state.progress = value;
      break;
    case "PutDelivery":
      state.deliveries[value.id] = value;
      break;
    case "Terminal":
      state.terminal_status = value;
      break;
    case "Put":
      state.extra[value.key] = cloneData(value.value);
      break;
    case "Remove":
      delete state.extra[value];
      break;
    default:
      throw new Error(`a write the store does not have: ${JSON.stringify(write)}`);
  }
}

/** Write constructors, named after the `Write` variants. */
export const Write = {
  putMessage: (message) => ({ PutMessage: message }),
  put: (key, value) => ({ Put: { key, value } }),
  remove: (key) => ({ Remove: key }),
  putDelivery: (delivery) => ({ PutDelivery: delivery }),
  putIncident: (incident) => ({ PutIncident: incident }),
  removeIncident: (id) => ({ RemoveIncident: id }),
  putAlarm: (alarm) => ({ PutAlarm: alarm }),
  removeAlarm: (id) => ({ RemoveAlarm: id }),
};
