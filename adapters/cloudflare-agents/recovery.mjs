// Bounded recovery: Cloudflare's `ChatRecoveryEngine` over an adapter of
// ours. The engine decides (the incident budget, debounce, no-progress
// window, give-up and its `onExhausted` ordering); the adapter is its I/O:
// incidents are store entries, "schedule a recovery" is a durable alarm
// entry plus a virtual timer, progress is a durable counter bumped when
// streamed output is flushed, and the terminal message is an `Error` frame
// to every client.
//
// Each incident and schedule row is written twice in one commit: as the
// opaque entry agents reads back (its own shape: attempts in flight,
// transient retries, the callback and its payload, which a restarted
// process restores from), and as the store vocabulary's recovery record
// (`PutIncident` / `RemoveIncident`, `PutAlarm` / `RemoveAlarm`), which is
// what the oracle reads. The mapping:
// - an incident `attempting` or `scheduled` is a typed incident
//   `attempting` (a recovery under way); `exhausted` and `failed` are typed
//   incidents of that status (ended, kept, as agents keeps them);
// - `skipped` (parked for a client, or stood down) and `completed` (agents
//   deletes the row) close the typed incident (`RemoveIncident`);
// - a schedule row is a typed alarm from its commit until it rings: the
//   alarm is removed as it fires, before the callback runs, while agents'
//   one-shot row stays until the callback is done (a process that dies
//   mid-callback rings it again after its restart, as agents does).

import {
  AutoContinuationController,
  ChatRecoveryEngine,
  TIMED_OUT,
  awaitWithDeadline,
  chatRecoveryBackoffSeconds,
  resolveChatRecoveryConfig,
  runChatRecoveryExhaustion,
} from "agents/chat";
import { Write } from "../node/index.mjs";

const INCIDENT_PREFIX = "cf:chat-recovery:incident:";
const ALARM_PREFIX = "cf:alarm:";
const PROGRESS_KEY = "cf:chat-recovery:progress";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** agents' incident statuses of a recovery still under way. */
const OPEN_STATUSES = new Set(["attempting", "scheduled"]);

/** Whole milliseconds, as the store's records keep them. */
const wholeMs = (ms) => Math.max(0, Math.trunc(Number.isFinite(ms) ? ms : 0));

/** The incident id an incident entry's key names (agents' `chatRecoveryIncidentKey` undone), or undefined. */
const incidentIdOf = (key) => (key.startsWith(INCIDENT_PREFIX) ? decodeURIComponent(key.slice(INCIDENT_PREFIX.length)) : undefined);

/** The typed alarm id of a schedule row: its own id without the entry prefix. */
const typedAlarmId = (alarm) => alarm.id.slice(ALARM_PREFIX.length);

const EVENT_NAMES = {
  "chat:recovery:scheduled": "recovery-scheduled",
  "chat:recovery:completed": "recovery-completed",
  "chat:recovery:skipped": "recovery-skipped",
};

export class Recovery {
  constructor(session) {
    this.session = session;
    this.host = session.host;
    this.settings = session.config.recovery;
    this.engine = new ChatRecoveryEngine(this.adapter());
    this.activeRootRequestId = undefined;
    /** agents' "recovering…" flag; undefined until read or set (see `recoveringFrame`). */
    this.recovering = undefined;
  }

  store() {
    return this.host.store;
  }

  adapter() {
    const store = () => this.store();
    return {
      resolveConfig: () =>
        resolveChatRecoveryConfig({
          maxAttempts: this.settings.max_attempts,
          stableTimeoutMs: this.settings.stable_timeout_ms,
          terminalMessage: this.settings.terminal_message,
          noProgressTimeoutMs: this.settings.no_progress_window_ms,
        }),
      now: () => Date.now(),
      sweepStaleIncidents: async () => {},
      getIncident: async (key) => store().get(key) ?? this.seededIncident(key),
      putIncident: (key, incident) => this.session.commit([Write.put(key, incident), ...this.incidentRecord(incident)]),
      deleteIncident: (key) => this.session.commit([Write.remove(key), ...this.incidentClosed(incidentIdOf(key))]),
      syncStorage: async () => {},
      readProgress: async () => store().get(PROGRESS_KEY) ?? 0,
      isAwaitingClientInteraction: () => this.session.awaitsClientInteraction(),
      emitRecoveryEvent: (event) => this.emit(event),
      scheduleRecovery: (callback, data, reason, delaySeconds) => {
        // The engine reports a schedule itself; a reschedule after a stable timeout it does not.
        if (reason === "stable_timeout_retry") this.emitRescheduled(data);
        return this.schedule(callback, data, delaySeconds, reason);
      },
      setRecovering: async (active) => this.setRecovering(active),
      exhaustChatRecovery: (incident, config, partial, streamId, createdAt) =>
        this.exhaust(incident, config, partial, streamId, createdAt),
      resolveRecoveryStream: (requestId) => ({ streamId: requestId, streamStillActive: false }),
      getPartialStreamText: () => this.session.partial(),
      activeChatRecoveryRootRequestId: () => this.activeRootRequestId,
      onGiveUpBookkeepingError: (phase, error) => this.host.log(`recovery ${phase}:`, error),
    };
  }

