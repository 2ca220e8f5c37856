// One client connection to Think over its WebSocket chat protocol, sending
// what `useAgentChat` sends (agents 0.32.0's WebSocketChatTransport) and
// translating what Think sends into turnsim's client frames (`Frame` in
// engine/src/client.rs):
//
// | Think sends | frame |
// |---|---|
// | `cf_agent_chat_messages` | `Messages` (each UI message as the store's `Message`) |
// | `cf_agent_use_chat_response`, a UI chunk with content | `Chunk` into the message the request's `start` named |
// | ... `tool-output-*`, `tool-approval-request` | `Tool` with the call's new state |
// | ... `done` | `Done` (`continuation` as flagged), or `Error` with the body when `error` |
// | `cf_agent_message_updated` | `Tool` for each tool part whose state changed |
// | ... chunks flagged `replay` (a resumed turn's stream from its start) | one `Messages`: the transcript shown, with the replayed message as it stands |
// | `cf_agent_chat_recovering` | `Recovering` |
// | `cf_agent_stream_resuming` | `StreamResuming`, when this client asked (`resumeRequest`) |
// | `cf_agent_stream_resume_none` | `ResumeNone`, when this client asked |
//
// Think also offers a resume unasked (on connect while a stream runs, and
// for every tool continuation) and holds the connection's chunks until it
// is acked. The published client acks every such offer once, at once; so
// does this one (`ackOffersUnasked`), and the offer is not a frame of the
// harness's: its own handshake (`resume_request` / `resume_ack`) is the
// one a scenario asks for and `resume-handshake` judges.
import WebSocket from "ws";
import { applyChunkToParts } from "agents/chat";
import { fromUIMessage, uiToolName } from "../node/messages.mjs";
import { fromUIChunk } from "../node/chunks.mjs";
import { AGENT_PATH } from "./workerd.mjs";

const TOOL_STATE_OF_CHUNK = {
  "tool-output-available": "output-available",
  "tool-output-error": "output-error",
  "tool-output-denied": "output-denied",
  "tool-approval-request": "approval-requested"
};

export class ThinkClient {
  /**
   * `onFrame(frame)` gets each translated frame; `onClose()` once the socket
   * is gone; `clientTools` are the schemas sent with every request and result.
   */
  constructor({ port, instance, connectionId, clientTools = [], onFrame, onRaw = () => {}, onClose = () => {}, onLog = () => {}, ackOffersUnasked = true, replyOf = () => null, named = (messages) => messages }) {
    this.onRaw = onRaw; // each of Think's frames as it came, before translation
    this.replyOf = replyOf; // a tool continuation's reply, by request id, as the driver names it
    this.named = named; // a transcript with each such reply under its name
    this.url = `ws://127.0.0.1:${port}${AGENT_PATH}/${instance}?_pk=${connectionId}`;
    this.messagesUrl = `http://127.0.0.1:${port}${AGENT_PATH}/${instance}/get-messages`;
    this.transcriptShown = false;
    this.connectionId = connectionId;
    this.clientTools = clientTools;
    this.onFrame = onFrame;
    this.onClose = onClose;
    this.onLog = onLog;
    this.ackOffersUnasked = ackOffersUnasked;
    this.messageOfRequest = new Map(); // request id -> the assistant message its `start` named
    this.lastAssistant = null; // the last assistant message this client shows: where a continuation's chunks go
    this.shown = []; // the transcript this client was last sent whole (UI messages)
    this.replaying = null; // a replayed stream being caught up: { requestId, message }
    this.transcriptArrived = new Promise((resolve) => (this.onTranscript = resolve));
    this.toolNames = new Map(); // call id -> tool name
    this.toolStates = new Map(); // call id -> last state this client was told
    this.acked = new Set(); // offers acked (the published client acks each once)
    this.asked = false; // a resume request of the harness's waits for its answer
    this.requests = 0;
  }

  open() {
    this.socket = new WebSocket(this.url);
    this.socket.on("message", (data) => this.receive(String(data)));
    this.socket.on("close", () => this.onClose());
    this.socket.on("error", (error) => this.onLog(`client ${this.connectionId}: ${error.message}`));
    return new Promise((resolve, reject) => {
      this.socket.once("open", resolve);
      this.socket.once("error", reject);
    });
  }

  close() {
    this.socket?.terminate();
  }

