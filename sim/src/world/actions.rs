//! Scripted actions and eviction faults: each waits for its time or trigger,
//! then acts on the world.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use madsim::runtime::Handle;
use tokio::time::Duration;
use turnsim_engine::TurnOptions;

use super::caller::CallerEnd;
use super::link::LinkDelay;
use super::rng::SharedRng;
use super::switchboard::EngineLink;
use super::{pause_ms, SimCallback, World};
use crate::scenario::{ActionKind, Evict, Fault, Trigger, Via, When};
use crate::trace::{Event, Trace};

impl World {
    pub(super) fn start_actions(&self) {
        let rng = SharedRng::derive(self.seed, "actions");
        let mut chat_id = 0;
        for action in &self.scenario.scenario.actions {
            if matches!(action.kind, ActionKind::UserMessage(ref message) if message.via == Via::Chat) {
                chat_id += 1;
            }
            let act = self.clone().perform(action.kind.clone(), chat_id, rng.clone());
            self.spawn_when(&action.when, &rng, false, act);
        }
        for (index, fault) in self.scenario.scenario.faults.iter().enumerate() {
            if let Fault::Evict(evict) = fault {
                let evict_action = Evict { restart_after_ms: evict.restart_after_ms, memory_only: evict.memory_only };
                let (world, fault_rng) = (self.clone(), rng.clone());
                let act = async move {
                    // Its trigger matched: the fault landed, whatever the
                    // process was doing (one already down is not killed again).
                    world.fired_faults.lock().expect("fired faults lock").insert(index);
                    world.evict(&evict_action, &fault_rng).await
                };
                self.spawn_when(&evict.when, &rng, evict.at_once, act);
            }
        }
    }

    /// Runs `act` at its time (counted as busy from the start) or when its
    /// trigger matches (busy from then on; a trigger that never matches
    /// leaves nothing outstanding). An eviction `at_once` kills the process
    /// at the very event, not at its next await.
    fn spawn_when(
        &self,
        when: &When,
        rng: &SharedRng,
        at_once: bool,
        act: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let busy = self.busy.clone();
        let trace = self.trace.clone();
        let healed_at_us = self.healed_at_us.clone();
        // The world re-checks quiescence on trace activity: say when work ends,
        // and when the last scripted work ends, that faults have healed.
        let done = move |busy: &std::sync::atomic::AtomicUsize| {
            if busy.fetch_sub(1, Ordering::SeqCst) == 1 {
                healed_at_us.store(crate::trace::sim_now().as_micros() as u64, Ordering::SeqCst);
            }
            trace.poke();
        };
        match when {
            When::AtMs(range) => {
                busy.fetch_add(1, Ordering::SeqCst);
                let at_ms = rng.sample(*range);
                tokio::spawn(async move {
                    pause_ms(at_ms).await;
                    act.await;
                    done(&busy);
                });
            }
            When::Trigger(trigger) => {
                // Busy from the event itself (the watcher counts it), not
                // from when this task wakes: the world may look for
                // quiescence in between.
                let fired = watch_trigger(&self.trace, trigger, self.initial.as_ref(), at_once, busy.clone());
                let delay_ms = rng.sample(trigger.delay_ms);
                tokio::spawn(async move {
                    if fired.await.is_err() {
                        return;
                    }
                    pause_ms(delay_ms).await;
                    act.await;
                    done(&busy);
                });
            }
        }
    }

    async fn perform(self, kind: ActionKind, chat_id: u32, rng: SharedRng) {
        match kind {
            ActionKind::UserMessage(message) => {
                let via = if message.via == Via::Chat { "chat" } else { "connection" };
                let options = TurnOptions { stall_timeout_ms: message.stall_timeout_ms };
                match message.via {
                    Via::Connection => {
                        let who =
                            if message.client == 1 { String::new() } else { format!(" client={}", message.client) };
                        self.trace
                            .record(Event::Action { what: format!("user-message via={via}{who} {:?}", message.text) });
                        // Checked when the file loaded: the client exists.
                        if let Some(client) = self.clients.get(message.client as usize - 1) {
                            client.send_user_message(&message.text, options).await;
                        }
                    }
                    Via::Chat => {
                        let engine = self.live_engine().await;
                        self.trace.record(Event::Action { what: format!("user-message via={via} {:?}", message.text) });
                        self.trace.record(Event::ChatCalled { chat: chat_id });
                        let caller = SimCallback::new(chat_id, self.trace.clone(), self.open_chats.clone());
                        self.call_chat(engine, chat_id, &message.text, options, Arc::new(Mutex::new(caller))).await;
                    }
                }
            }
            ActionKind::Deliver(delivery) => {
                let engine = self.live_engine().await;
                self.trace.record(Event::Action { what: format!("deliver {} {:?}", delivery.id, delivery.text) });
                engine.deliver(&delivery.id, &delivery.text);
            }
            ActionKind::Evict(evict) => self.evict(&evict, &rng).await,
            ActionKind::Disconnect(disconnect) => {
                let who = if disconnect.client == 1 { String::new() } else { format!(" {}", disconnect.client) };
                let how = if disconnect.reconnect { "" } else { " for good" };
                self.trace.record(Event::Action { what: format!("disconnect client{who}{how}") });
                if let Some(client) = self.clients.get(disconnect.client as usize - 1) {
                    client.disconnect(disconnect.reconnect.then_some(disconnect.reconnect_after_ms));
                }
            }
            ActionKind::ToolResult(result) => {
                self.trace.record(Event::Action { what: format!("tool-result {}", result.id) });
                if let Some(client) = self.clients.get(result.client as usize - 1) {
                    client.send_scripted_result(&result);
                }
            }
            ActionKind::Approval(approval) => {
                self.trace.record(Event::Action { what: format!("approval {}", approval.id) });
                if let Some(client) = self.clients.get(approval.client as usize - 1) {
                    client.send_scripted_approval(&approval);
                }
            }
        }
    }

