//! Server-tool executions. They run inside the engine process, so an
//! eviction kills one mid-flight; the trace records each completed run (the
//! side effect), which the no-repeat invariant counts. Only tools the
//! scenario declares as server (or approval) tools run.

use std::collections::BTreeMap;

use serde_json::Value;
use tokio::sync::oneshot;
use turnsim_engine::ports::{ServerToolCall, ServerTools};
use turnsim_engine::{ToolKind, ToolOutcome};

use super::rng::SharedRng;
use crate::history::Boundary;
use crate::scenario::ToolSpec;
use crate::trace::{Event, Trace};

pub struct SimServerTools {
    pub specs: BTreeMap<String, ToolSpec>,
    pub rng: SharedRng,
    pub trace: Trace,
}

impl ServerTools for SimServerTools {
    fn execute(&self, call: ServerToolCall) -> oneshot::Receiver<ToolOutcome> {
        let (done, result) = oneshot::channel();
        self.trace.cross(Boundary::ServerToolCall { call: call.clone() });
        let spec = self.specs.get(&call.tool_name);
        if !spec.is_some_and(|spec| matches!(spec.kind, ToolKind::Server | ToolKind::Approval)) {
            // Not a server tool: there is nothing here to run. The call is
            // dropped (the engine sees a lost execution) and the oracle flags
            // the attempt.
            return result;
        }
        let duration_ms = spec.map_or(0, |spec| self.rng.sample(spec.duration_ms));
        let outcome = match spec {
            Some(ToolSpec { error: Some(error), .. }) => ToolOutcome::Error(Some(error.clone())),
            Some(ToolSpec { output: Some(output), .. }) => ToolOutcome::Output(output.clone()),
            _ => ToolOutcome::Output(Value::String("ok".into())),
        };
        let trace = self.trace.clone();
        tokio::spawn(async move {
            super::pause_ms(duration_ms).await;
            trace.record(Event::ServerToolRun { call_id: call.call_id.clone(), tool_name: call.tool_name });
            trace.cross(Boundary::ServerToolDone { call_id: call.call_id, outcome: outcome.clone() });
            let _ = done.send(outcome);
        });
        result
    }
}