  /**
   * A user message as useAgentChat's `sendMessage` sends it, under the ids
   * given (else this connection's own); returns the request id.
   */
  userMessage(text, ids = {}) {
    const requestId = ids.requestId ?? `${this.connectionId}-r${++this.requests}`;
    const message = { id: ids.messageId ?? `${requestId}-user`, role: "user", parts: [{ type: "text", text }] };
    this.lastUserMessageId = message.id;
    const body = { messages: [message], trigger: "submit-message", clientTools: this.clientTools };
    this.send({ type: "cf_agent_use_chat_request", id: requestId, init: { method: "POST", body: JSON.stringify(body) } });
    return requestId;
  }

  /** A client tool's result (`outcome`: `{Output: v}` or `{Error: text | null}`), as `addToolOutput` sends it. */
  toolResult(callId, outcome, autoContinue) {
    const frame = {
      type: "cf_agent_tool_result",
      toolCallId: callId,
      toolName: this.toolNames.get(callId) ?? "",
      autoContinue,
      clientTools: this.clientTools
    };
    if ("Output" in outcome) frame.output = outcome.Output;
    // An error without text goes without `errorText`: Think (agents'
    // `toolResultUpdate`) then stores its own default text.
    else Object.assign(frame, { output: undefined, state: "output-error", ...(outcome.Error != null ? { errorText: outcome.Error } : {}) });
    this.send(frame);
  }

  /** An approval or denial, as `addToolApprovalResponse` sends it. */
  approval(callId, approved, autoContinue) {
    this.send({ type: "cf_agent_tool_approval", toolCallId: callId, approved, autoContinue });
  }

  /** The harness's resume request: its answer is forwarded as a frame. */
  resumeRequest() {
    this.asked = true;
    this.send({ type: "cf_agent_stream_resume_request", probeId: `${this.connectionId}-probe` });
  }

  resumeAck(requestId) {
    this.acked.add(requestId);
    this.send({ type: "cf_agent_stream_resume_ack", id: requestId });
  }

  send(frame) {
    if (this.socket?.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(frame));
  }

  receive(text) {
    let data;
    try {
      data = JSON.parse(text);
    } catch {
      return this.onLog(`client ${this.connectionId}: not JSON: ${text.slice(0, 200)}`);
    }
    this.onRaw(data);
    switch (data.type) {
      case "cf_agent_chat_messages":
        for (const message of data.messages) this.rememberTools(message, false);
        this.showTranscript(data.messages);
        return this.onTranscript();
      case "cf_agent_message_updated":
        return this.rememberTools(data.message, true);
      case "cf_agent_use_chat_response":
        return this.response(data);
      case "cf_agent_chat_recovering":
        return this.onFrame({ Recovering: !!data.recovering });
      case "cf_agent_stream_resuming":
        return this.offer(data);
      case "cf_agent_stream_resume_none":
        if (this.answersAsk(data)) this.onFrame("ResumeNone");
        return;
      default:
        return; // identity, state, MCP servers, keep-waiting: nothing the harness reads
    }
  }

  /** A resume request of the harness's gets its answer; Think's own offers are acked like the published client does. */
  offer(data) {
    if (this.answersAsk(data)) return this.onFrame({ StreamResuming: { request_id: data.id } });
    if (this.ackOffersUnasked && !this.acked.has(data.id)) this.resumeAck(data.id);
  }

  /** The frame answers this client's resume request (Think echoes its probe id). */
  answersAsk(data) {
    if (!this.asked || !data.probeId) return false;
    this.asked = false;
    return true;
  }

  /**
   * The stored transcript as useAgentChat loads it when it mounts: over
   * HTTP from the agent's `/get-messages` (agents `dist/chat/react.js`
   * 288-302, `defaultGetInitialMessagesFetch`), not from the socket: Think
   * sends a connection no transcript while a stream it resumes is under
   * way. Shown unless the socket's transcript came first.
   */
  async loadInitialMessages() {
    try {
      const response = await fetch(this.messagesUrl);
      if (!response.ok) return this.onLog(`client ${this.connectionId}: get-messages answered ${response.status}`);
      const messages = await response.json();
      if (this.transcriptShown || !Array.isArray(messages)) return;
      for (const message of messages) this.rememberTools(message, false);
      this.showTranscript(messages);
      this.onTranscript();
    } catch (error) {
      this.onLog(`client ${this.connectionId}: get-messages: ${error.message}`);
    }
  }

