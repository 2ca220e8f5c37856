// The protocol's `chat()` RPC on opencode: what a program that calls
// opencode's SDK does, `POST /session/:id/message` (which returns when the
// turn is over, with the reply's last message) while it follows the
// session's event stream for the reply as it streams:
//
// | what happens | callback |
// |---|---|
// | opencode stores the call's user message (request `rN`) | `on_start` `rN` |
// | a chunk of `rN`'s reply (`reply-view.mjs`) | `on_event` |
// | a reset of the reply | `on_reset` with the reply's text as it now stands |
// | the POST returns (and the event stream has delivered the message it returned: the stream can lag), its message without `error` | `on_done`, then `returned` |
// | the POST returns with an `error`, or fails | `on_error` with opencode's message, then `returned` |
//
// The outcome goes out after the store is synced, so a caller that reads
// the session at `on_done` finds the answer it was streamed. opencode takes
// no idempotency key: a `chat` delivered twice is two user messages.

import { httpJson } from "../live/event-stream.mjs";
import { ReplyView, errorText } from "./reply-view.mjs";

/** How long a `chat()` call may wait for opencode's answer, in ms. */
const CALL_TIMEOUT_MS = 600_000;
/** How long the events of a reply opencode already returned may take to arrive, in ms. */
const EVENTS_LAG_MS = 5_000;

export class ChatCall extends ReplyView {
  constructor(message, driver) {
    super(driver);
    this.chat = message.chat;
    this.text = message.text;
    this.request = null;
    this.returned = false;
    /** Assistant messages whose completion the event stream delivered. */
    this.completed = new Set();
  }

  messageUpdated(info) {
    super.messageUpdated(info);
    if (info?.role === "assistant" && info.time?.completed) this.completed.add(info.id);
  }

  /** Resolves once `done()` holds (checked as events are handled), or after `ms`. */
  async until(done, ms) {
    const deadline = performance.now() + ms;
    while (!done() && performance.now() < deadline) {
      await this.caughtUp();
      if (!done()) await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  describe() {
    return `chat ${this.chat}`;
  }

  /** Makes the call; resolves when it has returned and its outcome is queued. */
  async call() {
    let outcome;
    let answer;
    try {
      answer = await httpJson(this.driver.base, "POST", `/session/${this.driver.sessionId}/message`, { parts: [{ type: "text", text: this.text }] }, { timeoutMs: CALL_TIMEOUT_MS });
      outcome = answer.status === 200 && !answer.body?.info?.error ? "on_done" : { on_error: { message: answer.status === 200 ? errorText(answer.body.info.error) : `HTTP ${answer.status}: ${JSON.stringify(answer.body).slice(0, 200)}` } };
    } catch (error) {
      outcome = { on_error: { message: error.message } };
    }
    // opencode's event stream can lag its HTTP answers: the reply's last
    // events may still be on their way when the call returns.
    if (answer?.body?.info?.id) await this.until(() => this.completed.has(answer.body.info.id), EVENTS_LAG_MS);
    await this.caughtUp();
    this.driver.bridge.storeChanged();
    this.driver.bridge.callbackAfterStore(this.chat, outcome);
    this.driver.bridge.callbackAfterStore(this.chat, "returned");
    this.returned = true;
  }

  /** opencode stored this call's user message: its turn is request `request`. */
  started(request) {
    this.request = request;
    this.driver.bridge.callback(this.chat, { on_start: { request_id: request } });
  }

  chunk(request, _messageId, chunk) {
    if (request === this.request) this.driver.bridge.callback(this.chat, { on_event: { chunk } });
  }

  reset(request, message) {
    if (request !== this.request) return;
    const text = message.parts
      .filter((part) => part.type === "text")
      .map((part) => part.text)
      .join("");
    this.driver.bridge.callback(this.chat, { on_reset: { text } });
  }
}

