//! Bounded recovery: incidents, their attempt budget, durable alarms, the
//! choice between continuing a partial and truncating it to regenerate, and
//! recovery of a turn that died with its process.

use std::time::Duration;

use crate::clock;
use crate::durable::{Alarm, InFlightTurn, Incident, TurnKind, Write};
use crate::events::{EngineEvent, TurnStatus};
use crate::ports::{ExhaustedContext, FaultSite, Frame, HookError};
use crate::regression::Regression;
use crate::transcript::{has_pending_interaction, leaf_assistant, Message, Part, Role, ToolState};

use super::turn::{drop_trailing_step_start, QueuedTurn};
use super::Session;

/// The requests a recovery is about: the root of its chain (the incident's
/// key) and the request whose stream an exhaustion ends.
#[derive(Clone, Copy)]
struct Ends<'a> {
    root: &'a str,
    request: &'a str,
}

/// A due alarm waiting for the session to go idle.
pub(crate) struct RecoveryWait {
    pub alarm: Alarm,
}

/// What `begin_recovery` did.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Begun {
    Scheduled,
    /// The budget was spent: the terminal message went out.
    GaveUp,
    /// The store refused the schedule: nothing will run.
    Refused,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// A stall or an eviction was detected.
    Detected,
    /// A recovery attempt ended without progress.
    FailedAttempt,
    /// The session stayed busy past the stable timeout.
    StableTimeout,
}

/// How a recovery turn treats the partial it resumes.
pub fn recovery_strategy(message: Option<&Message>) -> &'static str {
    if message.is_some_and(|message| message.role == Role::User) {
        return "retry";
    }
    let last_content =
        message.and_then(|message| message.parts.iter().rev().find(|part| !matches!(part, Part::StepStart)));
    match last_content {
        Some(Part::Tool(tool)) if tool.state == ToolState::InputStreaming => "truncate",
        _ => "continue",
    }
}

impl Session {
    pub(super) fn recover(&mut self) {
        let restored_intent = self.restore_continuation_intent();
        let in_flight = self.durable.in_flight.clone();
        let event =
            EngineEvent::Boot { restored_intent, in_flight: in_flight.as_ref().map(|turn| turn.request_id.clone()) };
        self.observe(event);
        self.recover_what_died();
    }

    /// Picks up what a dead process left: its interrupted turn, an
    /// unanswered user message, open deliveries, due alarms. Run at boot,
    /// and again when the store refused what boot wrote.
    pub(super) fn recover_what_died(&mut self) {
        self.record_unrecorded_ends();
        let in_flight = self.durable.in_flight.clone();
        // Clearing the dead turn's record and scheduling its recovery commit
        // together: a crash between them would leave nothing to recover.
        let staged = self.stage();
        self.close_overtaken_incidents();
        match in_flight {
            Some(turn) => {
                // The dead turn's own recovery is scheduled first: what is
                // still orphaned after it belongs to no turn that died.
                self.recover_evicted_turn(turn);
                self.rescue_orphaned_incidents();
            }
            None => {
                self.rescue_orphaned_incidents();
                self.recover_unanswered_user_message();
            }
        }
        self.settle_stale_text();
        if staged {
            self.commit_staged();
        }
        self.recover_deliveries();
        self.call_owed_exhausted_hooks();
        self.arm_alarm_timer();
    }

    /// Writes what the store refused of turns that ended here and of
    /// incidents closed here, then forgets what the store now holds.
    fn record_unrecorded_ends(&mut self) {
        // A commit of nothing carries what is owed.
        self.commit(Vec::new());
        // A staged batch may yet be refused: it forgets once it lands.
        if self.staged.is_none() {
            self.forget_recorded();
        }
    }

    /// What the store still lacks of this process's refused records, as
    /// `state` stands: each write still missing of a turn's end (the turn
    /// still in flight, its message as it was then, its failure not
    /// stored, the continuation it took still owed), none that a later
    /// commit overtook, and the removal of each
    /// incident closed here. Every commit carries them first, so the store
    /// catches up at the first commit it accepts.
    pub(super) fn owed_writes(&self, state: &crate::durable::DurableState) -> Vec<Write> {
        let unrecorded = &self.unrecorded;
        if unrecorded.ended_turns.is_empty() && unrecorded.closed_incidents.is_empty() {
            return Vec::new();
        }
        let mut owed = Vec::new();
        for (request_id, end) in &unrecorded.ended_turns {
            let missing = end.writes.iter().filter(|write| match write {
                Write::InFlight(None) => state.in_flight.as_ref().is_some_and(|turn| &turn.request_id == request_id),
                Write::PutMessage(message) | Write::PutMessageAfter { message, .. } => {
                    let now = state.message(&message.id);
                    now == end.message_then.as_ref() && now != Some(message)
                }
                Write::Terminal(status) => &state.terminal_status != status,
                // The continuation the turn took is not owed to the next
                // process: one left stored would answer again a turn its
                // clients were told failed.
                Write::Intent(None) => {
                    state.continuation_intent.as_ref().is_some_and(|intent| intent.message_id == end.message_id)
                }
                _ => false,
            });
            owed.extend(missing.cloned());
        }
        let closed = unrecorded.closed_incidents.iter().filter(|id| state.incidents.contains_key(*id));
        owed.extend(closed.map(|id| Write::RemoveIncident(id.clone())));
        owed
    }

