// One chat session (think: one Durable Object running @cloudflare/think),
// built from the components `agents/chat` publishes. Cloudflare's code
// decides: `AutoContinuationController` (every continuation: coalesce,
// stream-active gate, batch barrier, deferred follow-ups), `TurnQueue`
// (turns one at a time), `StreamAccumulator` (the in-flight assistant
// message from UI stream chunks), `toolResultUpdate` / `toolApprovalUpdate`
// / `applyToolUpdate` (which parts a result or approval moves),
// `hasIncompleteToolBatch`, `drainInteractionApplies`,
// `repairInterruptedToolParts` (before every inference),
// `iterateWithStallWatchdog` (the stall), and `ChatRecoveryEngine`
// (recovery.mjs). The AI SDK runs the steps, the server tools and the
// approvals (`streamText`). What is ours is the wiring, in the order Think
// wires it, and the translation to the protocol's frames and store.

import {
  AutoContinuationController,
  ChatStreamStalledError,
  retryAfterSeconds,
  ContinuationState,
  StreamAccumulator,
  TurnQueue,
  applyToolUpdate,
  drainInteractionApplies,
  hasIncompleteToolBatch,
  iterateWithStallWatchdog,
  partAwaitsClientInteraction,
  repairInterruptedToolParts,
  toolApprovalUpdate,
  toolResultUpdate,
} from "agents/chat";
import { convertToModelMessages, stepCountIs, streamText } from "ai";
import { aiSdkTools, chunks, isClientTool, messages as stored, Write } from "../node/index.mjs";
import { Recovery } from "./recovery.mjs";
import { Messenger } from "./messenger.mjs";

export const REPAIR_TEXT = "The tool call was interrupted before a result was recorded.";
const TURN_KEY = "cf:turn";
/** `ResumableStream` packs this many stored chunks into one segment before it appends it to the log (`CHUNK_BUFFER_SIZE`). */
const SEGMENT_CHUNKS = 10;
/**
 * A failed look at what a dead process left is tried again at the next
 * alarm housekeeping: the keep-alive heartbeat of the fiber that died
 * (`DEFAULT_KEEP_ALIVE_INTERVAL_MS`).
 */
const KEEP_ALIVE_MS = 30_000;
/** Where a continuation is asked from: the protocol does not say which connection sent a result. */
const CLIENT = { id: "client", send() {} };

export class Session {
  constructor(host) {
    this.host = host;
    this.config = host.config;
    this.messages = host.store.state.messages.map(stored.toUIMessage);
    // Each model request carries the transcript as stored (ids included),
    // with the streaming message as it stands.
    host.model.transcript = () => {
      const live = this.streaming ? this.streaming.accumulator.mergeInto(this.messages) : this.messages;
      return live.map((message) => stored.fromUIMessage(message));
    };
    this.nextId = host.store.state.next_id ?? 0;
    /** The turn streaming now: {requestId, messageId, accumulator}, or null. */
    this.streaming = null;
    this.continuation = new ContinuationState();
    AutoContinuationController.COALESCE_MS = this.config.coalesce_ms;
    this.barrier = new AutoContinuationController(this.continuationHost());
    this.turns = new TurnQueue();
    this.applyTail = Promise.resolve();
    this.pendingApply = null;
    this.tools = aiSdkTools(this.host, this.config, () => this.currentRequestId());
    this.recovery = new Recovery(this);
    this.messenger = new Messenger(this);
  }

  // ---- protocol handlers -------------------------------------------------

  async boot() {
    this.recovery.restoreAlarms();
    await this.lookAtDeadTurn(this.host.store.get(TURN_KEY) ?? this.seededTurn());
    await this.messenger.restore();
  }

  /**
   * A turn the store says was in flight in its own vocabulary (`in_flight`,
   * as a scenario seeds a dead predecessor's store): read as this engine's
   * turn record, and cleared the same way.
   */
  seededTurn() {
    const seeded = this.host.store.state.in_flight;
    if (!seeded) return undefined;
    const message = this.messages.find((m) => m.id === seeded.message_id);
    return {
      requestId: seeded.request_id,
      kind: seeded.kind,
      rootRequestId: seeded.root_request_id || undefined,
      delivery: seeded.delivery_id ?? undefined,
      streamed: Boolean(seeded.stream_started) || (message ? hasContent(message) : false),
      seeded: true,
    };
  }

