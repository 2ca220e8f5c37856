//! One chat session: an actor that owns the transcript, the serial turn queue
//! and the auto-continuation barrier.
//!
//! Every input (client frames, `chat()` calls, tool results, model chunks,
//! timers) is handled one at a time by a single task, so applies commit in
//! arrival order by construction and the engine's decisions depend only on
//! the order inputs arrive in, which the runtime's seed fixes.

mod barrier;
mod delivery;
mod handle;
mod interaction;
mod recovery;
mod stall;
mod step;
mod turn;

use std::collections::{BTreeMap, VecDeque};

use crate::clock::{self, Instant};
use crate::config::EngineConfig;
use crate::durable::{DurableState, TurnKind, Write};
use crate::events::EngineEvent;
use crate::input::{Input, InputSink};
use crate::messenger::Reports;
use crate::ports::{Connection, Frame, Ports};
use crate::seam::Engine;

pub use handle::{Activity, SessionHandle};

use barrier::Barrier;
use turn::{QueuedTurn, Turn};

/// Deadlines the actor waits on besides its inbox and the model stream.
#[derive(Default)]
struct Timers {
    coalesce: Option<Instant>,
    /// Only under the `barrier-fixed-timeout` regression.
    barrier_fixed: Option<Instant>,
    stall: Option<Instant>,
    retry: Option<Instant>,
    alarm: Option<Instant>,
    /// A due recovery waits for the session to go idle until this deadline.
    stable: Option<Instant>,
    /// The store refused what boot recovery wrote: look again for the work
    /// those writes would have scheduled.
    reconcile: Option<Instant>,
}

impl Timers {
    fn earliest(&self) -> Option<Instant> {
        [self.coalesce, self.barrier_fixed, self.stall, self.retry, self.alarm, self.stable, self.reconcile]
            .into_iter()
            .flatten()
            .min()
    }
}

pub(crate) struct Session {
    config: EngineConfig,
    ports: Ports,
    durable: DurableState,
    /// Where model chunks and server-tool results come back.
    sink: InputSink,
    /// What messenger callbacks reported, handled before the next input.
    reports: Reports,
    connections: BTreeMap<u64, Box<dyn Connection>>,
    queue: VecDeque<QueuedTurn>,
    /// The running turn; `Some` exactly while a stream is open (the
    /// reference's `streaming_assistant`).
    turn: Option<Turn>,
    /// The model call the running attempt streams from.
    model_call: Option<u32>,
    barrier: Barrier,
    recovery_wait: Option<recovery::RecoveryWait>,
    timers: Timers,
    /// Writes held to commit as one atomic batch, with the mirror as it was
    /// before them (see `stage`).
    staged: Option<(Vec<Write>, DurableState)>,
    /// The store refused a commit while the current input was handled.
    refused: bool,
    /// What this process did whose record the store refused: never done
    /// again while it lives, only recorded again.
    unrecorded: Unrecorded,
    /// Replies on their way to the chat surface, by delivery id.
    outgoing: BTreeMap<String, delivery::Outgoing>,
    /// Keys of the `chat()` calls this process took, stored or not: a call
    /// whose storing was refused was answered, and is not taken again.
    chats_taken: std::collections::BTreeSet<String>,
    /// Connections offered a resume of turn (value) and not yet acked:
    /// nothing is broadcast to them meanwhile.
    resuming: BTreeMap<u64, String>,
    /// Whether a client may still show a recovery under way: the last
    /// recovery status broadcast, or one sent with the state on connect.
    recovering_shown: bool,
    /// Booted over a predecessor's store: a connection handed over may
    /// still show what that process told it.
    restarted: bool,
    /// The id counter as the store last took it: an id drawn in a commit
    /// the store refused is still this process's, and the next commit it
    /// takes records the counter past it (ids never repeat, across a
    /// restart too).
    stored_next_id: u64,
}