    /// Drops the refused records the store now holds (an entry with
    /// nothing left to write).
    pub(super) fn forget_recorded(&mut self) {
        if self.owed_writes(&self.durable).is_empty() {
            self.unrecorded.ended_turns.clear();
            self.unrecorded.closed_incidents.clear();
        }
    }

    /// Closes an incident; one the store refused to close stays closed in
    /// this process (recorded again later, never recovered again).
    fn close_incident(&mut self, incident_id: &str) {
        self.close_incidents(vec![incident_id.to_string()]);
    }

    /// Closes incidents in one commit.
    fn close_incidents(&mut self, incident_ids: Vec<String>) {
        let writes = incident_ids.iter().map(|id| Write::RemoveIncident(id.clone())).collect();
        if self.commit(writes) {
            for incident_id in &incident_ids {
                self.unrecorded.closed_incidents.remove(incident_id);
            }
        } else {
            self.unrecorded.closed_incidents.extend(incident_ids.iter().cloned());
            // Recorded again shortly: a crash before then must not find it open.
            self.look_again_shortly();
        }
        // A recovery waiting for the session to go idle is over with its
        // incident: clients are not shown it under way meanwhile.
        let waits = |wait: &RecoveryWait| incident_ids.contains(&wait.alarm.incident_id);
        if let Some(wait) = self.recovery_wait.take_if(|wait| waits(wait)) {
            self.timers.stable = None;
            self.stand_down(&wait.alarm, "incident_closed");
            self.arm_alarm_timer();
        }
    }

    /// No turn writes into the store now: text still marked streaming was
    /// left by one that died or whose end the store refused. A recovery
    /// that continues it starts a step of its own.
    fn settle_stale_text(&mut self) {
        if self.turn.is_some() {
            return;
        }
        // As this process knows them: an end the store refused is written
        // first by the same commit, and must not be written over.
        let settled: Vec<Write> = self
            .durable
            .messages
            .iter()
            .filter(|message| message.role == Role::Assistant)
            .filter_map(|message| {
                let known = self.as_known(message);
                let mut settled = known.clone().into_owned();
                settled.settle_text();
                (settled != *known).then_some(Write::PutMessage(settled))
            })
            .collect();
        self.commit(settled);
    }

    /// The process died mid-turn: retry before the stream started, continue after.
    fn recover_evicted_turn(&mut self, turn: InFlightTurn) {
        if self.unrecorded.ended_turns.contains_key(&turn.request_id) {
            // It ended here; `record_unrecorded_ends` records its end.
            return;
        }
        let answered_again = turn.delivery_id.as_deref().is_some_and(|id| self.delivery_will_answer(id));
        let mut writes = vec![Write::InFlight(None)];
        // A delivery that never showed text is answered again from its user
        // message: the dead turn's partial goes, so the transcript holds one
        // answer (the one the messenger posts), not a fragment beside it.
        // Not one holding tool calls: a client may have answered one, and an
        // answer is never dropped.
        let own_message = matches!(turn.kind, TurnKind::Chat | TurnKind::User);
        // As this process knows it: an end the store refused is written
        // first by the same commit, and must not be written over.
        let partial = self.durable.message(&turn.message_id).map(|message| self.as_known(message).into_owned());
        let text_only = partial.as_ref().is_some_and(|message| message.tools().next().is_none());
        if answered_again && own_message && text_only {
            writes.push(Write::RemoveMessage(turn.message_id.clone()));
        } else if let Some(message) = partial {
            // The dead turn's text stops streaming: nothing writes into it
            // again unless a recovery continues it.
            let mut settled = message;
            drop_trailing_step_start(&mut settled);
            settled.settle_text();
            writes.push(Write::PutMessage(settled));
        }
        self.commit(writes);
        if answered_again {
            // A message that waited behind the delivery's turn is answered
            // once that answer is done.
            self.recover_unanswered_user_message();
            return;
        }
        // Nothing of the reply was stored, or a newer user message was
        // waiting behind the turn (it was acknowledged, so it must be
        // answered): retry from the last user message. A delivery that will
        // be answered again answers its own message.
        let last = self.durable.messages.last();
        let user_waits = self.user_message_waits();
        let target = match self.durable.message(&turn.message_id) {
            Some(_) if !user_waits => turn.message_id.clone(),
            _ => last.map(|last| last.id.clone()).unwrap_or_default(),
        };
        let answered = self.answered_by(&turn.message_id, None).unwrap_or_default();
        if self.failure_told_about(&answered, &turn.request_id) {
            // Its failure was told (a refused write, a failed attempt):
            // no recovery answers after that.
            return;
        }
        let delay_ms = self.config.recovery.alarm_delay_ms;
        let ends = Ends { root: &turn.root_request_id, request: &turn.request_id };
        self.begin_recovery(None, ends, &target, Cause::Detected, delay_ms);
    }

