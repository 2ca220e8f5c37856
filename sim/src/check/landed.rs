//! A scripted fault the run never reached proved nothing: a stall aimed at
//! model call 3 of a run that makes two, a refusal of a commit that never
//! comes. Each such fault fails the run with its place in the file, unless
//! it says `optional: true`. Judged from what the world did (the mock
//! model's streams, the store's commits, the surface's posts, the host's
//! hook calls), never from the engine's account.

use super::{CheckInput, Violation};
use crate::scenario::Fault;
use crate::trace::Event;

pub const CHECK: &str = "fault-landed";

pub fn check(input: &CheckInput) -> Vec<Violation> {
    let events = &input.run.events;
    let file = input.scenario;
    let mut violations = Vec::new();
    for (index, fault) in file.scenario.faults.iter().enumerate() {
        let Some(missed) = missed(fault, events) else {
            continue;
        };
        let at = format!("faults[{index}]");
        let located = crate::scenario::error_at(&file.path, &at, String::new());
        let place = match (located.line, located.column) {
            (Some(line), Some(column)) => format!("{}:{line}:{column}", file.path.display()),
            _ => format!("{} {at}", file.path.display()),
        };
        let message =
            format!("{place}: the fault never landed: {missed} (`optional: true` if the run may never reach it)");
        violations.push(Violation::new(CHECK, message));
    }
    violations
}

/// What a fault waited for that never came, or `None` if it landed (or
/// may not: optional, drawn at random, or an eviction, which is an action).
fn missed(fault: &Fault, events: &[crate::trace::TraceEvent]) -> Option<String> {
    let count = |matches: &dyn Fn(&Event) -> bool| events.iter().filter(|traced| matches(&traced.event)).count();
    let ended = |call: u32, how: &dyn Fn(&str) -> bool| {
        count(&|event| matches!(event, Event::ModelEnd { call: ended, how: said } if *ended == call && how(said))) > 0
    };
    let (landed, what) = match fault {
        Fault::Stall(point) if !point.optional => {
            (ended(point.call, &|how| how == "parked"), format!("model call {} never stalled there", point.call))
        }
        Fault::Cut(point) if !point.optional => {
            (ended(point.call, &|how| how == "cut"), format!("model call {} was never cut there", point.call))
        }
        Fault::HttpError(http) if !http.optional => (
            ended(http.call, &|how| how.starts_with("http")),
            format!("model call {} never answered HTTP {}", http.call, http.status),
        ),
        Fault::Truncate(point) if !point.optional => {
            let truncated = count(&|event| {
                matches!(event, Event::ModelChunk { call, chunk, .. }
                    if *call == point.call && chunk.starts_with("finish-step unknown out=0"))
            });
            (truncated > 0, format!("model call {} was never truncated there", point.call))
        }
        Fault::StoreError(store) if !store.optional => {
            let refused =
                count(&|event| matches!(event, Event::StoreRefused { commit, .. } if *commit == store.commit));
            (refused > 0, format!("the engine never made commit {}", store.commit))
        }
        Fault::PostFails(post) if !post.optional => {
            let posts =
                count(&|event| matches!(event, Event::MessengerPost { .. } | Event::MessengerPostRefused { .. }));
            (posts >= post.post as usize, format!("the engine made {posts} posts, never post {}", post.post))
        }
        Fault::PostSlow(post) if !post.optional => {
            let posts =
                count(&|event| matches!(event, Event::MessengerPost { .. } | Event::MessengerPostRefused { .. }));
            (posts >= post.post as usize, format!("the engine made {posts} posts, never post {}", post.post))
        }
        Fault::HookThrows(hook) if !hook.optional => {
            let calls = count(&|event| matches!(event, Event::OnExhausted { .. }));
            (calls >= hook.call as usize, format!("the host's hook was called {calls} times, never call {}", hook.call))
        }
        _ => (true, String::new()),
    };
    (!landed).then_some(what)
}
