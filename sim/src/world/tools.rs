//! Server-tool executions. They run inside the engine process, so an
//! eviction kills one mid-flight; the trace records each completed run (the
//! side effect), which the no-repeat invariant counts. Only tools the
//! scenario declares as server (or approval) tools run.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use serde_json::Value;
use turnsim_engine::ports::{ServerToolCall, ServerTools};
use turnsim_engine::{Input, InputSink, ToolKind, ToolOutcome};

use super::outstanding::Outstanding;
use super::rng::SharedRng;
use crate::history::Boundary;
use crate::scenario::ToolSpec;
use crate::trace::{Event, Trace};

pub struct SimServerTools {
    pub specs: BTreeMap<String, ToolSpec>,
    pub rng: SharedRng,
    pub trace: Trace,
    /// Executions started, each with whether it finished.
    pub executions: Outstanding,
}

impl ServerTools for SimServerTools {
    fn start(&self, request_id: &str, call: ServerToolCall, sink: InputSink) {
        if self.trace.engine_dead() {
            return;
        }
        let request_id = request_id.to_string();
        self.trace.cross(Boundary::ServerToolCall { call: call.clone() });
        let spec = self.specs.get(&call.tool_name);
        if !spec.is_some_and(|spec| matches!(spec.kind, ToolKind::Server | ToolKind::Approval)) {
            // Not a server tool: there is nothing here to run. The engine
            // sees a lost execution and the oracle flags the attempt.
            sink.send(Input::ServerToolDone { request_id, call_id: call.call_id, outcome: None });
            return;
        }
        let duration_ms = spec.map_or(0, |spec| self.rng.sample(spec.duration_ms));
        let outcome = match spec {
            Some(ToolSpec { error: Some(error), .. }) => ToolOutcome::Error(Some(error.clone())),
            Some(ToolSpec { output: Some(output), .. }) => ToolOutcome::Output(output.clone()),
            _ => ToolOutcome::Output(Value::String("ok".into())),
        };
        let (trace, done) = (self.trace.clone(), self.executions.start(&sink));
        tokio::spawn(async move {
            super::pause_ms(duration_ms).await;
            trace.record(Event::ServerToolRun { call_id: call.call_id.clone(), tool_name: call.tool_name });
            sink.send(Input::ServerToolDone { request_id, call_id: call.call_id, outcome: Some(outcome) });
            done.store(true, Ordering::SeqCst);
        });
    }
}