    /// An incident still attempting with no alarm, about an older user
    /// message than the latest, died while its recovery waited or ran and
    /// was overtaken: its alarm would have found the conversation changed.
    /// It is closed, whether or not a turn was in flight.
    fn close_overtaken_incidents(&mut self) {
        let latest_user = self.latest_user();
        let Some(latest_user) = latest_user.map(|message| message.id.clone()) else {
            return;
        };
        let overtaken: Vec<String> = self
            .orphaned_incidents()
            .filter(|incident| !is_about(&incident.id, &latest_user))
            .map(|incident| incident.id.clone())
            .collect();
        if overtaken.is_empty() {
            return;
        }
        self.close_incidents(overtaken.clone());
        for incident_id in overtaken {
            let reason = "conversation_changed".into();
            self.observe(EngineEvent::RecoverySkipped { incident_id, reason });
        }
    }

    /// Incidents still attempting with no alarm, not closed here.
    fn orphaned_incidents(&self) -> impl Iterator<Item = &Incident> {
        self.durable
            .incidents
            .values()
            .filter(|incident| incident.status == "attempting" && !self.has_alarm(&incident.id))
            .filter(|incident| !self.unrecorded.closed_incidents.contains(&incident.id))
    }

    /// An incident still attempting with no alarm, not the dead turn's
    /// own, died between taking its alarm and starting its recovery turn
    /// (or while it waited for the session to go idle): schedule it again.
    fn rescue_orphaned_incidents(&mut self) {
        // About the latest message (older ones were closed as overtaken):
        // one whose failure was told since it began ends.
        let (told, orphaned): (Vec<Incident>, Vec<Incident>) =
            self.orphaned_incidents().cloned().partition(|incident| {
                let answered = about(&incident.id).unwrap_or("");
                self.failure_told_about(answered, &incident.root_request_id)
            });
        if !told.is_empty() {
            let ids: Vec<String> = told.into_iter().map(|incident| incident.id).collect();
            self.close_incidents(ids.clone());
            for incident_id in ids {
                self.observe(EngineEvent::RecoverySkipped { incident_id, reason: "failure_told".into() });
            }
        }
        let Some(target) = self.durable.messages.last().map(|last| last.id.clone()) else {
            return;
        };
        let delay_ms = self.config.recovery.alarm_delay_ms;
        for incident in orphaned {
            let root = incident.root_request_id.clone();
            let ends = Ends { root: &root, request: &root };
            self.begin_recovery(Some(&incident.id), ends, &target, Cause::Detected, delay_ms);
        }
    }

    /// An acknowledged user message whose turn never started (it was queued
    /// when the process died) is answered by a recovery retry.
    fn recover_unanswered_user_message(&mut self) {
        let Some(last) = self.durable.messages.last() else {
            return;
        };
        if !self.user_message_waits() || !self.durable.alarms.is_empty() || self.failure_told_about(&last.id, "") {
            return;
        }
        let root = format!("retry-{}", last.id);
        let message_id = last.id.clone();
        let delay_ms = self.config.recovery.alarm_delay_ms;
        self.begin_recovery(None, Ends { root: &root, request: &root }, &message_id, Cause::Detected, delay_ms);
    }