  /** The dead turn's record as the store holds it now, and the write that clears it. */
  deadRecordFor(dead) {
    if (dead.seeded) {
      const stored = this.host.store.state.in_flight;
      return { present: stored?.request_id === dead.requestId, clear: { InFlight: null } };
    }
    return { present: this.host.store.get(TURN_KEY)?.requestId === dead.requestId, clear: this.turnRecordCleared() };
  }

  /**
   * The turn a dead predecessor left running, as agents' `_checkRunFibers`
   * treats its fiber row: the recovery hook first, then the row goes. A
   * hook that throws (the store refused the incident) is logged and the row
   * kept, and the next alarm housekeeping (the dead fiber's keep-alive
   * heartbeat) looks again; nothing is thrown out of boot.
   */
  async lookAtDeadTurn(dead) {
    if (!dead || !this.deadRecordFor(dead).present) return;
    try {
      if (!dead.recovered) {
        // A delivery that had not streamed yet is answered again by the messenger instead.
        const delivery = dead.delivery && this.host.store.state.deliveries[dead.delivery];
        if (delivery?.stage !== "accepted") await this.recovery.recoverInterrupted(dead);
        dead.recovered = true;
      }
      const record = this.deadRecordFor(dead);
      if (record.present) await this.commit([record.clear].flat());
    } catch (error) {
      if (!(error instanceof StoreRefused)) throw error;
      this.host.log("recovering the interrupted turn failed:", error.message);
      setTimeout(() => this.lookAtDeadTurn(dead).catch((failure) => this.host.log("looking again failed:", failure)), KEEP_ALIVE_MS);
    }
  }

  /** The transcript, then agents' on-connect "recovering…" replay when a recovery is under way. */
  async connect(connection) {
    await connection.send({ Messages: this.liveMessages() });
    const recovering = this.recovery.recoveringFrame();
    if (recovering) await connection.send(recovering);
  }

  /** The resume handshake as Think's chat harness runs it: offer the running turn and hold the connection until its ack. */
  resumeRequest(connection) {
    if (!this.streaming) return connection.send("ResumeNone");
    connection.held = this.streaming.requestId;
    return connection.send({ StreamResuming: { request_id: this.streaming.requestId } });
  }

  /** Think replays the turn's chunks here; in this vocabulary the live transcript says the same. */
  resumeAck(connection, requestId) {
    if (connection.held !== requestId) return undefined;
    connection.held = false;
    return connection.send({ Messages: this.liveMessages() });
  }

  /**
   * A user message over the connection. Think's WebSocket path stores it
   * before it queues the turn (`_reconcileAndPersistIncoming`, then
   * `_admitTurn`): the message is stored and shown to clients on arrival,
   * even while another turn runs, and appended to the conversation as it
   * stands (Think's session appends under its latest leaf); the turn's
   * record is written when the turn starts. Its turn waits in the turn
   * queue, in memory. A message the store refuses is not queued: the
   * error goes to the clients (Think's `failureStage: "persist"`).
   */
  async userMessage(text, options) {
    const requestId = this.newId("r");
    const message = { id: this.newId("m"), role: "user", parts: [{ type: "text", text }] };
    try {
      await this.commit([Write.putMessage(stored.fromUIMessage(message, REPAIR_TEXT))]);
    } catch (error) {
      if (!(error instanceof StoreRefused)) throw error;
      this.host.observe({ event: "store-refused" });
      await this.host.broadcast({ Error: { request_id: requestId, message: error.message } });
      return undefined;
    }
    this.messages.push(message);
    this.host.observe({ event: "user-message-stored", message_id: message.id });
    await this.host.broadcast({ Messages: this.liveMessages() });
    return this.enqueueTurn({ requestId, kind: "user", userText: text, userStored: true, options });
  }

  /** `chat()`: on_start first (before the turn is queued, as Think does), `returned` when it resolves. */
  async chat(chat, text, options) {
    const requestId = this.newId("r");
    chat.onStart(requestId);
    await this.enqueueTurn({ requestId, kind: "chat", userText: text, options, chat });
    chat.returned();
  }

  deliver(delivery, text) {
    return this.messenger.deliver(delivery, text);
  }

  toolResult(result, autoContinue) {
    const outcome = result.outcome;
    const update =
      "Error" in outcome
        ? toolResultUpdate(result.call_id, undefined, "output-error", outcome.Error ?? undefined)
        : toolResultUpdate(result.call_id, outcome.Output);
    this.interaction(update, autoContinue);
  }