  /**
   * agents' live "recovering…" status (#1620): `setChatRecovering` keeps it
   * as one flag per agent and broadcasts a `Recovering` frame. Here the
   * frame goes to every client on each call, and the flag is kept in
   * memory, not as agents' durable `cf:chat:recovering` entry: a commit of
   * its own there would move every later commit of a run, which scenarios
   * fault by number. A process booted over a predecessor's store starts
   * with the flag as that store leaves it (an incident `scheduled`: agents
   * sets the flag as it schedules and clears it as the incident ends).
   */
  setRecovering(active) {
    this.recovering = active;
    return this.host.broadcast({ Recovering: active });
  }

  /**
   * The on-connect replay of the status (`buildChatRecoveringFrame`): a
   * client that connects while a recovery is under way, this process's or a
   * dead predecessor's, is told so; null when none is.
   */
  recoveringFrame() {
    this.recovering ??= Object.entries(this.store().state.extra).some(
      ([key, incident]) => key.startsWith(INCIDENT_PREFIX) && incident?.status === "scheduled",
    );
    return this.recovering ? { Recovering: true } : null;
  }

  emit(event) {
    const name = EVENT_NAMES[event.type];
    if (!name) return;
    const fields = { incident_id: event.incidentId };
    if (name === "recovery-scheduled") Object.assign(fields, { attempt: event.attempt, strategy: event.recoveryKind });
    if (name === "recovery-skipped") fields.reason = event.reason ?? "";
    this.host.observe({ event: name, ...fields });
  }

  emitRescheduled(data) {
    const incident = this.store().get(`${INCIDENT_PREFIX}${encodeURIComponent(data?.incidentId ?? "")}`);
    const attempt = incident?.attempt ?? 0;
    const strategy = incident?.recoveryKind ?? "continue";
    this.host.observe({ event: "recovery-scheduled", incident_id: data?.incidentId ?? "", attempt, strategy });
  }

  /** Bumps the durable progress marker (streamed output reached the store). */
  progressWrite() {
    return Write.put(PROGRESS_KEY, (this.store().get(PROGRESS_KEY) ?? 0) + 1);
  }

  /**
   * Think 0.23.0's `_routeStallToBoundedRecovery`: a stall of `turn`, or a
   * stream error the app classified transient, routed into bounded
   * recovery. A turn that streamed nothing leaves its user message as the
   * leaf, so the strategy is `retry` of that message (#1941); otherwise the
   * partial is persisted and continued (`targetAssistantId`, so a recovery
   * that finds the conversation moved on stands down). A transient error
   * backs off (`recordTransientRetry`, `chatRecoveryBackoffSeconds`).
   * Returns "scheduled" or "exhausted".
   */
  async routeInterruption(turn, { partialParts, persistPartial, backoff, retryAfterSeconds }) {
    const root = this.activeRootRequestId ?? turn.rootRequestId ?? turn.requestId;
    const latestUserMessageId = this.latestUserMessageId();
    const retryTargetUserId = partialParts.length === 0 ? this.latestUserLeafId() : null;
    const recoveryKind = retryTargetUserId ? "retry" : "continue";
    const { incident, config, exhausted } = await this.engine.beginIncident({
      requestId: turn.requestId,
      recoveryRootRequestId: root,
      latestUserMessageId,
      recoveryKind,
      trigger: "stalled",
    });
    if (exhausted) {
      await persistPartial();
      await this.exhaust(incident, config, this.session.partial(), root, incident.firstSeenAt);
      return "exhausted";
    }
    const targetAssistantId = await persistPartial();
    const unansweredUserId = targetAssistantId ? null : partialParts.length === 0 ? retryTargetUserId : this.latestUserLeafId();
    const retries = await this.engine.recordTransientRetry(incident.incidentId);
    const delaySeconds = backoff ? chatRecoveryBackoffSeconds(retries, retryAfterSeconds) : undefined;
    const reason = this.activeRootRequestId !== undefined ? "chained_retry" : undefined;
    const data = { originalRequestId: root, incidentId: incident.incidentId };
    if (unansweredUserId) {
      await this.engine.scheduleRecovery({
        incident,
        delaySeconds,
        reason,
        recoveryKind: "retry",
        callback: "_chatRecoveryRetry",
        data: { targetUserId: unansweredUserId, ...data },
      });
      return "scheduled";
    }
    await this.engine.scheduleRecovery({
      incident,
      delaySeconds,
      reason,
      recoveryKind: "continue",
      callback: "_chatRecoveryContinue",
      data: { ...(targetAssistantId ? { targetAssistantId } : {}), ...data },
    });
    return "scheduled";
  }