    pub(super) fn route_stall_to_recovery(&mut self) {
        let Some(turn) = self.turn.as_ref() else {
            return;
        };
        let (root, message_id) = (turn.root_request_id.clone(), turn.assistant.id.clone());
        let (incident, request_id) = (turn.incident_id.clone(), turn.request_id.clone());
        // The turn's end stores its reply if it has parts, even when the
        // flush below is refused: the recovery aims at that reply then.
        let mut reply = turn.assistant.clone();
        drop_trailing_step_start(&mut reply);
        let reply_stays = !reply.parts.is_empty();
        self.flush_in_flight(false);
        // A stream that produced nothing left no message: the recovery
        // answers the last message (the user's) instead.
        let message_id = match self.durable.message(&message_id) {
            Some(_) => message_id,
            None if reply_stays => message_id,
            None => self.durable.messages.last().map(|last| last.id.clone()).unwrap_or_default(),
        };
        let delay_ms = self.config.recovery.alarm_delay_ms;
        let ends = Ends { root: &root, request: &request_id };
        let begun = self.begin_recovery(incident.as_deref(), ends, &message_id, Cause::Detected, delay_ms);
        if begun == Begun::Refused && !self.continues_without_recovery() {
            // The store refused the schedule and nothing else will take the
            // stream on (no held continuation, no tool call the client may
            // still answer): it is not left looking interrupted. The turn
            // fails as any turn whose write was refused (`settle_refusals`).
            return;
        }
        // Exhausted: the terminal message was this stream's terminal frame,
        // so the interrupted end sends no `done` after it.
        self.end_turn(TurnStatus::Interrupted, None);
    }

    /// Whether the conversation goes on without a recovery: a continuation
    /// is held, or a tool call waits for the client, whose answer continues.
    fn continues_without_recovery(&self) -> bool {
        let config = &self.config;
        self.barrier.pending.is_some()
            || has_pending_interaction(&self.stored_messages_with_turn(), |name| config.is_client_tool(name))
    }

    /// Opens or advances the incident, then schedules the recovery alarm or
    /// exhausts.
    fn begin_recovery(
        &mut self,
        incident: Option<&str>,
        ends: Ends,
        message_id: &str,
        cause: Cause,
        delay_ms: u64,
    ) -> Begun {
        // An incident keeps its id for life: a newer user message must not split it.
        let id = incident.map_or_else(|| self.incident_id(ends.root), str::to_string);
        if self.durable.incidents.get(&id).is_some_and(|incident| incident.status == "exhausted") {
            // Re-entry after the budget was spent (a restart found the
            // stream it gave up on): the terminal message went out once.
            return Begun::GaveUp;
        }
        let (incident, exhausted) = self.advance_incident(&id, ends.root, cause);
        if let Some(reason) = exhausted {
            self.exhaust(incident, reason, ends.request, true);
            return Begun::GaveUp;
        }
        let strategy = recovery_strategy(self.durable.message(message_id)).to_string();
        let alarm = Alarm {
            id: format!("alarm-{}-{}", incident.id, incident.attempt),
            due_ms: clock::wall_ms() + delay_ms + if self.buggify(FaultSite::LateAlarm) { 5_000 } else { 0 },
            incident_id: incident.id.clone(),
            root_request_id: ends.root.to_string(),
            message_id: message_id.to_string(),
        };
        // The attempt and its alarm land together: a crash between them
        // would leave an attempt spent and nothing scheduled.
        if !self.commit(vec![Write::PutIncident(incident.clone()), Write::PutAlarm(alarm)]) {
            // Nothing was scheduled: a pending continuation is not left
            // waiting for a recovery that will never run, and what needs
            // one is looked for again shortly, as after a refused boot.
            self.look_again_shortly();
            // The incident is given up here, not left to be found orphaned.
            self.unrecorded.closed_incidents.insert(incident.id.clone());
            return Begun::Refused;
        }
        // Scheduled again under its id: it is open, whatever was refused before.
        self.unrecorded.closed_incidents.remove(&incident.id);
        self.observe(EngineEvent::RecoveryScheduled { incident_id: incident.id, attempt: incident.attempt, strategy });
        self.broadcast(Frame::Recovering(true));
        self.arm_alarm_timer();
        Begun::Scheduled
    }

    fn incident_id(&self, root: &str) -> String {
        let latest_user = self.latest_user();
        format!("{root}:{}", latest_user.map(|message| message.id.as_str()).unwrap_or(""))
    }

