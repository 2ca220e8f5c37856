//! What exploration generates: a whole scenario as a small structure that
//! proptest can shrink (fewer tools, fewer faults, shorter gaps), turned into
//! the same `Scenario` a person would write.

use std::collections::BTreeMap;

use serde_json::json;
use turnsim_engine::{FinishReason, ServerToolStart, ToolKind};

use crate::scenario::{
    Action, ActionKind, AnswerSpec, CallerSpec, ChunkPoint, ClientSpec, Delivery, Disconnect, EngineSpec, EvictFault,
    Expect, Fault, FinishStep, Hook, HookFault, HttpFault, LinkSpec, PostFault, RangeMs, RecoverySpec, Reply, Scenario,
    SlowPostFault, Step, StoreFault, StoredRecord, ToolSpec, ToolStep, Trigger, UserMessage, Via, When,
    DEFAULT_HORIZON_MS,
};

/// How the user's message reaches the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    Connection,
    Chat,
    Messenger,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Latency {
    Fast,
    Slow,
    /// A person: minutes.
    Human,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ToolCase {
    pub kind: ToolKind,
    /// Text deltas (40 ms apart) streamed before this tool is emitted.
    pub gaps_before: u8,
    /// Finalised mid-stream by a `tool-call` chunk, or only at finish.
    pub finalized_mid_stream: bool,
    pub latency: Latency,
    pub errored: bool,
    pub auto_continue: bool,
    pub never_answers: bool,
    pub approve: bool,
}

/// Where an eviction lands.
#[derive(Clone, Debug, PartialEq)]
pub enum EvictWhen {
    AtMs(u64),
    /// Right after tool `index`'s result is applied, within `delay_ms`.
    AfterResult {
        index: usize,
        delay_ms: u64,
    },
    At(BoundaryPoint),
}

/// A moment on the engine's boundary an eviction can be placed at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BoundaryPoint {
    /// The commit that stores the first recovery alarm.
    AlarmStored,
    /// The commit that stores the first user message.
    UserMessageStored,
    /// The second model request (the first continuation or retry).
    SecondModelCall,
}

