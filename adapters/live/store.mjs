// The engine's store as the harness's store sees it. A live engine keeps
// its transcript itself (a database, files); the harness's store is a
// mirror of it, fed by `commit`s of what changed between two snapshots of
// the engine's transcript in the store's vocabulary (`Write`s): a message
// new or changed is put (placed after the message before it when it is not
// the last), a message gone is removed. The mirror starts from what the
// harness's store holds at `init`, so a restarted engine's first snapshot
// commits only what changed while no bridge watched.

export class StoreMirror {
  /** `messages`: the transcript the harness's store holds (`init.state.messages`). */
  constructor(messages = []) {
    this.messages = messages.map((message) => ({ id: message.id, json: JSON.stringify(message) }));
  }

  /** The writes that take the mirror to `next` (a list of protocol `Message`s), and takes them. */
  update(next) {
    const writes = [];
    const nextIds = new Set(next.map((message) => message.id));
    for (const old of this.messages) {
      if (!nextIds.has(old.id)) writes.push({ RemoveMessage: old.id });
    }
    const kept = this.messages.filter((message) => nextIds.has(message.id));
    const old = new Map(kept.map((message, index) => [message.id, { json: message.json, index }]));
    const lastKept = kept.length > 0 ? kept[kept.length - 1].id : null;
    let previous = null;
    let pastLastKept = lastKept === null;
    for (const message of next) {
      const json = JSON.stringify(message);
      const before = old.get(message.id);
      if (before === undefined) {
        writes.push(pastLastKept || previous === null ? { PutMessage: message } : { PutMessageAfter: { after: previous, message } });
      } else if (before.json !== json) {
        writes.push({ PutMessage: message });
      }
      if (message.id === lastKept) pastLastKept = true;
      previous = message.id;
    }
    this.messages = next.map((message) => ({ id: message.id, json: JSON.stringify(message) }));
    return writes;
  }
}