    fn advance_incident(&mut self, id: &str, root: &str, cause: Cause) -> (Incident, Option<&'static str>) {
        let recovery = &self.config.recovery;
        let now = clock::wall_ms();
        let progress = self.durable.progress;
        let mut incident = match self.durable.incidents.get(id) {
            None => Incident {
                id: id.to_string(),
                root_request_id: root.to_string(),
                attempt: 1,
                first_seen_ms: now,
                last_attempt_ms: now,
                last_progress_ms: now,
                progress,
                status: String::new(),
                hook_owed: None,
            },
            Some(existing) => {
                let made_progress = progress > existing.progress && cause != Cause::StableTimeout;
                let debounced = cause == Cause::Detected
                    && now.saturating_sub(existing.last_attempt_ms) < recovery.alarm_debounce_ms;
                // A stable timeout always spends an attempt: the session was busy, not
                // this turn making progress.
                let attempt = match (made_progress, debounced) {
                    (true, _) => 1,
                    (false, true) => existing.attempt,
                    (false, false) => existing.attempt + 1,
                };
                let last_progress_ms = if made_progress { now } else { existing.last_progress_ms };
                Incident { attempt, last_attempt_ms: now, last_progress_ms, progress, ..existing.clone() }
            }
        };
        let stalled_for_ms = now.saturating_sub(incident.last_progress_ms);
        let exhausted = if cause != Cause::StableTimeout && stalled_for_ms > recovery.no_progress_window_ms {
            Some("no_progress_timeout")
        } else if incident.attempt > recovery.effective_max_attempts() {
            Some(if cause == Cause::StableTimeout { "stable_timeout" } else { "max_attempts_exceeded" })
        } else {
            None
        };
        incident.status = if exhausted.is_some() { "exhausted" } else { "attempting" }.to_string();
        incident.hook_owed = exhausted.map(str::to_string);
        (incident, exhausted)
    }

    /// The budget is spent: the terminal message goes out of band, as the
    /// terminal frame of `request_id`'s stream, and is recorded durably for
    /// clients that connect later, in the same commit as the spent incident
    /// (which owes the host its `on_exhausted` until the hook has run).
    /// Other incidents about the same user message (a crash opened it
    /// twice) end with it: the user is told once that it could not recover,
    /// and no answer follows that.
    /// Returns whether the store recorded it; `announce` is false when the
    /// terminal message already went out as `request_id`'s terminal frame.
    fn exhaust(&mut self, incident: Incident, reason: &str, request_id: &str, announce: bool) -> bool {
        let terminal = self.config.recovery.terminal_message.clone();
        let status = self.terminal(request_id, terminal.clone(), about(&incident.id).map(str::to_string));
        let mut writes = vec![Write::PutIncident(incident.clone()), Write::Terminal(Some(status))];
        writes.extend(self.ending_with(&incident.id));
        let recorded = self.commit(writes);
        self.call_exhausted_hook(&incident, reason);
        let event = EngineEvent::RecoveryExhausted {
            incident_id: incident.id,
            attempt: incident.attempt,
            reason: reason.to_string(),
        };
        self.observe(event);
        if announce {
            self.broadcast(Frame::Error { request_id: request_id.to_string(), message: terminal });
            if !recorded {
                self.unrecorded.terminal_told.insert(request_id.to_string());
            }
        }
        recorded
    }

    /// What ends with an incident that gave up or failed: its alarms, and
    /// every other incident still attempting about the same user message
    /// (a crash opened it twice) with theirs. The user is told once, and no
    /// answer follows it.
    fn ending_with(&self, incident_id: &str) -> Vec<Write> {
        let about = about(incident_id).unwrap_or("");
        let siblings: Vec<String> = self
            .durable
            .incidents
            .values()
            .filter(|other| other.id != incident_id && other.status == "attempting" && is_about(&other.id, about))
            .map(|other| other.id.clone())
            .collect();
        let ends = |id: &String| id == incident_id || siblings.contains(id);
        let alarms = self.durable.alarms.iter().filter(|alarm| ends(&alarm.incident_id));
        let mut writes: Vec<Write> = alarms.map(|alarm| Write::RemoveAlarm(alarm.id.clone())).collect();
        writes.extend(siblings.into_iter().map(Write::RemoveIncident));
        writes
    }

    /// A recovery attempt failed, and its consumers were told as its
    /// terminal frame: the incident ends (the reference's `failed`) with
    /// what ends with it, so no later attempt answers a user told it failed.
    fn fail_incident(&mut self, incident_id: String) {
        let mut writes = vec![Write::RemoveIncident(incident_id.clone())];
        writes.extend(self.ending_with(&incident_id));
        let ended: Vec<String> = writes
            .iter()
            .filter_map(|write| if let Write::RemoveIncident(id) = write { Some(id.clone()) } else { None })
            .collect();
        if !self.commit(writes) {
            self.unrecorded.closed_incidents.extend(ended);
            self.look_again_shortly();
        }
        self.observe(EngineEvent::RecoverySkipped { incident_id, reason: "attempt_failed".into() });
    }