/// A turn's end the store refused: the writes that record it, and its
/// message as the store held it then (a later commit to that message wins
/// over the refused one).
pub(crate) struct UnrecordedEnd {
    pub writes: Vec<Write>,
    /// The reply the turn wrote into.
    pub message_id: String,
    pub message_then: Option<crate::transcript::Message>,
}

/// Effects this process produced whose durable record was refused. Putting
/// the store right later (as boot does) must not repeat them: the process
/// knows they happened even though the store does not.
#[derive(Default)]
pub(crate) struct Unrecorded {
    /// Deliveries posted whose `completed` checkpoint was refused.
    pub posted: std::collections::BTreeSet<String>,
    /// Spent incidents whose `on_exhausted` hook ran.
    pub hooks_called: std::collections::BTreeSet<String>,
    /// Turns that ended here while the store still holds them in flight:
    /// not dead turns to recover, only ends to record.
    pub ended_turns: BTreeMap<String, UnrecordedEnd>,
    /// Incidents closed here whose removal was refused.
    pub closed_incidents: std::collections::BTreeSet<String>,
    /// Requests whose terminal recovery message went out as their terminal
    /// frame while the store refused its record: they are not then told
    /// `done` as well.
    pub terminal_told: std::collections::BTreeSet<String>,
}

/// Rounds of refused commits handled before the session waits for its next
/// input (a store that refuses everything must not spin the actor).
const MAX_REFUSAL_ROUNDS: usize = 8;

/// How long after a refused write (boot's among them) the session looks
/// again for what it left undone and for work to recover: not at once,
/// into a store that may still be refusing.
pub(super) const RECONCILE_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// What a turn whose reply could not be saved tells its user.
pub const STORE_REFUSED_MESSAGE: &str = "Your conversation could not be saved. Please send your message again.";

impl Session {
    /// Loads the durable state and recovers what a dead predecessor left.
    pub(crate) fn boot(config: EngineConfig, ports: Ports, sink: InputSink) -> Self {
        let durable = ports.store.load();
        let restarted = !durable.messages.is_empty();
        let stored_next_id = durable.next_id;
        let mut session = Session {
            config,
            ports,
            durable,
            sink,
            reports: Reports::default(),
            connections: Default::default(),
            queue: Default::default(),
            turn: None,
            model_call: None,
            barrier: Default::default(),
            recovery_wait: None,
            timers: Timers::default(),
            staged: None,
            refused: false,
            unrecorded: Default::default(),
            outgoing: Default::default(),
            chats_taken: Default::default(),
            resuming: Default::default(),
            recovering_shown: false,
            restarted,
            stored_next_id,
        };
        session.recover();
        session.reconcile_if_refused();
        // Boot may queue turns (a messenger delivery answered again): start
        // them now, not at some later input that may never come, and fail
        // one whose start the store refused.
        session.settle_refusals();
        while let Some((delivery_id, event)) = session.reports.take() {
            session.on_delivery_event(&delivery_id, event);
            session.settle_refusals();
        }
        session
    }

    /// After every input: start what is queued and handle refused commits,
    /// then each delivery report as an input of its own, before any input
    /// from outside.
    fn settle(&mut self) {
        self.settle_refusals();
        while let Some((delivery_id, event)) = self.reports.take() {
            self.on_delivery_event(&delivery_id, event);
            self.settle_refusals();
        }
        self.settle_recovery_status();
    }

    /// Clients shown a recovery under way are told once none is, whatever
    /// path ended it (completed, parked, skipped, exhausted, an incident
    /// closed only once the store took it, a refused schedule), and not
    /// while another incident's recovery is still scheduled: nobody keeps
    /// a "reconnecting" that never ends, or loses one that still runs.
    fn settle_recovery_status(&mut self) {
        if !self.recovering_shown {
            return;
        }
        if !self.recovery_under_way() {
            self.broadcast(Frame::Recovering(false));
        }
    }