  /**
   * A turn that died with the previous process (the `interrupted` trigger).
   * As Think's `_classifyRecoveredThinkTurn`: a turn that left no persisted
   * content and whose user message is still the leaf is retried; otherwise
   * the leaf is continued (`targetAssistantId` when it is an assistant
   * message, `_dispatchRecoveredThinkTurn`).
   */
  async recoverInterrupted(turn) {
    const root = turn.rootRequestId ?? turn.requestId;
    const leaf = this.session.messages.at(-1);
    const retryTargetUserId = !turn.streamed && turn.kind !== "continuation" && leaf?.role === "user" ? leaf.id : null;
    const recoveryKind = retryTargetUserId ? "retry" : "continue";
    const { incident, config, exhausted } = await this.engine.beginIncident({
      requestId: turn.requestId,
      recoveryRootRequestId: root,
      latestUserMessageId: this.latestUserMessageId(),
      recoveryKind,
      trigger: "interrupted",
    });
    if (exhausted) return this.exhaust(incident, config, this.session.partial(), root, incident.firstSeenAt);
    const data = { originalRequestId: root, incidentId: incident.incidentId };
    // agents' `handleChatFiberRecovery` (`_replayRecoveredTurn`): any throw after the incident opened flips it
    // to `failed`, so it is never left leaking in `attempting`; the throw goes on (the fiber row is kept).
    try {
      if (retryTargetUserId) {
        return await this.engine.scheduleRecovery({ incident, recoveryKind, callback: "_chatRecoveryRetry", data: { targetUserId: retryTargetUserId, ...data } });
      }
      const targetAssistantId = leaf?.role === "assistant" ? leaf.id : undefined;
      return await this.engine.scheduleRecovery({
        incident,
        recoveryKind,
        callback: "_chatRecoveryContinue",
        data: { ...(targetAssistantId ? { targetAssistantId } : {}), ...data },
      });
    } catch (error) {
      await this.engine.updateIncident(incident.incidentId, "failed", error instanceof Error ? error.message : String(error));
      throw error;
    }
  }

  latestUserMessageId() {
    return this.session.messages.findLast((message) => message.role === "user")?.id ?? null;
  }

  latestUserLeafId() {
    const leaf = this.session.messages.at(-1);
    return leaf?.role === "user" ? leaf.id : null;
  }

  /**
   * A recovery callback scheduled: a durable alarm and a timer for it. The
   * alarm wakes the session `alarm_delay_ms` after the delay Cloudflare's
   * code asks for (the platform's alarm latency is the host's, not Think's).
   *
   * Think enqueues the callback as a Task run with agents'
   * `chatRecoveryTaskRunOptions`: an `initial` schedule carries the
   * idempotency key `chat-recovery:<callback>:<incidentId>`, so it joins a
   * run of the same callback for the same incident that is still queued or
   * running (the key is released when the run settles: here, when its row
   * goes). A restart that finds the stalled turn's fiber schedules its
   * recovery again, and joins the alarm the stall left. Chained and
   * stable-timeout schedules are unkeyed: each is a new run.
   */
  async schedule(callback, data, delaySeconds, reason = "initial") {
    if (reason === "initial" && typeof data?.incidentId === "string") {
      const joined = Object.entries(this.store().state.extra).find(
        ([key, row]) => key.startsWith(ALARM_PREFIX) && row?.callback === callback && row?.data?.incidentId === data.incidentId,
      );
      if (joined) {
        this.host.log(`recovery of ${data.incidentId} joins the scheduled run ${joined[0]} (idempotency key chat-recovery:${callback}:${data.incidentId})`);
        return;
      }
    }
    const dueMs = Date.now() + delaySeconds * 1000 + (this.settings.alarm_delay_ms ?? 0);
    const alarm = { id: `${ALARM_PREFIX}${this.session.newId("a")}`, dueMs, callback, data };
    await this.session.commit([Write.put(alarm.id, alarm), Write.putAlarm(this.alarmRecord(alarm))]);
    this.arm(alarm);
  }

