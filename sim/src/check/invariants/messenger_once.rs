//! Invariant 8: the messenger posts exactly once per delivery, and never a
//! truncated partial as the final answer: a delivery whose turn was
//! interrupted gets the apology.

use turnsim_engine::messenger::{ERROR_MESSENGER_RESPONSE, INTERRUPTED_MESSENGER_RESPONSE};
use turnsim_engine::{EngineEvent, TurnStatus};

use super::Invariant;
use crate::check::{CheckInput, Violation};
use crate::trace::Event;
use crate::world::RunEnd;

pub const INVARIANT: Invariant = Invariant {
    name: "messenger-once",
    rule: "each delivery posts exactly once, and an interrupted reply posts the apology, not the partial",
    check,
};

const NAME: &str = "messenger-once";

fn check(input: &CheckInput) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (delivery, requests) in deliveries(input) {
        let posts = input.engine_facts.posts.get(&delivery).cloned().unwrap_or_default();
        let bursts = count_bursts(&posts);
        if bursts > 1 {
            let at = posts.last().map(|post| post.0);
            violations.push(Violation {
                check: NAME.into(),
                message: format!("delivery {delivery} posted {bursts} times"),
                at_event: at,
            });
        }
        if bursts == 0 && input.run.end == RunEnd::Quiescent {
            violations.push(Violation::new(NAME, format!("delivery {delivery} was accepted but never posted")));
        }
        if let Some(violation) = check_interrupted(input, &delivery, &requests, &posts) {
            violations.push(violation);
        }
    }
    violations
}

/// Delivery ids with the requests that answered them, in order.
fn deliveries(input: &CheckInput) -> Vec<(String, Vec<String>)> {
    let mut found: Vec<(String, Vec<String>)> = Vec::new();
    for traced in &input.run.events {
        if let Event::Engine(EngineEvent::DeliveryAccepted { delivery_id, request_id }) = &traced.event {
            match found.iter_mut().find(|(id, _)| id == delivery_id) {
                Some((_, requests)) => requests.push(request_id.clone()),
                None => found.push((delivery_id.clone(), vec![request_id.clone()])),
            }
        }
    }
    found
}

/// Posts made in one go (consecutive, at one sim time) are one delivery.
fn count_bursts(posts: &[(usize, u64, String)]) -> usize {
    let mut bursts = 0;
    let mut previous: Option<(usize, u64)> = None;
    for (index, at_us, _) in posts {
        let continues = previous.is_some_and(|(last_index, last_at)| last_at == *at_us && index - last_index <= 1);
        if !continues {
            bursts += 1;
        }
        previous = Some((*index, *at_us));
    }
    bursts
}

fn check_interrupted(
    input: &CheckInput,
    delivery: &str,
    requests: &[String],
    posts: &[(usize, u64, String)],
) -> Option<Violation> {
    let interrupted = requests
        .iter()
        .filter_map(|request| input.engine_facts.turn(request))
        .any(|turn| turn.status == Some(TurnStatus::Interrupted));
    let first = posts.first()?;
    let allowed = [INTERRUPTED_MESSENGER_RESPONSE, ERROR_MESSENGER_RESPONSE];
    if interrupted && !allowed.contains(&first.2.as_str()) {
        let message = format!("delivery {delivery} was interrupted but posted {:?} as its answer", first.2);
        return Some(Violation::at(NAME, first.0, message));
    }
    None
}