    /// The latest user message in the store.
    fn latest_user(&self) -> Option<&crate::transcript::Message> {
        self.durable.messages.iter().rev().find(|message| message.role == crate::Role::User)
    }

    /// A failure told to consumers, recorded for clients that connect
    /// later, with the user message it is about.
    fn terminal(
        &self,
        request_id: &str,
        message: String,
        user_message: Option<String>,
    ) -> crate::durable::TerminalStatus {
        crate::durable::TerminalStatus { request_id: request_id.to_string(), message, user_message }
    }

    /// The user message a reply answers: the last one before it in the
    /// transcript, or (a reply not stored yet) the last one up to the
    /// message it goes after, else the latest.
    fn answered_by(&self, reply_id: &str, after: Option<&str>) -> Option<String> {
        let messages = &self.durable.messages;
        let position = |id: &str| messages.iter().position(|message| message.id == id);
        // The messages up to the reply, or up to what it goes after.
        let before = match (position(reply_id), after.and_then(position)) {
            (Some(at), _) => &messages[..at],
            (None, Some(at)) => &messages[..=at],
            (None, None) => &messages[..],
        };
        before.iter().rev().find(|message| message.role == crate::Role::User).map(|user| user.id.clone())
    }

    /// Whether consumers were told the turn answering user message
    /// `message_id` failed, by request `since` or one started after it
    /// (stored, or owed to the store): no recovery answers it after that.
    /// A turn asked for after the failure is not covered by it.
    fn failure_told_about(&self, message_id: &str, since: &str) -> bool {
        let about = |status: &crate::durable::TerminalStatus| {
            status.user_message.as_deref() == Some(message_id)
                && request_number(&status.request_id) >= request_number(since)
        };
        let owed = self.unrecorded.ended_turns.values().flat_map(|end| &end.writes);
        self.durable.terminal_status.as_ref().is_some_and(about)
            || owed.into_iter().any(|write| matches!(write, Write::Terminal(Some(status)) if about(status)))
    }

    /// A recovery is scheduled, waiting for an idle session, or running. (It
    /// is never left queued: it is queued only when nothing runs or waits,
    /// and starts at once.)
    fn recovery_under_way(&self) -> bool {
        self.recovery_pending() || self.turn.as_ref().is_some_and(|turn| turn.kind == TurnKind::Recovery)
    }

    /// A refused commit fails what was running when the store refused it,
    /// before anything queued starts: a turn started after the refusal
    /// wrote nothing the store refused. What starts next may be refused
    /// too. Bounded: each round ends a turn for good.
    fn settle_refusals(&mut self) {
        self.after_refused_commit();
        self.settle_round();
        for _ in 0..MAX_REFUSAL_ROUNDS {
            if !self.after_refused_commit() {
                break;
            }
            self.settle_round();
        }
    }

    fn on_input(&mut self, input: Input) {
        match input {
            Input::Connect { connection_id, connection } => self.connect(connection_id, connection),
            Input::Disconnect { connection_id } => {
                self.connections.remove(&connection_id);
                self.resuming.remove(&connection_id);
            }
            Input::ResumeRequest { connection_id } => self.on_resume_request(connection_id),
            Input::ResumeAck { connection_id, request_id } => self.on_resume_ack(connection_id, &request_id),
            Input::UserMessage { text, options } => self.accept_user_message(text, options, None),
            Input::Chat { key, text, options, callback } => self.accept_chat(key, text, options, callback),
            Input::Deliver { delivery_id, text } => self.accept_delivery(delivery_id, text),
            Input::ToolResult { result, auto_continue } => self.on_tool_result(result, auto_continue),
            Input::Approval { call_id, approved, auto_continue } => self.on_approval(&call_id, approved, auto_continue),
            Input::ServerToolDone { request_id, call_id, outcome } => {
                self.on_server_tool_done(&request_id, &call_id, outcome)
            }
            Input::PostDone { post, delivery_id, outcome } => self.on_post_done(post, &delivery_id, outcome),
            Input::Model { call, event } => {
                // Chunks of an abandoned call may still be on their way.
                if self.model_call == Some(call) {
                    self.on_stream_event(event);
                }
            }
            Input::Timer => self.on_deadlines(),
        }
    }

