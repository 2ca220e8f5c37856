//! The store's tool calls commit by commit: the history's commits folded
//! into one store, each commit reported with the call ids it may have
//! changed (the parts of its messages that differ from the copies stored
//! before, and every call of a message it removes or moves). A check that
//! follows tool states through the store reads only those, so following
//! them costs one pass over the history, however long the reply grows.

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use turnsim_engine::durable::{DurableState, Write};
use turnsim_engine::ToolPart;

use super::seen::SeenMessages;
use crate::history::{Boundary, History};

/// Calls `visit(index, store after the commit, call ids it may have
/// changed)` for each commit in order, until it breaks.
pub fn walk_commits(
    history: &History,
    mut visit: impl FnMut(usize, &DurableState, &BTreeSet<String>) -> ControlFlow<()>,
) {
    let mut store = history.initial.clone();
    let mut seen = SeenMessages::default();
    store.messages.iter().for_each(|message| drop(seen.changed(message)));
    for (index, crossing) in history.iter().enumerate() {
        let Boundary::Commit { writes } = &crossing.what else { continue };
        let mut changed = BTreeSet::new();
        for write in writes {
            changed.extend(changed_by(&store, &mut seen, write));
            store.apply(write);
        }
        if visit(index, &store, &changed).is_break() {
            return;
        }
    }
}

/// The call ids `write` may change in `store` (which does not hold it yet).
fn changed_by(store: &DurableState, seen: &mut SeenMessages, write: &Write) -> BTreeSet<String> {
    let all_of = |id: &str| store.message(id).into_iter().flat_map(|message| message.tools()).map(call_id).collect();
    match write {
        Write::PutMessage(message) if store.message(&message.id).is_some() => seen.changed_tools(message),
        Write::PutMessage(message) => {
            seen.forget(&message.id);
            seen.changed_tools(message)
        }
        // It may move: every call in it may now come before or after another copy of itself.
        Write::PutMessageAfter { message, .. } => {
            let mut changed: BTreeSet<String> = all_of(&message.id);
            seen.forget(&message.id);
            changed.extend(seen.changed_tools(message));
            changed
        }
        Write::RemoveMessage(id) => {
            seen.forget(id);
            all_of(id)
        }
        _ => BTreeSet::new(),
    }
}

fn call_id(tool: &ToolPart) -> String {
    tool.call_id.clone()
}

/// The first tool part of `call_id` in the store, as a check reads a call's state.
pub fn first_tool<'a>(store: &'a DurableState, call_id: &str) -> Option<&'a ToolPart> {
    store.messages.iter().find_map(|message| message.tool(call_id))
}

/// Every tool part of `call_id` in the store, last first.
pub fn tools_last_first<'a>(store: &'a DurableState, call_id: &'a str) -> impl Iterator<Item = &'a ToolPart> + 'a {
    store.messages.iter().rev().flat_map(move |message| {
        message.parts.tool_positions(call_id).into_iter().rev().filter_map(move |at| match &message.parts[at] {
            turnsim_engine::Part::Tool(tool) => Some(tool),
            _ => None,
        })
    })
}
