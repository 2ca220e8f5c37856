// What every repro here shares, built from nothing but the language: the
// minimal `ChatState` an `AbstractChat` needs (the messages it starts with
// as an array replaced on each change, each message stored as a snapshot), and the
// token usage the mock model reports.

export class State {
  status = "ready";
  error = undefined;
  constructor(messages = []) {
    this.messages = messages;
  }
  pushMessage = (message) => (this.messages = [...this.messages, structuredClone(message)]);
  popMessage = () => (this.messages = this.messages.slice(0, -1));
  replaceMessage = (index, message) => (this.messages = this.messages.with(index, structuredClone(message)));
  snapshot = (thing) => structuredClone(thing);
}

export const usage = { inputTokens: { total: 1, noCache: 1 }, outputTokens: { total: 1, text: 1 } };