  /** Sends the whole transcript `messages` (UI messages) as this client now shows it. */
  showTranscript(messages) {
    this.transcriptShown = true;
    messages = this.named(messages);
    this.shown = messages;
    this.lastAssistant = messages.findLast((message) => message.role === "assistant")?.id ?? null;
    this.onFrame({ Messages: messages.map((message) => fromUIMessage(message)) });
  }

  /**
   * Think replays a resumed stream from its start (chunks flagged `replay`):
   * the client catches up on it in one go, so its end (`replayComplete`, a
   * live chunk, or the stream's end) shows the transcript with the replayed
   * message as it stands, and the live chunks follow.
   */
  replay(data) {
    if (!this.replaying || this.replaying.requestId !== data.id) this.replaying = { requestId: data.id, message: null };
    const chunk = data.body ? parseJson(data.body) : null;
    if (!chunk) return;
    if (chunk.type === "start") {
      const id = chunk.messageId ?? data.id;
      this.replaying.message = { id, role: "assistant", parts: [] };
      this.messageOfRequest.set(data.id, this.replaying.message.id);
      return;
    }
    if (chunk.type === "tool-input-start") this.toolNames.set(chunk.toolCallId, chunk.toolName);
    if (this.replaying.message) applyChunkToParts(this.replaying.message.parts, chunk);
  }

  caughtUp() {
    const message = this.replaying?.message;
    this.replaying = null;
    if (!message) return;
    const at = this.shown.findIndex((shown) => shown.id === message.id);
    const messages = at >= 0 ? this.shown.map((shown, index) => (index === at ? message : shown)) : [...this.shown, message];
    for (const part of message.parts) if (part.toolCallId) this.toolStates.set(part.toolCallId, part.state);
    this.showTranscript(messages);
  }

  response(data) {
    // A continuation's stream offered as it starts replays what it has streamed so far
    // into the message the client shows: those chunks are shown as they come.
    if (data.replay && !data.continuation && !data.done && !data.replayComplete) return this.replay(data);
    if (this.replaying) this.caughtUp();
    if (data.replayComplete) return;
    if (data.done && data.error) return this.onFrame({ Error: { request_id: data.id, message: String(data.body ?? "") } });
    if (data.done) return this.onFrame({ Done: { request_id: data.id, continuation: !!data.continuation } });
    const chunk = data.body ? parseJson(data.body) : null;
    if (chunk) this.chunk(data.id, chunk, !!data.continuation);
  }

  /**
   * A chunk into the message its request's `start` named; a continuation's
   * (Think flags it, and names no message) into its own reply as the driver
   * names it (a tool continuation's: Think stores it as a new message), or
   * a recovery's into the last assistant message shown, which it extends.
   */
  chunk(requestId, chunk, continuation) {
    if (chunk.type === "start" && !this.messageOfRequest.has(requestId)) {
      const messageId = continuation ? this.lastAssistant : chunk.messageId;
      if (messageId) this.messageOfRequest.set(requestId, messageId);
      if (messageId) this.lastAssistant = messageId;
    }
    if (chunk.type === "tool-input-start") this.toolNames.set(chunk.toolCallId, chunk.toolName);
    const state = TOOL_STATE_OF_CHUNK[chunk.type];
    if (state) return this.tool(chunk.toolCallId, state);
    const protocolChunk = fromUIChunk(chunk);
    if (!protocolChunk) return;
    const messageId = (continuation ? this.replyOf(requestId) : null) ?? this.messageOfRequest.get(requestId) ?? requestId;
    this.onFrame({ Chunk: { request_id: requestId, message_id: messageId, chunk: protocolChunk } });
    if (protocolChunk.type === "tool-call") this.toolStates.set(chunk.toolCallId, "input-available");
  }

  tool(callId, state) {
    this.toolStates.set(callId, state);
    this.onFrame({ Tool: { call_id: callId, tool_name: this.toolNames.get(callId) ?? "", state } });
  }

  /** Learns each tool part's name and state; `announce` sends a `Tool` frame for each state that changed. */
  rememberTools(message, announce) {
    for (const part of message.parts ?? []) {
      const name = uiToolName(part);
      if (name === null) continue;
      this.toolNames.set(part.toolCallId, name);
      if (this.toolStates.get(part.toolCallId) === part.state) continue;
      if (announce) this.tool(part.toolCallId, part.state);
      else this.toolStates.set(part.toolCallId, part.state);
    }
  }
}

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