    /// Tells the host the incident gave up, then records that it was told:
    /// a crash before the record calls the hook again after the restart.
    fn call_exhausted_hook(&mut self, incident: &Incident, reason: &str) {
        let partial_text =
            self.durable.messages.iter().rev().find(|message| message.role == Role::Assistant).map(Message::text);
        let context = ExhaustedContext {
            incident_id: incident.id.clone(),
            root_request_id: incident.root_request_id.clone(),
            attempt: incident.attempt,
            max_attempts: self.config.recovery.effective_max_attempts(),
            reason: reason.to_string(),
            terminal_message: self.config.recovery.terminal_message.clone(),
            partial_text: partial_text.unwrap_or_default(),
        };
        if !self.unrecorded.hooks_called.contains(&incident.id) {
            if let Err(HookError(error)) = self.ports.observer.on_exhausted(&context) {
                self.observe(EngineEvent::HookFailed { incident_id: incident.id.clone(), error });
            }
        }
        let told = Incident { hook_owed: None, ..incident.clone() };
        // A staged record lands only with its batch (boot's), which the
        // store may yet refuse and boot then redo: until a commit of its
        // own is taken, the hook is remembered as run.
        let staged = self.staged.is_some();
        // A record the store refused is written again later; the hook ran.
        if self.commit(vec![Write::PutIncident(told)]) && !staged {
            self.unrecorded.hooks_called.remove(&incident.id);
        } else {
            self.unrecorded.hooks_called.insert(incident.id.clone());
        }
    }

    /// After a restart: the hook a dead process owed for a spent incident.
    pub(super) fn call_owed_exhausted_hooks(&mut self) {
        let owed: Vec<Incident> =
            self.durable.incidents.values().filter(|incident| incident.hook_owed.is_some()).cloned().collect();
        for incident in owed {
            let reason = incident.hook_owed.clone().unwrap_or_default();
            self.call_exhausted_hook(&incident, &reason);
        }
    }

    /// A recovery is scheduled or waiting to run.
    /// An alarm of an open incident is due, or a recovery waits for the
    /// session to go idle. An alarm left behind by a closed incident (its
    /// removal refused, or answered by another turn) schedules nothing.
    pub(super) fn recovery_pending(&self) -> bool {
        self.durable.alarms.iter().any(|alarm| self.incident_open(&alarm.incident_id)) || self.recovery_wait.is_some()
    }

    /// Stored, and not closed here while the store refused to record it.
    fn incident_open(&self, incident_id: &str) -> bool {
        self.durable.incidents.contains_key(incident_id) && !self.unrecorded.closed_incidents.contains(incident_id)
    }

    pub(super) fn arm_alarm_timer(&mut self) {
        let Some(due_ms) = self.durable.alarms.iter().map(|alarm| alarm.due_ms).min() else {
            self.timers.alarm = None;
            return;
        };
        if self.recovery_wait.is_some() {
            return;
        }
        let wait = Duration::from_millis(due_ms.saturating_sub(clock::wall_ms()));
        self.timers.alarm = Some(clock::now() + wait);
    }

    pub(super) fn on_alarm_deadline(&mut self) {
        let now = clock::wall_ms();
        let due =
            self.durable.alarms.iter().filter(|alarm| alarm.due_ms <= now).min_by_key(|alarm| alarm.due_ms).cloned();
        let Some(alarm) = due else {
            return self.arm_alarm_timer();
        };
        self.commit(vec![Write::RemoveAlarm(alarm.id.clone())]);
        let gave_up =
            self.durable.incidents.get(&alarm.incident_id).is_some_and(|incident| incident.status != "attempting");
        if gave_up || self.recovery_under_way_for(&alarm.incident_id) {
            // The incident gave up, or its recovery already runs or waits
            // to: this alarm was set twice (a restart scheduled it again, or
            // the store refused its removal and it fired again).
            return self.arm_alarm_timer();
        }
        if !self.incident_open(&alarm.incident_id) {
            // Left behind by a closed incident: no recovery waits for it.
            self.skip(&alarm, "incident_closed");
            return self.arm_alarm_timer();
        }
        let answered = about(&alarm.incident_id).unwrap_or("");
        if self.failure_told_about(answered, &alarm.root_request_id) {
            // Its message's failure was told since it was scheduled (a
            // crash kept the failed attempt from ending it).
            self.skip(&alarm, "failure_told");
            return self.arm_alarm_timer();
        }
        self.recovery_wait = Some(RecoveryWait { alarm });
        let stable_timeout = Duration::from_millis(self.config.recovery.stable_timeout_ms);
        self.timers.stable = Some(clock::now() + stable_timeout);
        self.run_recovery_when_stable();
    }

    /// The incident's recovery turn runs or is queued. (No alarm fires while
    /// a recovery waits for the session: the alarm timer is armed again
    /// only once the wait is over.)
    fn recovery_under_way_for(&self, incident_id: &str) -> bool {
        let for_it = |id: &Option<String>| id.as_deref() == Some(incident_id);
        self.turn.as_ref().is_some_and(|turn| for_it(&turn.incident_id))
            || self.queue.iter().any(|queued| for_it(&queued.incident_id))
    }