    fn on_deadlines(&mut self) {
        let now = clock::now();
        let due = |deadline: &mut Option<Instant>| deadline.is_some_and(|at| at <= now) && deadline.take().is_some();
        if due(&mut self.timers.stall) {
            self.on_stall_deadline();
        }
        if due(&mut self.timers.retry) {
            self.on_retry_deadline();
        }
        if due(&mut self.timers.coalesce) {
            self.on_coalesce_timer();
        }
        if due(&mut self.timers.barrier_fixed) {
            self.on_barrier_fixed_timeout();
        }
        if due(&mut self.timers.alarm) {
            self.on_alarm_deadline();
        }
        if due(&mut self.timers.stable) {
            self.on_stable_deadline();
        }
        if due(&mut self.timers.reconcile) {
            if self.turn.is_some() || !self.queue.is_empty() {
                // A running turn is not a dead one: look once it is over.
                self.timers.reconcile = Some(clock::now() + RECONCILE_AFTER);
            } else {
                let before = self.durable.messages.clone();
                self.recover_what_died();
                self.reconcile_if_refused();
                // Clients are shown what putting the store right changed.
                if self.durable.messages != before {
                    self.broadcast(Frame::Messages(self.live_transcript()));
                }
            }
        }
    }

    /// The transcript as a client must be shown it: the store's, with the
    /// streaming message as it stands (unflushed chunks included), so the
    /// chunks that follow extend exactly what it shows. An accumulator with
    /// nothing in it yet is not a message to show.
    pub(super) fn live_transcript(&self) -> Vec<crate::transcript::Message> {
        let mut messages = self.stored_messages_with_turn();
        let unseen = |message: &crate::transcript::Message| {
            message.parts.iter().all(|part| matches!(part, crate::transcript::Part::StepStart))
                && self.durable.message(&message.id).is_none()
        };
        messages.retain(|message| !unseen(message));
        messages
    }

    fn connect(&mut self, connection_id: u64, connection: Box<dyn Connection>) {
        self.recovering_shown |= self.send_state(connection.as_ref());
        self.resuming.remove(&connection_id);
        self.connections.insert(connection_id, connection);
    }

    /// What a client needs to show the conversation as it stands: the live
    /// transcript, a terminal status stored for later clients, recovery in
    /// progress. Returns whether it told the client a recovery is under way.
    fn send_state(&self, connection: &dyn Connection) -> bool {
        connection.send(Frame::Messages(self.live_transcript()));
        // A failure whose record the store has not taken yet is told too:
        // when the store takes it, this client is one that was there.
        let owed = self.unrecorded.ended_turns.values().flat_map(|end| &end.writes);
        let mut owed =
            owed.filter_map(|write| if let Write::Terminal(Some(status)) = write { Some(status) } else { None });
        if let Some(status) = owed.next_back().or(self.durable.terminal_status.as_ref()) {
            let frame = Frame::Error { request_id: status.request_id.clone(), message: status.message.clone() };
            connection.send(frame);
        }
        let recovering = self.recovery_under_way();
        if recovering || self.restarted {
            // A connection kept through a restart may show a recovery the
            // dead process never got to say was over.
            connection.send(Frame::Recovering(recovering));
        }
        recovering
    }

    /// A client asks to resume the stream: offered the running turn (and
    /// held until it acks, so no chunk reaches it before it is ready), or
    /// told nothing runs.
    fn on_resume_request(&mut self, connection_id: u64) {
        let Some(connection) = self.connections.get(&connection_id) else {
            return;
        };
        match self.turn.as_ref().map(|turn| turn.request_id.clone()) {
            Some(request_id) => {
                connection.send(Frame::StreamResuming { request_id: request_id.clone() });
                self.resuming.insert(connection_id, request_id);
            }
            None => {
                connection.send(Frame::ResumeNone);
            }
        }
    }

