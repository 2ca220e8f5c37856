// One chat session: an `AbstractChat` (the AI SDK's own chat machinery,
// what `useChat` runs) over a minimal `ChatState`, sending through a
// transport that runs `streamText` over the harness's model.
//
// The SDK decides: when a request is sent (`sendMessage`, and the automatic
// continuation `sendAutomaticallyWhen` asks for when a stream ends, after
// `addToolOutput` and after `addToolApprovalResponse`), which part a result
// or approval moves (`addToolOutput` by tool call id,
// `addToolApprovalResponse` by approval id), what happens to a message sent
// while a response runs or a tool waits (`experimental_queue`), and the
// assistant message built from the UI stream (`processUIMessageStream`);
// in the transport, the steps, server tools, approvals, retries and the
// stall timeout (`streamText`). Ours: the protocol's inputs mapped onto
// those calls, the store written from the state's changes, frames,
// `chat()` callbacks and timeline annotations. README.md has the list.

import {
  AbstractChat,
  isToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from "ai";
import { chunks, messages as stored, Write } from "../node/index.mjs";
import { SessionChatState } from "./state.mjs";
import { HarnessTransport } from "./transport.mjs";

/** The opaque store entry holding each client's `auto_continue` by call id (the SDK has no such flag). */
const OPT_IN_KEY = "ai-sdk-chat:auto-continue";
/** What a `chat()` caller whose message the paused queue holds is told. */
const QUEUE_PAUSED = "not sent: the chat's queue is paused after a failed request until the next message";
/** `addToolOutput` needs an error text; the protocol's error may carry none (the built-in engine's default). */
const DEFAULT_TOOL_ERROR = "Tool execution denied by user";

class SessionChat extends AbstractChat {}

export class Session {
  constructor(host) {
    this.host = host;
    this.config = host.config;
    this.nextId = host.store.state.next_id ?? 0;
    this.placeholders = 0;
    /** The request streaming now (the transport's), or null. */
    this.request = null;
    /** The last request's error while it is the chat's last word: `{request_id, message}`, or null. */
    this.failure = null;
    /** Request ids reserved for the request that answers each user message (by message id). */
    this.reserved = new Map();
    /** A client's `auto_continue` for each answered tool call, stored with the result it came with. */
    this.optIn = new Map(Object.entries(host.store.get(OPT_IN_KEY) ?? {}));
    this.optInChanged = false;
    /** Messages a refused commit left unwritten, by id: written with the next commit. */
    this.dirty = new Map();
    /** Results and approvals handed to the chat and not yet seen applied, by call id. */
    this.answers = new Map();
    /** `chat()` callers by the id of the user message they sent. */
    this.callers = new Map();
    /** The last committed JSON of each message, so an unchanged one is not written again. */
    this.committed = new Map(host.store.state.messages.map((message) => [message.id, JSON.stringify(message)]));
    /** The per-turn stall timeout of the last user message, for continuations a result starts. */
    this.stallMs = undefined;
    this.state = new SessionChatState(host.store.state.messages.map(stored.toUIMessage), (message, previous) =>
      this.changed(message, previous),
    );
    this.uiChat = new SessionChat({
      id: "chat",
      state: this.state,
      transport: new HarnessTransport(this),
      // The chat names a response before its stream does; the stream's `start` names it for good.
      generateId: () => `unnamed-${(this.placeholders += 1)}`,
      sendAutomaticallyWhen: ({ messages }) => this.continues(messages),
      experimental_queue: true,
      onFinish: (finish) => this.finished(finish),
      onError: (error) => host.log("chat error:", chunks.errorText(error)),
    });
    // Each model request carries the chat's messages as stored (ids included).
    host.model.transcript = () => this.liveMessages();
  }

  // ---- protocol handlers -------------------------------------------------

  /**
   * A restarted process builds a new `Chat` over the stored messages; a
   * `Chat` has no boot step. Where their last step is a complete batch the
   * continuation was owed, and an app continues a loaded chat as the
   * `useChat` reference says: `sendMessage()` with no message "resubmits
   * the current messages (useful after adding tool outputs)". The chat
   * asks `sendAutomaticallyWhen` only as a stream ends or an output is
   * added, and a load is neither.
   */
  boot() {
    if (this.continues(this.state.messages)) return this.run(this.uiChat.sendMessage(undefined, this.requestOptions()));
    return undefined;
  }

  /** The transcript; and while the chat's status is `error`, the error of the request that failed. */
  async connect(connection) {
    await connection.send({ Messages: this.liveMessages() });
    if (this.uiChat.status === "error" && this.failure) await connection.send({ Error: this.failure });
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

  /**
   * `chat()` is glue over `sendMessage`: the SDK has no server-side call
   * with callbacks. `sendMessage` takes no key, so a call delivered twice
   * is sent twice, as Think's `chat()` takes it (the caller's key is not
   * read: README, "Equal terms").
   */
  async chat(caller, text, options) {
    await this.send(text, options, caller);
  }

  deliver(delivery) {
    this.host.log(`messenger delivery ${delivery} ignored: the AI SDK has no messenger (capabilities.json)`);
  }

  toolResult(result, autoContinue) {
    const outcome = result.outcome;
    const output =
      "Error" in outcome
        ? { state: "output-error", errorText: outcome.Error ?? DEFAULT_TOOL_ERROR }
        : { output: outcome.Output };
    const tool = this.toolName(result.call_id);
    return this.answer(result.call_id, autoContinue, () =>
      this.uiChat.addToolOutput({ tool, toolCallId: result.call_id, ...output, options: this.requestOptions() }),
    );
  }

  /** The protocol names the call; the SDK takes the approval's own id (the call id when it has none). */
  approval(callId, approved, autoContinue) {
    const id = this.findPart(callId)?.approval?.id ?? callId;
    return this.answer(callId, autoContinue, () =>
      this.uiChat.addToolApprovalResponse({ id, approved, options: this.requestOptions() }),
    );
  }

  // ---- the chat ------------------------------------------------------------

  async send(text, options, caller) {
    const requestId = this.newId("r");
    const id = this.newId("m");
    this.reserved.set(id, requestId);
    if (caller) this.callers.set(id, caller);
    this.stallMs = options?.stall_timeout_ms ?? undefined;
    const message = { id, role: "user", parts: [{ type: "text", text }] };
    await this.run(this.uiChat.sendMessage(message, this.requestOptions()));
  }

  /** A result or approval: its `auto_continue` is remembered, and whether the chat applied it annotated. */
  async answer(callId, autoContinue, apply) {
    this.optIn.set(callId, autoContinue);
    this.optInChanged = true;
    this.answers.set(callId, autoContinue);
    await this.run(apply());
    if (this.answers.delete(callId)) this.host.observe({ event: "tool-ignored", call_id: callId });
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

  /** The id of a request the chat sends now: the one reserved for a user message it answers. */
  requestId(messages) {
    const last = messages.at(-1);
    const reserved = last?.role === "user" ? this.reserved.get(last.id) : undefined;
    if (reserved === undefined) return this.newId("r");
    this.reserved.delete(last.id);
    return reserved;
  }

  /** A request starts: it answers a `chat()` caller when it is the first for the caller's message. */
  requestStarted(request, messages) {
    this.request = request;
    this.failure = null;
    const last = messages.at(-1);
    const caller = last?.role === "user" ? this.callers.get(last.id) : undefined;
    const kind = request.continuation ? "continuation" : caller ? "chat" : "user";
    if (request.continuation) this.host.observe({ event: "continuation-fired", request_id: request.id });
    this.host.observe({ event: "turn-started", request_id: request.id, kind, message_id: request.continuation ? last.id : "" });
    request.kind = kind;
    if (caller) {
      this.callers.delete(last.id);
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
  finished({ message, isError, isAbort, finishReason }) {
    const request = this.request;
    this.request = null;
    const kept = this.state.messages.find((candidate) => candidate.id === message.id);
    if (kept && kept.parts.length > 0) this.persist(kept);
    if (!request) return;
    const error = isError ? chunks.errorText(this.uiChat.error ?? "the request failed") : null;
    if (error !== null) {
      this.failure = { request_id: request.id, message: error };
      this.host.broadcast({ Error: this.failure });
    }
    else this.host.broadcast({ Done: { request_id: request.id, continuation: request.continuation } });
    this.host.observe({ event: "turn-finished", request_id: request.id, kind: request.kind, status: error === null ? "completed" : "error" });
    if (request.caller) {
      if (error !== null) request.caller.onError(error);
      else request.caller.onDone();
      request.caller.returned();
    }
    if (isError || isAbort || finishReason === "interrupted") this.releaseQueuedCallers();
  }

  /**
   * A request that failed, was stopped or was interrupted pauses the chat's
   * queue "until the next message is sent" (`experimental_queue`), which
   * may never come: a `chat()` caller whose message waits there would hear
   * nothing. Its message leaves the queue unsent (it was never stored) and
   * the caller is told so.
   */
  releaseQueuedCallers() {
    for (const message of this.uiChat.experimental_queuedMessages) {
      const caller = this.callers.get(message.id);
      if (!caller) continue;
      this.callers.delete(message.id);
      this.uiChat.experimental_removeQueuedMessage(message.id);
      const requestId = this.reserved.get(message.id) ?? this.newId("r");
      this.reserved.delete(message.id);
      caller.onStart(requestId);
      caller.onError(QUEUE_PAUSED);
      caller.returned();
    }
  }

  // ---- the state's changes: the store and clients ------------------------

  /** Every push and replace of the chat's state: a user message is stored and shown at once. */
  changed(message, previous) {
    if (message.role === "user") {
      this.persist(message);
      this.host.observe({ event: "user-message-stored", message_id: message.id });
      this.host.broadcast({ Messages: this.liveMessages() });
      return;
    }
    for (const part of movedTools(message, previous)) this.toolMoved(part);
    // Stored once it has parts (an empty answer shows nothing), then whenever
    // its parts or their states change: not on every delta.
    if (message.parts.length > 0 && (!previous || shape(message) !== shape(previous))) this.persist(message);
  }

  /** A tool part changed: clients see its state; the timeline says whether a client's answer or the stream moved it. */
  toolMoved(part) {
    const name = stored.uiToolName(part);
    if (this.answers.has(part.toolCallId) && part.state !== "input-available" && part.state !== "approval-requested") {
      const autoContinue = this.answers.get(part.toolCallId);
      this.answers.delete(part.toolCallId);
      const into = this.request ? "accumulator" : "store";
      this.host.observe({ event: "tool-applied", call_id: part.toolCallId, state: part.state, into, auto_continue: autoContinue });
    } else if (part.state === "input-available" || part.state === "approval-requested") {
      this.host.observe({ event: "tool-ready", call_id: part.toolCallId, tool_name: name, state: part.state });
    }
    if (part.state !== "input-streaming") this.host.broadcast({ Tool: { call_id: part.toolCallId, tool_name: name, state: part.state } });
    // A `tool` frame says an approval was answered, not how: clients are
    // shown the decision with the transcript, as the built-in engine does.
    if (part.state === "approval-responded") this.host.broadcast({ Messages: this.liveMessages() });
  }

  /**
   * Writes a message unless the store already holds it as it is, with every
   * write a refused commit left owed, and the clients' opt-ins when they
   * changed.
   */
  persist(message) {
    this.dirty.set(message.id, message);
    const taken = [];
    for (const [id, dirty] of this.dirty) {
      const json = stored.fromUIMessage(dirty);
      const text = JSON.stringify(json);
      if (this.committed.get(id) !== text) taken.push({ id, dirty, json, text });
    }
    this.dirty.clear();
    const optIn = this.optInChanged;
    if (taken.length === 0 && !optIn) return;
    this.optInChanged = false;
    // Taken as written at once (the store answers before this returns); owed again if refused.
    for (const write of taken) this.committed.set(write.id, write.text);
    const writes = taken.map((write) => Write.putMessage(write.json));
    if (optIn) writes.push(Write.put(OPT_IN_KEY, Object.fromEntries(this.optIn)));
    this.commit(writes).then((ok) => {
      if (ok) return;
      for (const write of taken) {
        if (this.committed.get(write.id) === write.text) this.committed.delete(write.id);
        if (!this.dirty.has(write.id)) this.dirty.set(write.id, write.dirty);
      }
      if (optIn) this.optInChanged = true;
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
        ? [part.type, part.toolCallId, part.state, part.approval?.approved ?? null, part.output ?? null, part.errorText ?? null]
        : [part.type, part.state ?? null],
    ),
  );
}

/** The tool parts a change moved: a new state, output or approval. */
function movedTools(message, previous) {
  const before = new Map((previous?.parts ?? []).filter(isToolUIPart).map((part) => [part.toolCallId, toolKey(part)]));
  return message.parts.filter((part) => isToolUIPart(part) && before.get(part.toolCallId) !== toolKey(part));
}

function toolKey(part) {
  return JSON.stringify([part.state, part.output ?? null, part.errorText ?? null, part.approval ?? null]);
}