    /// Runs a waiting recovery once no turn runs; parks it (no budget spent)
    /// while a client interaction is pending.
    pub(super) fn run_recovery_when_stable(&mut self) {
        if self.recovery_wait.is_none() || self.turn.is_some() || !self.queue.is_empty() {
            return;
        }
        let wait = self.recovery_wait.take().expect("checked above");
        self.timers.stable = None;
        let alarm = wait.alarm;
        let config = &self.config;
        let retries_a_message =
            self.durable.message(&alarm.message_id).is_some_and(|message| message.role == Role::User);
        if !self.incident_open(&alarm.incident_id) {
            // Another of its alarms already ran the recovery that closed it
            // (one the store refused to remove ran again).
            self.skip(&alarm, "incident_closed");
        } else if self.durable.messages.last().is_none_or(|last| last.id != alarm.message_id) {
            self.skip(&alarm, "conversation_changed");
        } else if !retries_a_message
            && has_pending_interaction(&self.durable.messages, |name| config.is_client_tool(name))
        {
            // A retry of a user message that waited answers it as its own
            // turn would have: a tool left with the client does not hold it.
            self.park(&alarm);
        } else {
            self.enqueue_recovery_turn(alarm);
        }
        self.arm_alarm_timer();
    }

    /// The client's answer will continue the turn; the incident closes
    /// without spending an attempt.
    fn park(&mut self, alarm: &Alarm) {
        if self.durable.incidents.contains_key(&alarm.incident_id) {
            self.close_incident(&alarm.incident_id);
        }
        self.observe(EngineEvent::RecoveryParked { incident_id: alarm.incident_id.clone() });
    }

    fn skip(&mut self, alarm: &Alarm, reason: &str) {
        if self.durable.incidents.contains_key(&alarm.incident_id) {
            self.close_incident(&alarm.incident_id);
        }
        self.stand_down(alarm, reason);
    }

    /// A recovery that will not run, its incident closed.
    fn stand_down(&mut self, alarm: &Alarm, reason: &str) {
        self.observe(EngineEvent::RecoverySkipped { incident_id: alarm.incident_id.clone(), reason: reason.into() });
        // What changed the conversation may be a user message nothing
        // answers (a crash took its turn before it was recorded).
        self.recover_unanswered_user_message();
        // A continuation held for this recovery is owed again.
        if !self.recovery_pending() {
            self.rearm_pending();
        }
    }

    fn enqueue_recovery_turn(&mut self, alarm: Alarm) {
        let (request_id, write) = self.next_id("r");
        self.commit(vec![write]);
        self.enqueue(QueuedTurn {
            request_id,
            kind: TurnKind::Recovery,
            root_request_id: alarm.root_request_id,
            callback: None,
            delivery_id: None,
            incident_id: Some(alarm.incident_id),
            options: self.stored_turn_options(),
            answers: None,
        });
    }

    /// The session stayed busy past the stable timeout: try again later,
    /// spending an attempt.
    pub(super) fn on_stable_deadline(&mut self) {
        let Some(wait) = self.recovery_wait.take() else {
            return;
        };
        let alarm = wait.alarm;
        let delay_ms = self.config.recovery.stable_retry_delay_ms;
        let root = alarm.root_request_id.as_str();
        self.begin_recovery(
            Some(&alarm.incident_id),
            Ends { root, request: root },
            &alarm.message_id,
            Cause::StableTimeout,
            delay_ms,
        );
    }

    /// Before a recovery turn's first model call: drop a tool call the
    /// interruption left half-streamed, so the step is regenerated.
    /// Returns whether the transcript changed (the caller tells the
    /// clients once it is committed).
    pub(super) fn truncate_unfinished_tool_call(&mut self) -> bool {
        if self.config.regressions.has(Regression::ContinueMidToolInput) {
            return false;
        }
        let Some(leaf) = leaf_assistant(&self.durable.messages) else {
            return false;
        };
        if recovery_strategy(Some(leaf)) != "truncate" {
            return false;
        }
        // Every call still streaming its input goes, not only the last: a
        // parallel step can leave several half-streamed.
        let mut truncated = leaf.clone();
        truncated.parts.retain(|part| !matches!(part, Part::Tool(tool) if tool.state == ToolState::InputStreaming));
        drop_orphan_step_starts(&mut truncated);
        self.commit(vec![Write::PutMessage(truncated)]);
        true
    }

