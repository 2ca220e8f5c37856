//! A scripted fault the run never reached proved nothing: a stall aimed at
//! model call 3 of a run that makes two, a refusal of a commit that never
//! comes, an eviction whose trigger never matches. Each such fault fails
//! the run with its place in the file, unless it says `optional: true`. Judged from what the world did (the mock
//! model's streams, the store's commits, the surface's posts, the host's
//! hook calls), never from the engine's account.

use std::collections::BTreeSet;

use super::judged::BoundaryEvents;
use super::{CheckInput, Violation};
use crate::scenario::{Fault, PostFault, SlowPostFault, StoreFault, When};
use crate::trace::Event;

pub const CHECK: &str = "fault-landed";

pub fn check(input: &CheckInput) -> Vec<Violation> {
    let file = input.scenario;
    let faults = &file.scenario.faults;
    if faults.iter().all(|fault| !is_held(fault)) {
        return Vec::new();
    }
    let seen = Seen::of(&input.run.events);
    let missed: Vec<(usize, String)> = faults
        .iter()
        .enumerate()
        .filter_map(|(index, fault)| Some((index, seen.missed(fault, input.run.fired_faults.contains(&index))?)))
        .collect();
    if missed.is_empty() {
        return Vec::new();
    }
    // Read again only when something missed, and once for all of them.
    let locator = crate::scenario::locator_of(&file.path);
    let path = file.path.display();
    missed
        .into_iter()
        .map(|(index, what)| {
            let at = format!("faults[{index}]");
            let place = match locator.as_ref().and_then(|locator| locator.find(&at)) {
                Some((line, column)) => format!("{path}:{line}:{column}"),
                None => format!("{path} {at}"),
            };
            let message =
                format!("{place}: the fault never landed: {what} (`optional: true` if the run may never reach it)");
            Violation::new(CHECK, message)
        })
        .collect()
}

/// Whether the check holds a fault to landing: not optional, not drawn at
/// random, not an eviction (an action).
fn is_held(fault: &Fault) -> bool {
    match fault {
        Fault::Stall(point) | Fault::Cut(point) | Fault::Truncate(point) => !point.optional,
        Fault::HttpError(http) => !http.optional,
        Fault::StoreError(store) => !store.optional,
        Fault::PostFails(post) => !post.optional,
        Fault::PostSlow(post) => !post.optional,
        Fault::HookThrows(hook) => !hook.optional,
        // An eviction at a time always comes (within the horizon); one on a
        // trigger only if the trigger matches.
        Fault::Evict(evict) => matches!(evict.when, When::Trigger(_)) && !evict.optional,
        Fault::Random(_) => false,
    }
}

/// What the world did, gathered in one pass over the timeline.
#[derive(Default)]
struct Seen {
    /// (model call, how it ended) for every call that ended.
    ends: BTreeSet<(u32, String)>,
    truncated: BTreeSet<u32>,
    refused_commits: BTreeSet<u32>,
    posts: usize,
    hook_calls: usize,
}

impl Seen {
    fn of(events: &BoundaryEvents) -> Self {
        let mut seen = Self::default();
        for traced in events.iter() {
            match &traced.event {
                Event::ModelEnd { call, how } => {
                    seen.ends.insert((*call, how.clone()));
                }
                Event::ModelChunk { call, chunk, .. } if chunk.starts_with("finish-step unknown out=0") => {
                    seen.truncated.insert(*call);
                }
                Event::StoreRefused { commit, .. } => {
                    seen.refused_commits.insert(*commit);
                }
                Event::MessengerPost { .. } | Event::MessengerPostRefused { .. } => seen.posts += 1,
                Event::OnExhausted { .. } => seen.hook_calls += 1,
                _ => {}
            }
        }
        seen
    }

    fn ended(&self, call: u32, how: impl Fn(&str) -> bool) -> bool {
        let of_call = self.ends.range((call, String::new())..).take_while(|(ended, _)| *ended == call);
        of_call.into_iter().any(|(_, said)| how(said))
    }

    /// What a fault waited for that never came, or `None` if it landed (or
    /// is not held to landing). `fired`: the world's record that this
    /// fault's trigger matched.
    fn missed(&self, fault: &Fault, fired: bool) -> Option<String> {
        if !is_held(fault) {
            return None;
        }
        let posts = self.posts;
        let (landed, what) = match fault {
            Fault::Stall(point) => (
                self.ended(point.call, |how| how == "parked"),
                format!("model call {} never stalled there", point.call),
            ),
            Fault::Cut(point) => {
                (self.ended(point.call, |how| how == "cut"), format!("model call {} was never cut there", point.call))
            }
            Fault::HttpError(http) => (
                self.ended(http.call, |how| how.starts_with("http")),
                format!("model call {} never answered HTTP {}", http.call, http.status),
            ),
            Fault::Truncate(point) => {
                (self.truncated.contains(&point.call), format!("model call {} was never truncated there", point.call))
            }
            Fault::StoreError(StoreFault { commit: Some(commit), .. }) => {
                (self.refused_commits.contains(commit), format!("the engine never made commit {commit}"))
            }
            Fault::StoreError(_) => (fired, "no commit the engine made matched what it names".to_string()),
            Fault::PostFails(PostFault { post, .. }) | Fault::PostSlow(SlowPostFault { post, .. }) => {
                (posts >= *post as usize, format!("the engine made {posts} posts, never post {post}"))
            }
            Fault::HookThrows(hook) => {
                let calls = self.hook_calls;
                (
                    calls >= hook.call as usize,
                    format!("the host's hook was called {calls} times, never call {}", hook.call),
                )
            }
            Fault::Evict(_) => (fired, "its trigger never matched, so the process was never evicted".to_string()),
            Fault::Random(_) => (true, String::new()),
        };
        (!landed).then_some(what)
    }
}