  /**
   * An approval reaches Think as the published client sends one:
   * `useAgentChat` finds the call by the approval id its part carries and
   * sends nothing for a part that carries none (agents `chat/react.js`,
   * `addToolApprovalResponseAndNotifyServer`). The AI SDK engine's `Chat`
   * drops the same approval (`addToolApprovalResponse` matches approval ids).
   */
  approval(callId, approved, autoContinue) {
    if (this.askedNoApproval(callId)) {
      this.host.observe({ event: "tool-ignored", call_id: callId });
      return;
    }
    this.interaction(toolApprovalUpdate(callId, approved), autoContinue);
  }

  /**
   * Whether the call's part, stored or streaming, carries no approval, so a
   * client was never given one to answer. A call this process does not hold
   * (its request was lost with a predecessor) may be one a client was asked
   * about: its approval goes to Think.
   */
  askedNoApproval(callId) {
    const live = this.streaming ? this.streaming.accumulator.mergeInto(this.messages) : this.messages;
    const part = live.flatMap((message) => message.parts).find((candidate) => candidate.toolCallId === callId);
    return part !== undefined && part.approval == null;
  }

  // ---- tool results, approvals and the continuation barrier --------------

  /** As Think's handlers: enqueue the apply, then schedule or re-arm the barrier. */
  interaction(update, autoContinue) {
    this.enqueueApply(() => this.applyInteraction(update, autoContinue));
    if (autoContinue) {
      this.host.observe({ event: "continuation-pending", message_id: this.leafAssistant()?.id ?? "" });
      this.barrier.schedule({ connection: CLIENT, clientTools: undefined, body: undefined, errorPrefix: "continuation failed:" });
    } else {
      this.barrier.rearmForBatch();
    }
  }

  /** Applies serialise on one tail, so a rejected apply does not poison the next. */
  enqueueApply(run) {
    const link = this.applyTail.then(run, run).catch((error) => this.host.log("apply failed:", error));
    this.applyTail = link;
    this.pendingApply = link;
    link.finally(() => {
      if (this.pendingApply === link) this.pendingApply = null;
    });
  }

  /** Into the streaming accumulator if the part is there, else the first stored message that has it. */
  async applyInteraction(update, autoContinue) {
    const applied = async (part, into) => {
      this.host.observe({ event: "tool-applied", call_id: update.toolCallId, state: part.state, into, auto_continue: autoContinue });
      await this.host.broadcast(toolFrame(part));
      // Think's `_applyToolUpdateToMessages` broadcasts the updated message (`MSG_MESSAGE_UPDATED`).
      await this.host.broadcast({ Messages: this.liveMessages() });
    };
    const accumulator = this.streaming?.accumulator;
    const live = accumulator && applyToolUpdate(accumulator.parts, update);
    if (live) {
      accumulator.parts[live.index] = live.parts[live.index];
      return applied(live.parts[live.index], "accumulator");
    }
    for (const message of this.messages) {
      const found = applyToolUpdate(message.parts, update);
      if (!found) continue;
      message.parts = found.parts;
      await this.persist(message);
      return applied(found.parts[found.index], "store");
    }
    this.host.observe({ event: "tool-ignored", call_id: update.toolCallId });
  }

  continuationHost() {
    return {
      continuation: this.continuation,
      generateRequestId: () => this.newId("r"),
      isStreamActive: () => this.streaming !== null,
      hasPendingInteraction: () => this.pendingApply !== null,
      hasIncompleteToolBatch: () => hasIncompleteToolBatch(this.messages),
      drainInteractionApplies: () =>
        drainInteractionApplies(
          () => this.continuation.pending !== null,
          () => this.applyTail,
        ),
      keepAliveWhile: (fn) => fn(),
      fire: () => this.fireContinuation(),
    };
  }

  /**
   * The controller decided: run the continuation turn for
   * `continuation.pending` (Think's `_fireAutoContinuation`: the turn marks
   * the pending continuation past coalesce when it starts, and clears it and
   * activates a deferred follow-up when it ends).
   */
  fireContinuation() {
    const pending = this.continuation.pending;
    if (!pending) return;
    this.host.observe({ event: "continuation-fired", request_id: pending.requestId });
    const turn = { requestId: pending.requestId, kind: "continuation", continuation: true };
    this.enqueueTurn(turn).finally(() => this.settleContinuationTurn(turn.requestId, turn.streamStarted === true));
  }

  /**
   * Think 0.23.0's `_settleContinuationTurn` (#2443): the turn owns
   * `pending` only until its stream starts (then it is the active one), so
   * `pending` is cleared only while it still holds this turn's request; a
   * newer pending that has not started covers the deferred follow-up.
   */
  settleContinuationTurn(requestId, streamed) {
    const pending = this.continuation.pending;
    if (pending?.requestId === requestId) {
      if (!streamed) this.continuation.sendResumeNone();
      this.continuation.clearPending();
    } else if (pending && !pending.pastCoalesce) this.continuation.clearDeferred();
    this.barrier.activateDeferredAndReschedule();
  }