    /// A recovery turn ended: success closes the incident; a failure ends it
    /// (a write the store refused gives it up, `recovery_error`, before the
    /// turn's end); done with nothing new is an attempt without progress.
    pub(super) fn on_recovery_turn_finished(&mut self, turn: &super::turn::Turn, message_id: &str, status: TurnStatus) {
        let Some(incident_id) = turn.incident_id.clone() else {
            return;
        };
        match status {
            TurnStatus::Completed if turn.produced_output => {
                // Incidents a crash opened twice for the same user message
                // (one a restart left orphaned) are answered by this one too.
                let mut closed = self.answered_incidents(true);
                if !closed.contains(&incident_id) {
                    closed.push(incident_id.clone());
                }
                self.close_incidents(closed);
                self.observe(EngineEvent::RecoveryCompleted { incident_id });
            }
            TurnStatus::Interrupted | TurnStatus::Skipped => {}
            // Given up as the refusal was handled, before its consumers were told.
            TurnStatus::Error if turn.store_refused => {}
            TurnStatus::Error => self.fail_incident(incident_id),
            _ => {
                // Done with nothing new: no progress, the next attempt runs.
                let delay_ms = self.config.recovery.stable_retry_delay_ms;
                let root = turn.root_request_id.as_str();
                let ends = Ends { root, request: root };
                self.begin_recovery(Some(&incident_id), ends, message_id, Cause::FailedAttempt, delay_ms);
            }
        }
    }

    /// The store refused a recovery turn's write: the incident is spent
    /// (the host's hook first). The turn's own terminal frame carries the
    /// terminal message, so nothing more goes out here; a give-up the store
    /// refuses to record is never recovered again in this process.
    pub(super) fn give_up_refused(&mut self, incident_id: &str, request_id: &str) {
        let Some(existing) = self.durable.incidents.get(incident_id).cloned() else {
            return;
        };
        let reason = "recovery_error";
        let incident = Incident {
            status: "exhausted".to_string(),
            hook_owed: Some(reason.to_string()),
            last_attempt_ms: clock::wall_ms(),
            ..existing
        };
        if !self.exhaust(incident, reason, request_id, false) {
            self.unrecorded.closed_incidents.insert(incident_id.to_string());
            self.look_again_shortly();
        }
    }

    /// Incidents still attempting for the latest user message (an
    /// incident's id ends with it): a turn that answered the message
    /// answered them. `scheduled_too` takes those with an alarm pending as
    /// well: a recovery answers for every recovery of the message, while a
    /// continuation never runs beside a scheduled one (it waits for it).
    pub(super) fn answered_incidents(&self, scheduled_too: bool) -> Vec<String> {
        let latest_user = self.latest_user();
        let Some(latest_user) = latest_user else {
            return Vec::new();
        };
        let about_it = |incident: &&Incident| {
            incident.status == "attempting"
                && (scheduled_too || !self.has_alarm(&incident.id))
                && is_about(&incident.id, &latest_user.id)
        };
        self.durable.incidents.values().filter(about_it).map(|incident| incident.id.clone()).collect()
    }

    fn has_alarm(&self, incident_id: &str) -> bool {
        self.durable.alarms.iter().any(|alarm| alarm.incident_id == incident_id)
    }

    /// A turn other than a recovery answered the latest user message: the
    /// incidents about it that a crash or a refused schedule left with no
    /// alarm are over (rescued, they would continue a complete answer).
    pub(super) fn close_answered_incidents(&mut self) {
        let answered = self.answered_incidents(false);
        if !answered.is_empty() {
            self.close_incidents(answered);
        }
    }

    /// Whether to keep a tool part out of repair: only a half-streamed call,
    /// and only under the regression that continues from it.
    pub(super) fn repair_keeps(&self, state: ToolState) -> bool {
        state == ToolState::InputStreaming && self.config.regressions.has(Regression::ContinueMidToolInput)
    }
}

/// The user message an incident is about: the latest when it was opened
/// (its id ends with it).
fn about(incident_id: &str) -> Option<&str> {
    incident_id.rsplit_once(':').map(|(_, about)| about)
}

fn is_about(incident_id: &str, message_id: &str) -> bool {
    about(incident_id) == Some(message_id)
}

/// Drops every `step-start` with no content after it before the next step
/// (or the end): what removing a step's only parts leaves behind.
fn drop_orphan_step_starts(message: &mut Message) {
    let parts = std::mem::take(&mut message.parts);
    let mut kept: Vec<Part> = Vec::with_capacity(parts.len());
    for part in parts.to_vec() {
        if matches!(part, Part::StepStart) && matches!(kept.last(), Some(Part::StepStart)) {
            kept.pop();
        }
        kept.push(part);
    }
    message.parts = kept.into();
    drop_trailing_step_start(message);
}
