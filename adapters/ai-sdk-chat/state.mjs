// The minimal `ChatState` an `AbstractChat` needs (what `@ai-sdk/react`'s
// state is without React): the messages as an array replaced on each
// change, every message stored as a snapshot so the chat's later in-place
// edits of its streaming message do not reach it. Each push or replace is
// reported to `onChange(message, previous)` at once, synchronously: that is
// where the session writes the store and tells clients.

import { cloneData } from "../node/index.mjs";

export class SessionChatState {
  /**
   * @param {object[]} messages the UI messages the chat starts with
   * @param {(message: object, previous: object | undefined) => void} onChange
   */
  constructor(messages, onChange) {
    this.status = "ready";
    this.error = undefined;
    this.messages = messages;
    this.onChange = onChange;
  }

  pushMessage(message) {
    const copy = this.snapshot(message);
    this.messages = this.messages.concat([copy]);
    this.onChange(copy, undefined);
  }

  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }

  replaceMessage(index, message) {
    const previous = this.messages[index];
    const copy = this.snapshot(message);
    this.messages = this.messages.with(index, copy);
    this.onChange(copy, previous);
  }

  snapshot(thing) {
    return cloneData(thing);
  }
}