    /// The client is ready: it gets the state as it stands now, which holds
    /// everything streamed while it was held, and the live stream from here.
    /// An ack for anything but the offer it holds changes nothing.
    fn on_resume_ack(&mut self, connection_id: u64, request_id: &str) {
        if self.resuming.get(&connection_id).map(String::as_str) != Some(request_id) {
            return;
        }
        self.resuming.remove(&connection_id);
        if let Some(connection) = self.connections.get(&connection_id) {
            self.recovering_shown |= self.send_state(connection.as_ref());
        }
    }

    /// Sends `frame` to every open connection not held for a resume ack.
    fn broadcast(&mut self, frame: Frame) {
        if let Frame::Recovering(recovering) = frame {
            self.recovering_shown = recovering;
        }
        let held = &self.resuming;
        self.connections.retain(|id, connection| held.contains_key(id) || connection.send(frame.clone()));
    }

    /// A BUGGIFY point: the host decides whether the unlucky path is taken.
    fn buggify(&self, site: crate::ports::FaultSite) -> bool {
        self.ports.faults.fire(site)
    }

    fn observe(&self, event: EngineEvent) {
        self.ports.observer.observe(event);
    }

    /// Commits a batch and mirrors it. A failed commit changes nothing.
    /// While writes are staged, the batch joins them instead.
    fn commit(&mut self, writes: Vec<Write>) -> bool {
        if let Some((staged, _)) = self.staged.as_mut() {
            for write in &writes {
                self.durable.apply(write);
            }
            staged.extend(writes);
            return true;
        }
        let mut batch = self.owed_writes(&self.durable);
        let owed = !batch.is_empty();
        batch.extend(writes);
        if batch.is_empty() {
            return true;
        }
        self.count_ids(&mut batch, self.durable.next_id);
        if self.ports.store.commit(&batch).is_err() {
            self.refused = true;
            return false;
        }
        self.ids_counted(&batch);
        for write in &batch {
            self.durable.apply(write);
        }
        if owed {
            self.caught_up();
        }
        true
    }

    /// Records the id counter past `drawn` with `batch` when a refused
    /// commit left the store behind it.
    fn count_ids(&self, batch: &mut Vec<Write>, drawn: u64) {
        let counted = batch.iter().any(|write| matches!(write, Write::NextId(_)));
        if self.stored_next_id < drawn && !counted {
            batch.push(Write::NextId(drawn));
        }
    }

    /// The store took `batch`: the counter as it now holds it.
    fn ids_counted(&mut self, batch: &[Write]) {
        let taken = batch.iter().filter_map(|write| if let Write::NextId(id) = write { Some(*id) } else { None });
        self.stored_next_id = taken.fold(self.stored_next_id, u64::max);
    }

    /// The store took what it had refused with a later commit: forget it,
    /// and show clients the messages that changed with it.
    fn caught_up(&mut self) {
        self.forget_recorded();
        self.broadcast(Frame::Messages(self.live_transcript()));
    }

    /// Holds every commit until `commit_staged`, so related state (a tool
    /// result and the continuation it owes; a cleared intent and the turn
    /// that took it) lands in one atomic batch: a crash cannot fall between
    /// them. Returns false when writes are already staged (the outer stager
    /// commits).
    fn stage(&mut self) -> bool {
        if self.staged.is_some() {
            return false;
        }
        self.staged = Some((Vec::new(), self.durable.clone()));
        true
    }