  // ---- turns -------------------------------------------------------------

  enqueueTurn(turn) {
    this.host.observe({ event: "turn-queued", request_id: turn.requestId, kind: turn.kind });
    return this.turns.enqueue(turn.requestId, () => this.runTurn(turn)).catch((error) => this.host.log("turn failed:", error));
  }

  /** The recovery continuation an alarm runs (Think's `_chatRecoveryContinue`). */
  async runRecoveryTurn(alarm, rootRequestId) {
    const requestId = this.newId("r");
    const retry = alarm.callback === "_chatRecoveryRetry";
    this.recovery.activeRootRequestId = rootRequestId;
    let status;
    try {
      status = await this.turns.enqueue(requestId, () =>
        this.runTurn({ requestId, kind: "recovery", continuation: !retry, rootRequestId, retry }),
      );
    } finally {
      this.recovery.activeRootRequestId = undefined;
    }
    const outcome = status.status === "completed" ? status.value : "error";
    if (outcome === "completed") await this.recovery.finished(alarm.data?.incidentId, "completed");
    else if (outcome === "error") await this.recovery.finished(alarm.data?.incidentId, "failed", "recovery_error");
  }

  /** One turn; a commit the store refuses fails it (the caller and clients are told). */
  async runTurn(turn) {
    try {
      return await this.runTurnSteps(turn);
    } catch (error) {
      if (!(error instanceof StoreRefused)) throw error;
      // Think runs a recovery turn in a fiber (`_runChatRecoveryFiber`, a Task run): a refused start of
      // its run row throws out of the recovery callback, which gives up with `recovery_error`
      // (`_handleRecoveryCallbackError`, Recovery.attempt), instead of failing the turn.
      if (turn.kind === "recovery" && !turn.streamStarted) {
        this.host.observe({ event: "store-refused" });
        throw error;
      }
      return this.failTurn(turn, error.message);
    }
  }

  /** Store the user message, repair, stream every step, finalise. Resolves to the turn's status. */
  async runTurnSteps(turn) {
    if (turn.userText !== undefined && !turn.userStored) await this.storeUserMessage(turn.userText, turn);
    await this.repair();
    if (turn.kind === "continuation" && this.continuation.pending) this.continuation.pending.pastCoalesce = true;
    const leaf = this.messages.at(-1);
    const continues = turn.continuation && leaf?.role === "assistant";
    const messageId = continues ? leaf.id : (turn.replaces ?? turn.replyId ?? this.newId("m"));
    // The dead reply the new answer replaces keeps its place (a later message may follow it); it is not shown to the model.
    if (turn.replaces) this.messages = this.messages.map((message) => (message.id === turn.replaces ? { ...message, parts: [] } : message));
    turn.messageId = messageId;
    this.host.observe({ event: "turn-started", request_id: turn.requestId, kind: turn.kind, message_id: messageId });
    if (!turn.recorded) await this.commit(this.turnRecordWrites(turn, false));
    const accumulator = new StreamAccumulator({ messageId, continuation: continues, existingParts: continues ? structuredClone(leaf.parts) : undefined });
    this.streaming = { requestId: turn.requestId, messageId, accumulator, segment: { buffered: 0, sinceFlush: 0, hasFlushedContent: false } };
    // Think's `_streamResult`: the stream of the pending continuation starts, so it moves to the active slot.
    if (this.continuation.pending?.requestId === turn.requestId) this.continuation.activatePending();
    turn.streamStarted = true;
    const end = await this.stream(turn, accumulator);
    return this.finishTurn(turn, end);
  }

  /**
   * Think's turn appends the message and starts the turn's fiber (its run
   * row) with no I/O between them, so the Durable Object commits both
   * together: the message and the turn's record are one commit here.
   */
  async storeUserMessage(text, turn) {
    const message = { id: this.newId("m"), role: "user", parts: [{ type: "text", text }] };
    // The reply's id is drawn with the message's (the next one, as before), so the turn's record names it.
    turn.replyId = turn.replaces ?? this.newId("m");
    this.messages.push(message);
    await this.commit([Write.putMessage(stored.fromUIMessage(message, REPAIR_TEXT)), ...this.turnRecordWrites(turn, false)]);
    turn.recorded = true;
    this.host.observe({ event: "user-message-stored", message_id: message.id });
    await this.host.broadcast({ Messages: this.liveMessages() });
  }