    /// Kills the engine process and restarts it after the sampled delay. A
    /// process already down cannot be killed again: that eviction does nothing.
    async fn evict(&self, evict: &Evict, rng: &SharedRng) {
        let restart_after_ms = rng.sample(evict.restart_after_ms);
        if self.engine_down.swap(true, Ordering::SeqCst) {
            return;
        }
        let handle = Handle::current();
        // A hibernating process keeps its connections; otherwise they
        // close with it.
        let kept: Vec<u64> = match evict.memory_only {
            true => self.clients.iter().filter_map(super::Client::kept_connection).collect(),
            false => {
                self.clients.iter().for_each(super::Client::sever);
                Vec::new()
            }
        };
        if !self.trace.engine_dead() {
            self.trace.record(Event::Evicted);
            self.trace.cross(crate::history::Boundary::Killed);
            if !kept.is_empty() {
                self.trace.cross(crate::history::Boundary::KeptOpen { connections: kept.clone() });
            }
        }
        self.switchboard.clear();
        handle.kill(self.engine_node.id());
        pause_ms(restart_after_ms).await;
        self.trace.record(Event::Restarted);
        handle.restart(self.engine_node.id());
        self.engine_down.store(false, Ordering::SeqCst);
        if evict.memory_only {
            for client in &self.clients {
                client.clone().resume().await;
            }
        }
    }

    /// Sends a `chat()` call: at once, or over a slow link after its delay,
    /// maybe twice (each copy hands the engine an end of the same callback,
    /// and reaches whichever process is up when it arrives).
    async fn call_chat(
        &self,
        engine: EngineLink,
        chat: u32,
        text: &str,
        options: TurnOptions,
        caller: Arc<Mutex<SimCallback>>,
    ) {
        let link = &self.caller_link;
        if !link.to_engine.is_active() {
            return self
                .deliver_chat(engine, chat, false, text, options, CallerEnd::new(caller, None, self.trace.clone()))
                .await;
        }
        let mut waits = vec![link.to_engine.wait(false)];
        if link.to_engine.duplicates() {
            waits.push(link.to_engine.wait(false));
        }
        waits.sort();
        let back = LinkDelay::new(link.spec, link.rng.clone());
        let mut waited = Duration::ZERO;
        for (copy, wait) in waits.into_iter().enumerate() {
            tokio::time::sleep(wait - waited).await;
            waited = wait;
            let engine = self.live_engine().await;
            let again = copy > 0;
            self.trace.record(Event::ChatArrived { chat, again });
            let end = CallerEnd::new(caller.clone(), Some(back.clone()), self.trace.clone());
            self.deliver_chat(engine, chat, again, text, options, end).await;
        }
    }

    /// The RPC leaves from the caller's node.
    async fn deliver_chat(
        &self,
        engine: EngineLink,
        chat: u32,
        again: bool,
        text: &str,
        options: TurnOptions,
        end: CallerEnd,
    ) {
        let text = text.to_string();
        let call = async move { engine.chat(chat, again, &text, options, Box::new(end)) };
        let _ = self.caller_node.spawn(call).await;
    }

    /// The live engine, waiting while the process is down.
    async fn live_engine(&self) -> super::switchboard::EngineLink {
        self.switchboard.wait_for_engine().await
    }
}

fn watch_trigger(
    trace: &Trace,
    trigger: &Trigger,
    initial: &turnsim_engine::durable::DurableState,
    fence: bool,
    busy: Arc<AtomicUsize>,
) -> tokio::sync::oneshot::Receiver<()> {
    let matches = super::trigger::matcher(trigger, initial);
    if fence {
        return trace.watch_and_fence(trigger.nth, matches, busy);
    }
    trace.watch(trigger.nth, matches, busy)
}