  /**
   * The typed records for agents' incident `incident` as just written: an
   * open incident is `attempting`, an ended one keeps its status, and a
   * skipped one is closed (see the top of this file).
   */
  incidentRecord(incident) {
    const id = incident?.incidentId;
    if (typeof id !== "string") return [];
    const status = OPEN_STATUSES.has(incident.status) ? "attempting" : incident.status;
    if (status === "skipped") return this.incidentClosed(id);
    return [
      Write.putIncident({
        id,
        root_request_id: incident.recoveryRootRequestId ?? incident.requestId ?? "",
        attempt: Math.max(0, Math.trunc(incident.attempt ?? 0)),
        first_seen_ms: wholeMs(incident.firstSeenAt),
        last_attempt_ms: wholeMs(incident.lastAttemptAt ?? incident.firstSeenAt),
        last_progress_ms: wholeMs(incident.lastProgressAt ?? incident.firstSeenAt),
        progress: Math.max(0, Math.trunc(incident.progress ?? 0)),
        status,
      }),
    ];
  }

  /** Closes the typed incident `id`, if the store holds it. */
  incidentClosed(id) {
    return typeof id === "string" && id in this.store().state.incidents ? [Write.removeIncident(id)] : [];
  }

  /** The typed record of schedule row `alarm`: its wake-up, its incident and the message it recovers. */
  alarmRecord(alarm) {
    const data = alarm.data ?? {};
    return {
      id: typedAlarmId(alarm),
      due_ms: wholeMs(alarm.dueMs),
      incident_id: data.incidentId ?? "",
      root_request_id: data.originalRequestId ?? "",
      message_id: data.targetAssistantId ?? data.targetUserId ?? this.session.messages.at(-1)?.id ?? "",
    };
  }

  /**
   * An incident the store holds only as a typed record (a scenario seeds a
   * dead predecessor's store in the store's vocabulary): read as agents'
   * incident, as the boot reads a seeded `in_flight` as its turn record.
   * agents writes it back in its own shape (and the typed one with it) the
   * first time it changes it. Null when the store holds none.
   */
  seededIncident(key) {
    const seeded = this.store().state.incidents[incidentIdOf(key)];
    if (!seeded) return null;
    return {
      incidentId: seeded.id,
      requestId: seeded.root_request_id,
      recoveryRootRequestId: seeded.root_request_id,
      recoveryKind: "continue",
      attempt: seeded.attempt,
      maxAttempts: this.engine.adapter.resolveConfig().maxAttempts,
      status: seeded.status,
      firstSeenAt: seeded.first_seen_ms,
      lastAttemptAt: seeded.last_attempt_ms,
      lastProgressAt: seeded.last_progress_ms,
      progress: seeded.progress,
      workBaseline: seeded.progress,
    };
  }

  /** The typed alarm of schedule row `alarm` goes as it fires, if the store holds it. */
  alarmFired(alarm) {
    const id = typedAlarmId(alarm);
    return this.store().state.alarms.some((held) => held.id === id) ? [Write.removeAlarm(id)] : [];
  }

  /** Arms the timers of the alarms a dead predecessor left. */
  restoreAlarms() {
    const entries = Object.entries(this.store().state.extra).filter(([key]) => key.startsWith(ALARM_PREFIX));
    for (const [, alarm] of entries) this.arm(alarm);
  }

  arm(alarm) {
    setTimeout(() => this.ring(alarm), Math.max(0, alarm.dueMs - Date.now()));
  }

  /**
   * The alarm rings: the recovery callback runs, then its one-shot schedule
   * row goes (agents' alarm handler deletes a one-shot row after its
   * callback). Nothing thrown here escapes the alarm: a callback error is
   * handled as Think's `_handleRecoveryCallbackError` does (below), and a
   * refused removal is logged (the row rings again after a restart, and the
   * closed incident turns it away).
   */
  async ring(alarm) {
    if (!this.store().get(alarm.id)) return;
    // The wake-up fired: its typed alarm goes now. A refused removal is
    // logged; the row's removal below takes it again.
    const fired = this.alarmFired(alarm);
    if (fired.length > 0) await this.session.commit(fired).catch((error) => this.host.log("recording a fired alarm:", error.message));
    try {
      await this.engine.runRecoveryAttempt({ callback: alarm.callback, data: alarm.data, run: () => this.attempt(alarm) });
    } catch (error) {
      this.host.log("recovery attempt failed:", error?.message ?? error);
    }
    await this.session
      .commit([Write.remove(alarm.id), ...this.alarmFired(alarm)])
      .catch((error) => this.host.log("removing a fired alarm:", error.message));
  }