  /** Think repairs every unsettled tool call before each inference. */
  async repair() {
    const repairPart = (part) => ({ ...part, state: "output-error", errorText: REPAIR_TEXT });
    const result = repairInterruptedToolParts(this.messages, { repairPart });
    if (result.toolCallIds.length === 0) return;
    const changed = result.messages.filter((message, at) => message !== this.messages[at]);
    this.messages = result.messages;
    for (const message of changed) await this.persist(message);
    this.host.observe({ event: "repaired", call_ids: result.toolCallIds });
    await this.host.broadcast({ Messages: this.liveMessages() });
  }

  /** Streams the turn's steps; resolves to how the stream ended. */
  async stream(turn, accumulator) {
    const abort = new AbortController();
    const stallMs = turn.options?.stall_timeout_ms ?? this.config.stall_timeout_ms;
    const ended = { error: null, stalled: false, transient: undefined, retryAfter: undefined };
    // The provider's error behind an in-stream error chunk (Think's `streamErrorCause`).
    let cause;
    try {
      const result = streamText({
        model: this.host.model,
        messages: await convertToModelMessages(
          this.messages.filter((message) => message.parts.length > 0),
          { tools: this.tools, ignoreIncompleteToolCalls: true },
        ),
        tools: this.tools,
        stopWhen: stepCountIs(this.config.max_steps),
        // The scenario's budget of model calls per step for 429/5xx, as the AI SDK's retry count.
        maxRetries: Math.max(0, (this.config.max_model_calls_http_retry ?? 3) - 1),
        abortSignal: abort.signal,
        providerOptions: { turnsim: { requestId: turn.requestId, continuation: !!turn.continuation } },
      });
      const onError = (error) => {
        cause = error;
        return chunks.errorText(error);
      };
      const ui = result.toUIMessageStream({ sendReasoning: true, onError });
      const onStall = () => abort.abort(new ChatStreamStalledError(`Chat stream stalled: no activity for ${stallMs}ms`));
      for await (const chunk of iterateWithStallWatchdog(ui, stallMs, onStall)) {
        if (chunk.type === "error") {
          // Think 0.23.0: an in-stream error the app classifies transient leaves the drain loop for recovery.
          const classification = classifyChatError(cause ?? chunk.errorText);
          if (classification) {
            ended.transient = classification;
            ended.retryAfter = classification === "rate_limit" ? retryAfterSeconds(cause) : undefined;
            break;
          }
        }
        await this.onChunk(turn, accumulator, chunk, ended);
      }
    } catch (error) {
      if (error instanceof StoreRefused) {
        abort.abort(error);
        throw error;
      }
      if (error?.isChatStreamStall) ended.stalled = true;
      else {
        const classification = classifyChatError(error);
        if (classification) {
          ended.transient = classification;
          ended.retryAfter = classification === "rate_limit" ? retryAfterSeconds(error) : undefined;
        } else ended.error ??= chunks.errorText(error);
      }
    }
    return ended;
  }

  /**
   * The store refused a write of this turn: clients are shown the stored
   * message again (what they saw streamed is not kept), and the caller and
   * clients get the error.
   */
  async failTurn(turn, message) {
    this.streaming = null;
    this.messages = this.host.store.state.messages.map(stored.toUIMessage);
    this.host.observe({ event: "store-refused" });
    if (turn.messageId) {
      let kept = this.host.store.state.messages.find((m) => m.id === turn.messageId);
      // Nothing streams into the kept partial any more: its text is done.
      // (If the store refuses this too, the next turn's write settles it.)
      if (kept?.parts.some((part) => part.state === "streaming")) {
        const settled = settleText(kept);
        const reply = await this.host.store.commit([Write.putMessage(settled)]);
        if (reply.ok) {
          kept = settled;
          this.messages = this.host.store.state.messages.map(stored.toUIMessage);
        }
      }
      const shown = kept ?? { id: turn.messageId, role: "assistant", parts: [] };
      await this.host.broadcast({ Reset: { request_id: turn.requestId, message: shown } });
    }
    await this.host.broadcast({ Error: { request_id: turn.requestId, message } });
    turn.chat?.onError(message);
    // The turn's fiber ends whatever its outcome, and agents deletes its run row as it finalizes
    // (`runFiber`; a row it cannot delete is left for recovery): a failed turn is not recovered by a restart.
    if (this.host.store.get(TURN_KEY)?.requestId === turn.requestId) {
      await this.commit(this.turnRecordCleared()).catch((error) => this.host.log("clearing the failed turn's record:", error.message));
    }
    if (turn.messageId) this.host.observe({ event: "turn-finished", request_id: turn.requestId, kind: turn.kind, status: "error" });
    return "error";
  }

