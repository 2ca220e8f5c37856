//! What the user typed is what is kept: every user message the engine
//! stores holds, whole and unchanged, the text of a message someone sent
//! (a client's user message, a `chat()` caller's text, a messenger
//! delivery's text), each sent message stored at most once, and a stored
//! user message never changes its text after. The screens and the model
//! are held to the store by `client-view` and `request-matches-store`; this
//! holds the store to the sender.
//!
//! A call a slow caller link delivered again, and a delivery a platform
//! delivered again, are the same message sent once.

use std::collections::{BTreeMap, BTreeSet};

use turnsim_engine::{Message, Role};

use super::Invariant;
use crate::check::{CheckInput, Violation};
use crate::history::Boundary;

pub const INVARIANT: Invariant = Invariant {
    name: "user-text-kept",
    rule: "every stored user message holds exactly the text someone sent, each sent message stored at most once, and \
           never changes after",
    check,
};

fn check(input: &CheckInput) -> Vec<Violation> {
    let history = &input.run.history;
    let mut sent: Vec<&str> = Vec::new();
    let mut deliveries: BTreeSet<&str> = BTreeSet::new();
    let mut stored: BTreeMap<String, String> = history
        .initial
        .messages
        .iter()
        .filter(|message| is_user(message))
        .map(|message| (message.id.clone(), message.text()))
        .collect();
    let mut violations = Vec::new();
    for (index, crossing) in history.iter().enumerate() {
        match &crossing.what {
            Boundary::UserMessage { text } => sent.push(text),
            Boundary::Chat { text, again: false, .. } => sent.push(text),
            Boundary::Deliver { delivery, text } if deliveries.insert(delivery) => sent.push(text),
            Boundary::Commit { writes } => {
                for message in writes.iter().filter_map(|write| write.message()).filter(|message| is_user(message)) {
                    let wrong = take(&mut stored, &mut sent, message);
                    violations.extend(wrong.map(|wrong| input.violation_at(INVARIANT.name, index, wrong)));
                }
            }
            _ => {}
        }
    }
    violations
}

fn is_user(message: &Message) -> bool {
    message.role == Role::User
}

/// Takes in a stored user message: a new one must hold a sent text not
/// stored yet (which it then uses up), a known one its text as first stored.
fn take(stored: &mut BTreeMap<String, String>, sent: &mut Vec<&str>, message: &Message) -> Option<String> {
    let text = message.text();
    let id = &message.id;
    if let Some(first) = stored.get(id) {
        return (*first != text).then(|| format!("user message {id} was stored as {first:?}, then as {text:?}"));
    }
    stored.insert(id.clone(), text.clone());
    match sent.iter().position(|given| *given == text) {
        Some(at) => {
            sent.remove(at);
            None
        }
        None if sent.is_empty() => Some(format!("user message {id} is stored with {text:?}, but nobody sent it")),
        None => Some(format!(
            "user message {id} is stored with {text:?}, but the messages sent and not yet stored are {}",
            sent.iter().map(|given| format!("{given:?}")).collect::<Vec<_>>().join(", ")
        )),
    }
}
