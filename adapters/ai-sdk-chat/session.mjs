// One chat session: an `AbstractChat` (the AI SDK's own chat machinery,
// what `useChat` runs) over a minimal `ChatState`, sending through a
// transport that runs `streamText` over the harness's model.
//
// The SDK decides: when a request is sent (`sendMessage`, the automatic
// continuation `sendAutomaticallyWhen` asks for after a stream ends, after
// `addToolOutput` and after `addToolApprovalResponse`), which part a result
// or approval moves (`addToolOutput` by tool call id,
// `addToolApprovalResponse` by approval id), messages sent while a response
// runs or a tool waits (`experimental_queue`), the assistant message built
// from the UI stream (`processUIMessageStream`), and, in the transport, the
// steps, server tools, approvals, retries and the stall timeout
// (`streamText`). Ours: the protocol's inputs mapped onto those calls, the
// store written from the state's changes, frames and `chat()` callbacks.
// README.md has the whole list.

import {
  AbstractChat,
  isToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from "ai";
import { chunks, messages as stored, Write } from "../node/index.mjs";
import { SessionChatState } from "./state.mjs";
import { HarnessTransport } from "./transport.mjs";

/** The opaque store entry holding the `chat()` keys already taken. */
const KEYS_KEY = "ai-sdk-chat:chat-keys";
/** `addToolOutput` needs an error text; the protocol's error outcome may carry none. */
const DEFAULT_TOOL_ERROR = "The tool failed.";

class SessionChat extends AbstractChat {}

export class Session {
  constructor(host) {
    this.host = host;
    this.config = host.config;
    this.nextId = host.store.state.next_id ?? 0;
    /** The request streaming now (the transport's), or null. */
    this.request = null;
    /** A client's `auto_continue` for each answered tool call. */
    this.optIn = new Map();
    /** `chat()` callers by the id of the user message they sent. */
    this.callers = new Map();
    this.keys = new Set(host.store.get(KEYS_KEY) ?? []);
    /** The last committed JSON of each message, so an unchanged one is not written again. */
    this.committed = new Map(host.store.state.messages.map((message) => [message.id, JSON.stringify(message)]));
    /** The per-turn stall timeout of the last user message, for continuations a result starts. */
    this.stallMs = undefined;
    this.state = new SessionChatState(host.store.state.messages.map(stored.toUIMessage), (message, previous) =>
      this.changed(message, previous),
    );
    this.chat = new SessionChat({
      id: "chat",
      state: this.state,
      transport: new HarnessTransport(this),
      generateId: () => this.newId("m"),
      sendAutomaticallyWhen: ({ messages }) => this.continues(messages),
      experimental_queue: true,
      onFinish: (finish) => this.finished(finish),
      onError: (error) => host.log("chat error:", chunks.errorText(error)),
    });
    // Each model request carries the chat's messages as stored (ids included).
    host.model.transcript = () => this.liveMessages();
  }

  // ---- protocol handlers -------------------------------------------------

  /** A restarted process only loads the stored messages: the `Chat` has no boot step. */
  boot() {}

  connect(connection) {
    return connection.send({ Messages: this.liveMessages() });
  }

  /** The protocol's handshake: offer the running request and hold the connection until its ack. */
  resumeRequest(connection) {
    if (!this.request) return connection.send("ResumeNone");
    connection.held = this.request.id;
    return connection.send({ StreamResuming: { request_id: this.request.id } });
  }

  /** The live messages hold everything streamed while the connection was held. */
  resumeAck(connection, requestId) {
    if (connection.held !== requestId) return undefined;
    connection.held = false;
    return connection.send({ Messages: this.liveMessages() });
  }

  userMessage(text, options) {
    return this.send(text, options, null);
  }

  /** `chat()` is glue over `sendMessage`: the SDK has no server-side call with callbacks. */
  async chat(caller, text, options) {
    // A call delivered twice (one key) is taken once, as the built-in engine does.
    if (caller.key !== undefined && caller.key !== null) {
      if (this.keys.has(caller.key)) return caller.returned();
      this.keys.add(caller.key);
      await this.commit([Write.put(KEYS_KEY, [...this.keys])]);
    }
    await this.send(text, options, caller);
  }

  deliver(delivery) {
    this.host.log(`messenger delivery ${delivery} ignored: the AI SDK has no messenger (capabilities.json)`);
  }

  toolResult(result, autoContinue) {
    this.optIn.set(result.call_id, autoContinue);
    const outcome = result.outcome;
    const tool = this.toolName(result.call_id);
    const output =
      "Error" in outcome
        ? { state: "output-error", errorText: outcome.Error ?? DEFAULT_TOOL_ERROR }
        : { output: outcome.Output };
    return this.run(this.chat.addToolOutput({ tool, toolCallId: result.call_id, ...output, options: this.requestOptions() }));
  }

  /** The protocol names the call; the SDK takes the approval's own id (the call id when it has none). */
  approval(callId, approved, autoContinue) {
    this.optIn.set(callId, autoContinue);
    const part = this.findPart(callId);
    const id = part?.approval?.id ?? callId;
    return this.run(this.chat.addToolApprovalResponse({ id, approved, options: this.requestOptions() }));
  }

  // ---- the chat ------------------------------------------------------------

  async send(text, options, caller) {
    const id = this.newId("m");
    if (caller) this.callers.set(id, caller);
    this.stallMs = options?.stall_timeout_ms ?? undefined;
    const message = { id, role: "user", parts: [{ type: "text", text }] };
    await this.run(this.chat.sendMessage(message, this.requestOptions()));
  }

  /** The transport's per-request settings ride in the request body. */
  requestOptions() {
    return this.stallMs === undefined ? undefined : { body: { stallMs: this.stallMs } };
  }

  /** A chat call's promise: what it throws is logged (the chat's own status carries it). */
  run(promise) {
    return Promise.resolve(promise).catch((error) => this.host.log("chat call failed:", chunks.errorText(error)));
  }

  /**
   * The continuation predicate: the SDK's two helpers, and, where clients
   * answered calls of the last step, at least one of them opted in
   * (`auto_continue`). A step no client answered (server tools only) is the
   * helpers' alone to judge.
   */
  continues(messages) {
    const complete =
      lastAssistantMessageIsCompleteWithToolCalls({ messages }) ||
      lastAssistantMessageIsCompleteWithApprovalResponses({ messages });
    if (!complete) return false;
    const answered = lastStepTools(messages.at(-1)).filter((part) => this.optIn.has(part.toolCallId));
    return answered.length === 0 || answered.some((part) => this.optIn.get(part.toolCallId));
  }

  // ---- the transport's requests -------------------------------------------

  /** A request starts: it answers a `chat()` caller when it is the first for the caller's message. */
  requestStarted(request) {
    this.request = request;
    const asked = this.state.messages.findLast((message) => message.role === "user");
    const caller = asked && this.callers.get(asked.id);
    if (caller) {
      this.callers.delete(asked.id);
      request.caller = caller;
      caller.onStart(request.id);
    }
  }

  /** A UI chunk on its way to the chat: clients and the caller see it. */
  requestChunk(request, chunk) {
    const wire = chunks.fromUIChunk(chunk);
    if (!wire || wire.type === "error") return;
    this.host.broadcast({ Chunk: { request_id: request.id, message_id: request.messageId, chunk: wire } });
    request.caller?.onEvent(wire);
  }

  /** The chat's `onFinish`: the message is stored whole, then clients and the caller are told. */
  finished({ message, isError }) {
    const request = this.request;
    this.request = null;
    const kept = this.state.messages.find((candidate) => candidate.id === message.id);
    if (kept) this.persist(kept);
    if (!request) return;
    const error = isError ? chunks.errorText(this.chat.error ?? "the request failed") : null;
    if (error !== null) this.host.broadcast({ Error: { request_id: request.id, message: error } });
    else this.host.broadcast({ Done: { request_id: request.id, continuation: request.continuation } });
    if (request.caller) {
      if (error !== null) request.caller.onError(error);
      else request.caller.onDone();
      request.caller.returned();
    }
  }

  // ---- the state's changes: the store and clients ------------------------

  /** Every push and replace of the chat's state: a user message is stored and shown at once. */
  changed(message, previous) {
    if (message.role === "user") {
      this.persist(message);
      this.host.broadcast({ Messages: this.liveMessages() });
      return;
    }
    for (const frame of toolFrames(message, previous)) this.host.broadcast(frame);
    // Mid-stream, the message is stored when its parts or their states change (not on every delta).
    if (!previous || shape(message) !== shape(previous)) this.persist(message);
  }

  /** Writes a message unless the store already holds it as it is. */
  persist(message) {
    const json = stored.fromUIMessage(message);
    const text = JSON.stringify(json);
    if (this.committed.get(message.id) === text) return;
    // Taken as written at once (the store answers before this returns); forgotten if refused.
    this.committed.set(message.id, text);
    this.commit([Write.putMessage(json)]).then((ok) => {
      if (!ok && this.committed.get(message.id) === text) this.committed.delete(message.id);
    });
  }

  /** Commits writes with the id counter; resolves to whether the store took them. */
  async commit(writes) {
    const reply = await this.host.store.commit([...writes, { NextId: this.nextId }]);
    if (!reply.ok) this.host.log("commit refused:", reply.error);
    return reply.ok;
  }

  // ---- helpers -----------------------------------------------------------

  liveMessages() {
    return this.state.messages.map((message) => stored.fromUIMessage(message));
  }

  findPart(callId) {
    for (const message of this.state.messages) {
      const part = message.parts.find((candidate) => isToolUIPart(candidate) && candidate.toolCallId === callId);
      if (part) return part;
    }
    return undefined;
  }

  toolName(callId) {
    const part = this.findPart(callId);
    return part ? stored.uiToolName(part) : undefined;
  }

  newId(prefix) {
    this.nextId += 1;
    return `${prefix}${this.nextId}`;
  }
}

/** The tool parts of a message's last step. */
function lastStepTools(message) {
  if (!message || message.role !== "assistant") return [];
  const start = message.parts.findLastIndex((part) => part.type === "step-start");
  return message.parts.slice(start + 1).filter(isToolUIPart);
}

/** A message's parts without their text: what changes when a part starts, ends or settles. */
function shape(message) {
  return JSON.stringify(
    message.parts.map((part) =>
      isToolUIPart(part)
        ? [part.type, part.toolCallId, part.state, part.approval?.approved ?? null]
        : [part.type, part.state ?? null],
    ),
  );
}

/** `Tool` frames for each tool part whose state the change moved (not the input still streaming). */
function toolFrames(message, previous) {
  const before = new Map((previous?.parts ?? []).filter(isToolUIPart).map((part) => [part.toolCallId, part.state]));
  return message.parts
    .filter((part) => isToolUIPart(part) && part.state !== "input-streaming" && before.get(part.toolCallId) !== part.state)
    .map((part) => ({ Tool: { call_id: part.toolCallId, tool_name: stored.uiToolName(part), state: part.state } }));
}