  async onChunk(turn, accumulator, chunk, ended) {
    const result = accumulator.applyChunk(chunk);
    if (chunk.type === "error") ended.error = chunk.errorText ?? "error";
    if (result.action?.type === "cross-message-tool-update") await this.crossMessageUpdate(result.action);
    const wireChunk = chunks.fromUIChunk(chunk);
    if (wireChunk && wireChunk.type !== "error") {
      await this.host.broadcast({ Chunk: { request_id: turn.requestId, message_id: accumulator.messageId, chunk: wireChunk } });
      turn.chat?.onEvent(wireChunk);
    }
    // A tool part of this message (a cross-message update has none here).
    const part = chunk.toolCallId ? (accumulator.parts.find((p) => p.toolCallId === chunk.toolCallId) ?? null) : null;
    if (part && (chunk.type === "tool-input-available" || chunk.type === "tool-approval-request")) {
      this.host.observe({ event: "tool-ready", call_id: part.toolCallId, tool_name: stored.uiToolName(part), state: part.state });
    }
    if (part && /^tool-(input-available|approval-request|output-)/.test(chunk.type)) await this.host.broadcast(toolFrame(part));
    // Think breaks out of the drain loop on an error chunk without storing it.
    if (chunk.type !== "error") await this.storeChunk(turn, accumulator, chunk);
  }

  /** An approved server tool ran in a later turn: its part lives in an earlier message. */
  async crossMessageUpdate(action) {
    for (const message of this.messages) {
      const at = message.parts.findIndex((part) => part.toolCallId === action.toolCallId);
      if (at < 0) continue;
      const part = { ...message.parts[at], state: action.updateType };
      if (action.updateType === "output-available") part.output = action.output;
      else part.errorText = action.errorText;
      message.parts = message.parts.with(at, part);
      await this.persist(message);
      return this.host.broadcast(toolFrame(part));
    }
  }

  /**
   * Think's `_storeChunkDurably` over agents' `ResumableStream`: every chunk
   * is stored in a buffer that is appended to the stream log as one segment
   * when it holds ten chunks, and Think flushes it at once for a settled
   * tool result and for the first content delta (text, reasoning, a tool
   * input) and every one ten chunks after the last flush. The progress
   * marker recovery reads counts the segments appended. Here the log is the
   * stored partial: each segment commits the message as it stands, the
   * marker and the turn's record together.
   */
  async storeChunk(turn, accumulator, chunk) {
    const segment = this.streaming.segment;
    segment.buffered += 1;
    segment.sinceFlush += 1;
    if (segment.buffered >= SEGMENT_CHUNKS) await this.appendSegment(turn, accumulator);
    const settles = chunk.type === "tool-output-available" || chunk.type === "tool-output-error" || chunk.type === "tool-output-denied";
    const content = chunk.type === "text-delta" || chunk.type === "reasoning-delta" || chunk.type === "tool-input-available";
    if (settles || (content && (!segment.hasFlushedContent || segment.sinceFlush >= SEGMENT_CHUNKS))) {
      await this.appendSegment(turn, accumulator);
      segment.sinceFlush = 0;
      segment.hasFlushedContent = true;
    }
  }

  /** `flushBuffer`: the buffered chunks become one segment (nothing when none are buffered). */
  async appendSegment(turn, accumulator) {
    const segment = this.streaming.segment;
    if (segment.buffered === 0) return;
    segment.buffered = 0;
    const message = accumulator.toMessage();
    const writes = [this.recovery.progressWrite(), ...this.turnRecordWrites(turn, hasContent(message))];
    if (message.parts.length > 0) {
      this.messages = accumulator.mergeInto(this.messages);
      writes.unshift(Write.putMessage(stored.fromUIMessage(message, REPAIR_TEXT)));
    }
    await this.commit(writes);
  }

