// One client connection to opencode, as its own UI is one: an event stream
// (`GET /event`) opened at connect and closed at disconnect, the session's
// messages loaded when it opens (`GET /session/:id/message`), and what the
// stream delivers (`reply-view.mjs`) shown in the protocol's frames:
//
// | the view reports | frame |
// |---|---|
// | the connection opened; a user message's text | `Messages`: the session as `GET .../message` answers then |
// | a chunk of request `rN`'s reply | `Chunk` |
// | a tool's state | `Tool` |
// | a reset of a reply | `Reset` |
// | a request failed | `Error` (once a request) |
// | the turn ended | `Done` of each request streamed here that had no `Error` |

import { EventStream } from "../live/event-stream.mjs";
import { ReplyView } from "./reply-view.mjs";

export class Connection extends ReplyView {
  constructor(id, driver) {
    super(driver);
    this.id = id;
    this.bridge = driver.bridge;
    /** Requests streamed here and not ended; requests ended (done or error). */
    this.open = new Set();
    this.ended = new Set();
  }

  describe() {
    return `connection ${this.id}`;
  }

  /** Opens the event stream, then shows the session as it stands. */
  async connect() {
    this.stream = new EventStream(`${this.driver.base}/event`, { onEvent: (event) => this.enqueue(event) });
    await this.stream.opened;
    await this.showSession();
  }

  close() {
    this.closed = true;
    this.stream?.close();
  }

  async showSession() {
    const transcript = await this.driver.readTranscript();
    this.learn(transcript.raw);
    this.bridge.send(this.id, { Messages: transcript.messages });
  }

  userText() {
    return this.showSession();
  }

  chunk(request, messageId, chunk) {
    if (this.ended.has(request)) return;
    this.open.add(request);
    this.bridge.send(this.id, { Chunk: { request_id: request, message_id: messageId, chunk } });
  }

  toolState(_request, part, state) {
    this.bridge.send(this.id, { Tool: { call_id: part.callID, tool_name: part.tool, state } });
  }

  reset(request, message) {
    this.bridge.send(this.id, { Reset: { request_id: request, message } });
  }

  failure(request, message) {
    if (request === null || this.ended.has(request)) return;
    this.ended.add(request);
    this.open.delete(request);
    this.bridge.sendAfterStore(this.id, { Error: { request_id: request, message } });
  }

  turnEnded() {
    for (const request of this.open) {
      this.ended.add(request);
      this.bridge.sendAfterStore(this.id, { Done: { request_id: request, continuation: false } });
    }
    this.open.clear();
  }
}