  /**
   * Think's `_chatRecoveryContinue` / `_chatRecoveryRetry`: wait for the
   * session to be stable; if it never is, park a turn that waits on the
   * client, else reschedule (the engine's budget) or give up.
   */
  async attempt(alarm) {
    try {
      await this.attemptSteps(alarm);
    } catch (error) {
      // `_handleRecoveryCallbackError`: an application error (a store refusal is one: it carries no platform
      // `retryable` flag) gives up with `recovery_error` instead of leaving the turn wedged.
      this.host.log(`${alarm.callback} threw during recovery:`, error?.message ?? error);
      await this.engine.exhaustRecoveryGiveUp({ callback: alarm.callback, data: alarm.data, reason: "recovery_error" });
    }
  }

  async attemptSteps(alarm) {
    const { callback, data } = alarm;
    const config = this.engine.adapter.resolveConfig();
    if (await this.waitUntilStable(config.stableTimeoutMs)) {
      const leaf = this.session.messages.at(-1);
      if (callback === "_chatRecoveryRetry") {
        // `_chatRecoveryRetryDetached`: the user message to answer must still be the leaf.
        if (leaf?.role !== "user") return this.finished(data?.incidentId, "skipped", "no_unanswered_user_message");
        if (data?.targetUserId && leaf.id !== data.targetUserId) return this.finished(data.incidentId, "skipped", "conversation_changed");
      } else if (data?.targetAssistantId && leaf?.id !== data.targetAssistantId) {
        return this.finished(data.incidentId, "skipped", "conversation_changed");
      } else if (leaf?.role !== "assistant") {
        // `continueLastTurn` continues the leaf only when it is an assistant message; otherwise the
        // turn is "skipped", and so is the incident (a user message stored since waits for its own turn).
        return this.finished(data?.incidentId, "skipped");
      }
      return this.session.runRecoveryTurn(alarm, data?.originalRequestId);
    }
    if (this.session.awaitsClientInteraction()) {
      this.host.observe({ event: "recovery-parked", incident_id: data?.incidentId ?? "" });
      return this.finished(data?.incidentId, "skipped", "awaiting_client_interaction");
    }
    const rescheduled = await this.engine.rescheduleAfterStableTimeout({
      incidentId: data?.incidentId,
      callback,
      data,
      fallbackMaxAttempts: config.maxAttempts,
    });
    if (!rescheduled) await this.engine.exhaustRecoveryGiveUp({ callback, data, reason: "stable_timeout" });
  }

  /** Think's `waitUntilStable`: no turn running or queued, no client interaction pending, no armed continuation. */
  async waitUntilStable(timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if ((await awaitWithDeadline(this.session.turns.waitForIdle(), deadline)) === TIMED_OUT) return false;
      if (this.session.awaitsClientInteraction()) {
        // Nothing but the client can end the wait: poll until the deadline.
        if ((await awaitWithDeadline(sleep(100), deadline)) === TIMED_OUT) return false;
        continue;
      }
      if (!this.session.barrier.isArmed() && !this.session.pendingApply) return true;
      if ((await awaitWithDeadline(sleep(AutoContinuationController.COALESCE_MS), deadline)) === TIMED_OUT) return false;
    }
  }

  /** The recovery turn for `incidentId` ended: "completed" or another status. */
  finished(incidentId, status, reason) {
    return this.engine.updateIncident(incidentId, status, reason);
  }

  async exhaust(incident, config, partial, streamId, createdAt) {
    const root = incident.recoveryRootRequestId ?? incident.requestId;
    await runChatRecoveryExhaustion(
      { incident, config, partialText: partial.text, partialParts: partial.parts, streamId, createdAt },
      {
        emit: (context) =>
          this.host.observe({ event: "recovery-exhausted", incident_id: context.incidentId, attempt: context.attempt, reason: context.reason }),
        onExhausted: (context) =>
          this.host.exhausted({
            incident_id: context.incidentId,
            root_request_id: context.recoveryRootRequestId ?? root,
            attempt: context.attempt,
            max_attempts: context.maxAttempts,
            reason: context.reason,
            terminal_message: context.terminalMessage,
            partial_text: context.partialText ?? "",
          }),
        onError: (error) => this.host.log("onExhausted failed:", error),
        // Think's terminalize addresses the banner to `ctx.requestId`: the incident's current request (the stalled one).
        terminalize: (context) => this.session.terminalize(context.requestId ?? root, context.terminalMessage),
      },
    );
  }
}