  /**
   * The stream is over. As Think's `_streamResult`: the last buffered chunks
   * go to the log and the message is persisted with the stream's cutover
   * (one commit, which also clears the turn's record) before clients and
   * the caller are told; a refused cutover fails the turn before anyone was
   * told it ended. Then the barrier is re-checked.
   */
  async finishTurn(turn, end) {
    const accumulator = this.streaming.accumulator;
    if (end.stalled || end.transient) return this.interrupted(turn, accumulator, end);
    const message = settleText(accumulator.toMessage());
    const writes = this.turnRecordCleared();
    if (this.streaming.segment.buffered > 0) writes.unshift(this.recovery.progressWrite());
    if (message.parts.length > 0) writes.unshift(Write.putMessage(stored.fromUIMessage(message, REPAIR_TEXT)));
    await this.commit(writes);
    this.streaming = null;
    if (message.parts.length > 0) this.messages = accumulator.mergeInto(this.messages).map((m) => (m.id === message.id ? message : m));
    let status = "completed";
    if (end.error) {
      status = "error";
      await this.host.broadcast({ Error: { request_id: turn.requestId, message: end.error } });
      turn.chat?.onError(end.error);
    } else {
      await this.host.broadcast({ Done: { request_id: turn.requestId, continuation: !!turn.continuation } });
      turn.chat?.onDone();
    }
    this.host.observe({ event: "turn-finished", request_id: turn.requestId, kind: turn.kind, status });
    // Think's `_onStreamingTurnFinalized`.
    this.barrier.rearmForBatch();
    return status;
  }

  /**
   * A watchdog stall, or a stream error the app classified transient
   * (`classifyChatError`, Think 0.23.0): bounded recovery if enabled
   * (on_interrupted), else the turn ends with the error. The finalize does
   * not re-arm the barrier after a turn routed to recovery (#1671).
   */
  async interrupted(turn, accumulator, end) {
    const stallMs = turn.options?.stall_timeout_ms ?? this.config.stall_timeout_ms;
    if (end.stalled) this.host.observe({ event: "stream-stalled", request_id: turn.requestId, timeout_ms: stallMs });
    if (!this.config.recovery.enabled) {
      const message = end.stalled
        ? `Chat stream stalled: no activity for ${stallMs}ms; the turn was aborted by the stall watchdog.`
        : `The model stream failed (${end.transient}).`;
      return this.finishTurn(turn, { error: message });
    }
    const partial = settleText(accumulator.toMessage());
    let persisted;
    const persistPartial = async () => {
      if (persisted !== undefined) return persisted;
      if (partial.parts.length === 0) return undefined;
      await this.commit([Write.putMessage(stored.fromUIMessage(partial, REPAIR_TEXT))]);
      this.messages = accumulator.mergeInto(this.messages).map((m) => (m.id === partial.id ? partial : m));
      persisted = partial.id;
      await this.host.broadcast({ Messages: this.liveMessages() });
      return persisted;
    };
    // Think's `_routeStreamInterruption`: a throw from the routing (a write the store refused) is logged
    // and the routing is "failed"; the turn then ends as any stream error does (`_streamResult`'s error
    // path): the partial persisted, the error delivered, and the finalize re-arms the barrier, so a
    // continuation held while the stream was open can run. The incident it opened is left as it was (finding 10).
    let routed;
    try {
      routed = await this.recovery.routeInterruption(turn, {
        partialParts: partial.parts,
        persistPartial,
        backoff: !end.stalled,
        retryAfterSeconds: end.retryAfter,
      });
    } catch (error) {
      if (!(error instanceof StoreRefused)) throw error;
      this.host.log("routing a stream interruption into recovery failed; delivering the terminal error:", error.message);
      const message = end.stalled
        ? `Chat stream stalled: no activity for ${stallMs}ms; the turn was aborted by the stall watchdog.`
        : `The model stream failed (${end.transient}).`;
      return this.finishTurn(turn, { error: message });
    }
    // `_completeResumableStream(streamId, "recovering")`: the routing is done and the caller is owed its
    // interruption, so a refused record here is logged, not turned into a failure of a turn recovery now owns.
    const writes = this.turnRecordCleared();
    if (this.streaming.segment.buffered > 0) writes.unshift(this.recovery.progressWrite());
    await this.commit(writes).catch((error) => {
      if (!(error instanceof StoreRefused)) throw error;
      this.host.log("ending the interrupted turn:", error.message);
    });
    this.streaming = null;
    if (routed === "scheduled") await this.host.broadcast({ Done: { request_id: turn.requestId, continuation: !!turn.continuation } });
    turn.chat?.onInterrupted();
    this.host.observe({ event: "turn-finished", request_id: turn.requestId, kind: turn.kind, status: "interrupted" });
    return "interrupted";
  }

  /**
   * A recovery that gave up: the terminal message, and the recovery status
   * cleared. Cloudflare's engine clears it itself on the completed, skipped
   * and failed transitions, but an exhaustion seals the incident directly
   * and leaves clearing it to the host's terminalize step.
   */
  async terminalize(requestId, message) {
    await this.host.broadcast({ Error: { request_id: requestId, message } });
    await this.recovery.setRecovering(false);
  }