    /// Commits the staged writes as one batch. A failed commit restores the
    /// mirror: nothing of the batch happened.
    fn commit_staged(&mut self) -> bool {
        let Some((writes, before)) = self.staged.take() else {
            return true;
        };
        let mut batch = self.owed_writes(&before);
        let owed = !batch.is_empty();
        batch.extend(writes);
        if batch.is_empty() {
            return true;
        }
        let drawn = self.durable.next_id;
        self.count_ids(&mut batch, drawn);
        if self.ports.store.commit(&batch).is_err() {
            // The ids drawn stay drawn: one may already have been shown.
            self.durable = before;
            self.durable.next_id = drawn;
            self.refused = true;
            return false;
        }
        self.ids_counted(&batch);
        if owed {
            // The mirror as the store now holds it: what was owed first.
            self.durable = before;
            for write in &batch {
                self.durable.apply(write);
            }
            self.caught_up();
        }
        true
    }

    /// The store refused a commit: what the engine holds in memory is ahead
    /// of what would survive a restart. The running turn fails (its reply
    /// could not be saved) and says so, and clients are shown the
    /// transcript as it stands again, so nobody keeps what was not kept.
    /// What boot recovers is written at boot: if the store refused it, the
    /// work it would have scheduled is looked for again shortly.
    fn reconcile_if_refused(&mut self) {
        if self.refused {
            self.timers.reconcile = Some(clock::now() + RECONCILE_AFTER);
        }
    }

    /// What a refused write left undone is looked for again shortly; a look
    /// already due sooner stays.
    pub(super) fn look_again_shortly(&mut self) {
        self.timers.reconcile.get_or_insert(clock::now() + RECONCILE_AFTER);
    }

    /// Returns whether there was anything to do.
    fn after_refused_commit(&mut self) -> bool {
        if !std::mem::take(&mut self.refused) {
            return false;
        }
        self.observe(crate::events::EngineEvent::StoreRefused);
        if let Some(turn) = self.turn.as_mut() {
            // A recovery the store refuses gives up, as the reference's does
            // when its attempt throws: its consumers are told once that it
            // could not recover, and no later attempt answers after that.
            turn.store_refused = true;
            let message = match (turn.kind, turn.incident_id.clone()) {
                (TurnKind::Recovery, Some(incident_id)) => {
                    let request_id = turn.request_id.clone();
                    self.give_up_refused(&incident_id, &request_id);
                    self.config.recovery.terminal_message.clone()
                }
                _ => STORE_REFUSED_MESSAGE.to_string(),
            };
            // The attempt streaming now is not kept: no parts of a failed
            // attempt, as after a provider failure.
            self.abandon_streaming_attempt();
            self.end_turn(crate::events::TurnStatus::Error, Some(message));
        }
        self.broadcast(Frame::Messages(self.live_transcript()));
        true
    }

    /// Starts what is queued and lets a recovery that waited for an idle
    /// session proceed (the reference's wait-until-stable), not at its timeout.
    fn settle_round(&mut self) {
        self.pump_queue();
        self.run_recovery_when_stable();
        self.pump_queue();
    }

    /// A fresh id, durable so it never repeats after a restart.
    fn next_id(&mut self, prefix: &str) -> (String, Write) {
        self.durable.next_id += 1;
        (format!("{prefix}{}", self.durable.next_id), Write::NextId(self.durable.next_id))
    }
}

/// The order of a request id this engine made (`r<n>`, from the durable
/// counter); any other id (a recovery's `retry-…` root) comes first.
fn request_number(request_id: &str) -> u64 {
    request_id.strip_prefix('r').and_then(|number| number.parse().ok()).unwrap_or(0)
}

/// Boots the built-in engine from its durable store, for a host that
/// drives it itself (`SessionHandle::spawn` drives it on a task).
pub fn boot(config: EngineConfig, ports: Ports, sink: InputSink) -> Box<dyn Engine> {
    Box::new(Session::boot(config, ports, sink))
}

impl Engine for Session {
    fn deliver(&mut self, input: Input) {
        self.on_input(input);
        self.settle();
    }

    fn next_timer(&self) -> Option<Instant> {
        self.timers.earliest()
    }
}