impl BoundaryPoint {
    fn trigger(self) -> Trigger {
        match self {
            Self::AlarmStored => Trigger { stored: Some(StoredRecord::Alarm), ..Trigger::default() },
            Self::UserMessageStored => Trigger { stored: Some(StoredRecord::UserMessage), ..Trigger::default() },
            Self::SecondModelCall => Trigger { event: Some("model.call".into()), nth: 2, ..Trigger::default() },
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum FaultCase {
    /// Call 1 parks after this share (percent) of its chunks.
    Stall {
        percent: u8,
    },
    Truncate {
        percent: u8,
    },
    Cut {
        percent: u8,
    },
    Http {
        status: u16,
    },
    Evict {
        when: EvictWhen,
        restart_after_ms: u64,
        /// Client connections outlive the process (a hibernation).
        memory_only: bool,
    },
    Disconnect {
        at_ms: u64,
        reconnect_after_ms: u64,
    },
    /// The store refuses the engine's `commit`-th commit and `times - 1`
    /// after it.
    StoreError {
        commit: u32,
        times: u32,
    },
    /// The process dies as its `commit`-th commit returns.
    CrashAtCommit {
        commit: u32,
        restart_after_ms: u64,
    },
    /// The chat surface refuses the engine's `post`-th post and `times - 1`
    /// after it (a messenger story only).
    PostRefused {
        post: u32,
        times: u32,
    },
    /// The chat surface answers the engine's `post`-th post and `times - 1`
    /// after it only `after_ms` later (a messenger story only).
    PostSlow {
        post: u32,
        times: u32,
        after_ms: u64,
    },
    /// The host's `on_exhausted` hook throws.
    HookThrows,
    /// Another user message arrives `at_ms` into the story, perhaps while
    /// a reply still streams: over the connection, through `chat()`, or as
    /// a messenger delivery of its own. Not a fault, but shrunk as one.
    Message {
        at_ms: u64,
        via: Entry,
    },
    /// Slow, racy links to the client and (in a `chat()` story) the
    /// caller: each message waits up to `delay_max_ms`; `duplicate_percent`
    /// of what is sent to the engine arrives twice. `resume`: the client
    /// runs the stream-resume handshake on every connect.
    SlowLinks {
        delay_max_ms: u64,
        reorder: bool,
        duplicate_percent: u8,
        resume: bool,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// The simulation seed: fixed, never shrunk.
    pub sim_seed: u64,
    pub entry: Entry,
    pub tools: Vec<ToolCase>,
    /// Text deltas after the last tool, before `finish`.
    pub tail_gaps: u8,
    /// Watchdog on (2 s) even without a stall fault.
    pub watchdog: bool,
    /// The engine's BUGGIFY fault points are live.
    pub buggify: bool,
    /// Server tools run only once the step's stream has finished
    /// (`server_tools: after_step`), not as their calls arrive.
    pub tools_after_step: bool,
    pub faults: Vec<FaultCase>,
}

const GAP_MS: u64 = 40;

/// The longest a generated person takes to answer a tool (`human` tools).
const SLOWEST_ANSWER_MS: u64 = 240_000;

impl Case {
    /// Commits the store refuses in all. Each may cost a tool's answer (the
    /// client is asked again and answers again), so the horizon grows by the
    /// slowest answer per refusal: a long outage is not a story cut short.
    fn refusals(&self) -> u64 {
        let times = |fault: &FaultCase| match fault {
            FaultCase::StoreError { times, .. } => u64::from(*times),
            _ => 0,
        };
        self.faults.iter().map(times).sum()
    }

    /// The scenario a person would write for this case.
    pub fn scenario(&self, name: &str) -> Scenario {
        let stalls = self.faults.iter().any(|fault| matches!(fault, FaultCase::Stall { .. }));
        Scenario {
            name: name.to_string(),
            seeds: 1,
            seed_start: self.sim_seed,
            horizon_ms: DEFAULT_HORIZON_MS + self.refusals() * SLOWEST_ANSWER_MS,
            converge_within_ms: crate::scenario::DEFAULT_CONVERGE_WITHIN_MS,
            max_events: crate::scenario::limits::DEFAULT_MAX_EVENTS,
            buggify: self.buggify,
            needs: Vec::new(),
            engine: EngineSpec {
                stall_timeout_ms: if self.watchdog || stalls { 2_000 } else { 0 },
                recovery: RecoverySpec::default(),
                tools: self.tool_specs(),
                server_tools: self.tools_after_step.then_some(ServerToolStart::AfterStep),
                ..EngineSpec::default()
            },
            stored: Default::default(),
            model: vec![self.first_call()],
            provider: Default::default(),
            client: ClientSpec {
                tools: self.answers(),
                link: self.link(),
                resume: self.faults.iter().any(|fault| matches!(fault, FaultCase::SlowLinks { resume: true, .. })),
                ..ClientSpec::default()
            },
            caller: CallerSpec { link: if self.entry == Entry::Chat { self.link() } else { LinkSpec::default() } },
            actions: [self.entry_action()].into_iter().chain(disconnect_actions(self)).chain(self.messages()).collect(),
            faults: self.faults(),
            expect: Expect::default(),
        }
    }

    /// The links' faults: the slowest and most duplicating of the case's.
    fn link(&self) -> LinkSpec {
        let mut link = LinkSpec::default();
        for fault in &self.faults {
            if let FaultCase::SlowLinks { delay_max_ms, reorder, duplicate_percent, .. } = fault {
                link.delay_ms = RangeMs { min: 0, max: link.delay_ms.max.max(*delay_max_ms) };
                link.reorder |= *reorder;
                link.duplicate = link.duplicate.max(f64::from(*duplicate_percent) / 100.0);
            }
        }
        link
    }

    fn tool_name(index: usize) -> String {
        format!("tool_{index}")
    }

    pub fn call_id(index: usize) -> String {
        format!("tc-{index}")
    }

    fn tool_specs(&self) -> BTreeMap<String, ToolSpec> {
        let spec = |tool: &ToolCase| ToolSpec {
            kind: tool.kind,
            duration_ms: if tool.kind == ToolKind::Server { RangeMs { min: 5, max: 200 } } else { RangeMs::ZERO },
            output: None,
            error: tool.errored.then(|| "server tool failed".to_string()),
            dynamic: false,
        };
        self.tools.iter().enumerate().map(|(index, tool)| (Self::tool_name(index), spec(tool))).collect()
    }

    fn answers(&self) -> BTreeMap<String, AnswerSpec> {
        let answers = self.tools.iter().enumerate().filter(|(_, tool)| tool.kind != ToolKind::Server);
        answers.map(|(index, tool)| (Self::tool_name(index), answer(tool))).collect()
    }

    /// Call 1 streams the batch with text between the tools; later calls
    /// get the model's default short answer.
    fn first_call(&self) -> Vec<Step> {
        let mut steps = vec![Step::TextStart("t-main".into())];
        for (index, tool) in self.tools.iter().enumerate() {
            push_gaps(&mut steps, tool.gaps_before);
            let finalize = if tool.finalized_mid_stream {
                crate::scenario::Finalize::Call
            } else {
                crate::scenario::Finalize::Finish
            };
            steps.push(Step::Tool(ToolStep {
                id: Self::call_id(index),
                name: Self::tool_name(index),
                input: json!({ "n": index }),
                finalize,
            }));
        }
        push_gaps(&mut steps, self.tail_gaps);
        steps.push(Step::TextEnd("t-main".into()));
        let reason = if self.tools.is_empty() { FinishReason::Stop } else { FinishReason::ToolCalls };
        steps.push(Step::Finish(FinishStep { reason, output_tokens: None }));
        steps
    }

    /// Chunks call 1 streams (what `after_chunk` counts).
    fn first_call_chunks(&self) -> u32 {
        let gaps: u32 =
            self.tools.iter().map(|tool| u32::from(tool.gaps_before)).sum::<u32>() + u32::from(self.tail_gaps);
        let tools: u32 = self.tools.iter().map(|tool| if tool.finalized_mid_stream { 4 } else { 3 }).sum();
        1 + gaps + tools + 1 + 1
    }

    fn entry_action(&self) -> Action {
        Action { when: When::AtMs(RangeMs::ZERO), kind: message(self.entry, "go", "d1") }
    }

    /// The story's later user messages, each with a text (and a delivery
    /// id) of its own: a messenger tells its deliveries apart by both.
    fn messages(&self) -> impl Iterator<Item = Action> + '_ {
        let later = self.faults.iter().filter_map(|fault| match fault {
            FaultCase::Message { at_ms, via } => Some((*at_ms, *via)),
            _ => None,
        });
        later.enumerate().map(|(index, (at_ms, via))| {
            let (text, delivery) = (format!("and then {}", index + 1), format!("d{}", index + 2));
            Action { when: When::AtMs(RangeMs::exact(at_ms)), kind: message(via, &text, &delivery) }
        })
    }

    /// Model-call faults land on successive calls (call 1, then the retry or
    /// recovery that follows it, ...); evictions are timed or triggered.
    fn faults(&self) -> Vec<Fault> {
        // Posts are refused only where a messenger posts.
        let applies = |fault: &&FaultCase| match fault {
            FaultCase::Disconnect { .. } | FaultCase::SlowLinks { .. } | FaultCase::Message { .. } => false,
            FaultCase::PostRefused { .. } | FaultCase::PostSlow { .. } => self.entry == Entry::Messenger,
            _ => true,
        };
        let scripted = self.faults.iter().filter(applies);
        let mut call = 0;
        let mut faults = Vec::new();
        for fault in scripted {
            let on_a_call = !matches!(
                fault,
                FaultCase::Evict { .. }
                    | FaultCase::StoreError { .. }
                    | FaultCase::CrashAtCommit { .. }
                    | FaultCase::PostRefused { .. }
                    | FaultCase::PostSlow { .. }
                    | FaultCase::HookThrows
            );
            if on_a_call {
                call += 1;
            }
            faults.push(self.fault(fault, call));
        }
        faults
    }

    /// Chunks model call `call` streams (later calls play the default reply).
    fn call_chunks(&self, call: u32) -> u32 {
        if call == 1 {
            self.first_call_chunks()
        } else {
            crate::scenario::default_reply().iter().filter(|op| op.is_chunk()).count() as u32
        }
    }

    fn chunk_point(&self, percent: u8, call: u32) -> ChunkPoint {
        let chunks = self.call_chunks(call);
        let after_chunk = (chunks * u32::from(percent) / 100).clamp(1, chunks.saturating_sub(1).max(1));
        ChunkPoint { call, after_chunk, optional: true }
    }

    /// Every fault is `optional`: a generated story need not reach it.
    fn fault(&self, fault: &FaultCase, call: u32) -> Fault {
        match fault {
            FaultCase::Stall { percent } => Fault::Stall(self.chunk_point(*percent, call)),
            FaultCase::Truncate { percent } => Fault::Truncate(self.chunk_point(*percent, call)),
            FaultCase::Cut { percent } => Fault::Cut(self.chunk_point(*percent, call)),
            FaultCase::Http { status } => {
                Fault::HttpError(HttpFault { call, after_chunk: 0, status: *status, optional: true })
            }
            FaultCase::Evict { when, restart_after_ms, memory_only } => Fault::Evict(EvictFault {
                when: evict_when(when),
                restart_after_ms: RangeMs::exact(*restart_after_ms),
                at_once: false,
                memory_only: *memory_only,
                optional: true,
            }),
            FaultCase::StoreError { commit, times } => Fault::StoreError(StoreFault::numbered(*commit, *times, true)),
            FaultCase::CrashAtCommit { commit, restart_after_ms } => Fault::Evict(EvictFault {
                when: When::Trigger(Trigger { event: Some("store.commit".into()), nth: *commit, ..Trigger::default() }),
                restart_after_ms: RangeMs::exact(*restart_after_ms),
                at_once: true,
                memory_only: false,
                optional: true,
            }),
            FaultCase::PostRefused { post, times } => Fault::PostFails(PostFault {
                post: *post,
                times: *times,
                error: "the chat surface refused the post".into(),
                optional: true,
            }),
            FaultCase::PostSlow { post, times, after_ms } => {
                let after_ms = RangeMs::exact(*after_ms);
                Fault::PostSlow(SlowPostFault { post: *post, times: *times, after_ms, optional: true })
            }
            FaultCase::HookThrows => Fault::HookThrows(HookFault {
                hook: Hook::OnExhausted,
                call: 1,
                times: 1,
                error: "the hook threw".into(),
                optional: true,
            }),
            FaultCase::Disconnect { .. } => unreachable!("disconnects are actions"),
            FaultCase::SlowLinks { .. } => unreachable!("links are the client's and the caller's"),
            FaultCase::Message { .. } => unreachable!("messages are actions"),
        }
    }
}

fn evict_when(when: &EvictWhen) -> When {
    match when {
        EvictWhen::AtMs(at) => When::AtMs(RangeMs::exact(*at)),
        EvictWhen::AfterResult { index, delay_ms } => When::Trigger(Trigger {
            tool: Some(Case::call_id(*index)),
            state: Some("output-available".into()),
            delay_ms: RangeMs::exact(*delay_ms),
            ..Trigger::default()
        }),
        EvictWhen::At(point) => When::Trigger(point.trigger()),
    }
}

/// `gaps` text deltas 40 ms apart, written as one `repeat` step.
fn push_gaps(steps: &mut Vec<Step>, gaps: u8) {
    if gaps > 0 {
        let gap = vec![Step::SleepMs(RangeMs::exact(GAP_MS)), Step::TextDelta(".".into())];
        steps.push(Step::Repeat { times: u32::from(gaps), steps: gap });
    }
}

fn answer(tool: &ToolCase) -> AnswerSpec {
    let answer_after_ms = match tool.latency {
        Latency::Fast => RangeMs { min: 0, max: 50 },
        Latency::Slow => RangeMs { min: 100, max: 1_500 },
        Latency::Human => RangeMs { min: 60_000, max: SLOWEST_ANSWER_MS },
    };
    let reply = match () {
        _ if tool.never_answers => Reply::Never,
        _ if tool.kind == ToolKind::Approval => Reply::Approve(tool.approve),
        _ if tool.errored => Reply::Error("tool failed".into()),
        _ => Reply::Output(json!("ok")),
    };
    AnswerSpec { answer_after_ms, reply, auto_continue: tool.auto_continue }
}

/// Disconnects are actions, not faults, in the scenario format.
/// A user message with `text` as it arrives by `via`.
fn message(via: Entry, text: &str, delivery: &str) -> ActionKind {
    let user = |via| ActionKind::UserMessage(UserMessage { text: text.into(), via, client: 1, stall_timeout_ms: None });
    match via {
        Entry::Connection => user(Via::Connection),
        Entry::Chat => user(Via::Chat),
        Entry::Messenger => ActionKind::Deliver(Delivery { id: delivery.into(), text: text.into() }),
    }
}

pub fn disconnect_actions(case: &Case) -> Vec<Action> {
    case.faults
        .iter()
        .filter_map(|fault| match fault {
            FaultCase::Disconnect { at_ms, reconnect_after_ms } => Some(Action {
                when: When::AtMs(RangeMs::exact(*at_ms)),
                kind: ActionKind::Disconnect(Disconnect {
                    reconnect_after_ms: RangeMs::exact(*reconnect_after_ms),
                    reconnect: true,
                    client: 1,
                }),
            }),
            _ => None,
        })
        .collect()
}