  // ---- helpers -----------------------------------------------------------

  /** What a restarted process needs to know about the turn that was running. */
  turnRecord(turn, streamed) {
    return { requestId: turn.requestId, kind: turn.kind, rootRequestId: turn.rootRequestId, delivery: turn.delivery, streamed };
  }

  /**
   * The running turn's record, written twice in one commit: agents' fiber
   * row (`cf:turn`, the opaque entry a restarted process reads back) and
   * the store vocabulary's `InFlight`, which the oracle reads and a
   * `stored: in-flight` / `removed: in-flight` fault names (as the
   * recovery records are, recovery.mjs).
   */
  turnRecordWrites(turn, streamed) {
    const inFlight = {
      request_id: turn.requestId,
      kind: turn.kind,
      root_request_id: turn.rootRequestId ?? turn.requestId,
      message_id: turn.messageId ?? turn.replyId ?? "",
      stream_started: streamed,
      delivery_id: turn.delivery ?? null,
    };
    return [Write.put(TURN_KEY, this.turnRecord(turn, streamed)), { InFlight: inFlight }];
  }

  /** The turn's record goes: both of its writes (`turnRecordWrites`). */
  turnRecordCleared() {
    return [Write.remove(TURN_KEY), { InFlight: null }];
  }

  currentRequestId() {
    return this.streaming?.requestId ?? this.turns.activeRequestId ?? "";
  }

  newId(prefix) {
    this.nextId += 1;
    return `${prefix}${this.nextId}`;
  }

  /** Commits writes with the id counter; a refused commit throws `StoreRefused` (the turn fails). */
  async commit(writes) {
    const reply = await this.host.store.commit([...writes, { NextId: this.nextId }]);
    if (!reply.ok) throw new StoreRefused(`The conversation could not be saved: ${reply.error ?? "the store refused the write"}`);
  }

  persist(message) {
    return this.commit([Write.putMessage(stored.fromUIMessage(message, REPAIR_TEXT))]);
  }

  leafAssistant() {
    return this.messages.findLast((message) => message.role === "assistant");
  }

  /** The stored transcript with the streaming message as it stands. */
  liveMessages() {
    const live = this.streaming ? this.streaming.accumulator.mergeInto(this.messages) : this.messages;
    return live.map((message) => stored.fromUIMessage(message, REPAIR_TEXT));
  }

  /** Think's `hasPendingInteraction`: an approval request, or a client tool waiting for its result. */
  awaitsClientInteraction() {
    const clientTools = new Set(Object.keys(this.config.tools ?? {}).filter((name) => isClientTool(this.config, name)));
    const parts = this.messages.filter((m) => m.role === "assistant").flatMap((m) => m.parts);
    return parts.some((part) => {
      const name = stored.uiToolName(part);
      if (name !== null && !(name in (this.config.tools ?? {}))) clientTools.add(name);
      return partAwaitsClientInteraction(part, clientTools);
    });
  }

  /** The partial the last assistant message holds, for recovery. */
  partial() {
    const leaf = this.leafAssistant();
    const parts = leaf?.parts ?? [];
    const text = parts.filter((part) => part.type === "text").map((part) => part.text).join("");
    return { text, parts, hasSettledToolResults: false };
  }
}

export class StoreRefused extends Error {}

/**
 * The app's `classifyChatError` (Think 0.23.0 routes `"transient"` and
 * `"rate_limit"` into bounded recovery, like a stall). Think ships no
 * default for these; this app classifies as the hook's documentation
 * suggests for an HTTP provider: 429 is a rate limit, 5xx transient, and
 * nothing else (a cut connection, a 4xx, the AI SDK's retries spent) is.
 */
export function classifyChatError(error) {
  const status = typeof error === "object" && error !== null ? error.statusCode : undefined;
  if (status === 429) return "rate_limit";
  if (typeof status === "number" && status >= 500 && status <= 599) return "transient";
  return undefined;
}

/** A message with more than step boundaries: something recovery can continue. */
function hasContent(message) {
  return message.parts.some((part) => part.type !== "step-start");
}

/** The `Tool` frame for a tool part's state. */
function toolFrame(part) {
  return { Tool: { call_id: part.toolCallId, tool_name: stored.uiToolName(part), state: part.state } };
}

/** A finished turn's text and reasoning parts are done. */
function settleText(message) {
  const parts = message.parts.map((part) => (part.type === "text" || part.type === "reasoning" ? { ...part, state: "done" } : part));
  return { ...message, parts };
}
