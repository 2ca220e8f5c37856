//! `expect.connections`: what one client connection had been shown by a
//! moment, rebuilt from the frames the engine sent it (the history's
//! crossings, folded by the same client views the `client-view` invariant
//! uses): each tool's state in its view, the frames it received in order,
//! and frames it never received. Frames are named by the label the
//! timeline prints for them ([`frame_label`]).

use std::collections::BTreeMap;

use super::views::{ClientView, ClientViews};
use super::{CheckInput, Violation};
use crate::history::connection_base;
use crate::history::{Boundary, History};
use crate::scenario::{ConnectionExpectation, ExpectedToolState};
use crate::trace::frame_label;

pub const CHECK: &str = "expect.connections";

pub fn check(input: &CheckInput) -> Vec<Violation> {
    let file = input.scenario;
    let expected = &file.scenario.expect.connections;
    let wrong: Vec<(usize, String)> = expected
        .iter()
        .enumerate()
        .filter_map(|(index, expected)| Some((index, judge(input.run.history, expected)?)))
        .collect();
    if wrong.is_empty() {
        return Vec::new();
    }
    // Read again only when something is wrong, and once for all of it.
    let locator = crate::scenario::locator_of(&file.path);
    let path = file.path.display();
    let place = |index: usize| {
        let at = format!("expect.connections[{index}]");
        match locator.as_ref().and_then(|locator| locator.find(&at)) {
            Some((line, column)) => format!("{path}:{line}:{column}"),
            None => format!("{path} {at}"),
        }
    };
    wrong.into_iter().map(|(index, wrong)| Violation::new(CHECK, format!("{}: {wrong}", place(index)))).collect()
}

/// What is wrong with one connection expectation, in words.
fn judge(history: &History, expected: &ConnectionExpectation) -> Option<String> {
    let until_us = expected.at_ms.map_or(u64::MAX, |at_ms| at_ms.saturating_mul(1_000).saturating_add(999));
    let by = expected.at_ms.map_or("by the end of the run".to_string(), |at_ms| format!("by {at_ms} ms"));
    let shown = ShownBy::fold(history, until_us);
    let client = expected.client;
    let Some(id) = shown.connection_of(client, expected.connection) else {
        return Some(match expected.connection {
            Some(nth) => {
                format!("client {client}'s connection {nth} (c{}) had not opened {by}", connection_base(client) + nth)
            }
            None => format!("client {client} had opened no connection {by}"),
        });
    };
    let (view, labels) = shown.of(id);
    let mut wrong: Vec<String> =
        expected.tools.iter().filter_map(|(call_id, state)| tool_mismatch(view, call_id, *state)).collect();
    if let Some(missing) = missing_in_order(&expected.received, labels) {
        wrong.push(format!(
            "expected frames {:?} in that order, but no `{missing}` came after them; received {labels:?}",
            expected.received
        ));
    }
    let forbidden = labels
        .iter()
        .filter(|label| expected.not_received.iter().any(|name| ConnectionExpectation::names(name, label)));
    wrong.extend(forbidden.map(|label| format!("received `{label}`, which it must not")));
    (!wrong.is_empty()).then(|| format!("client {client}'s connection c{id} {by}: {}", wrong.join("; ")))
}

fn tool_mismatch(view: &ClientView, call_id: &str, expected: ExpectedToolState) -> Option<String> {
    let part = view.messages.iter().find_map(|message| message.tool(call_id));
    let actual = part.map_or(ExpectedToolState::Absent.as_str(), |tool| tool.state.as_str());
    (actual != expected.as_str()).then(|| format!("{call_id}: expected {}, its view shows {actual}", expected.as_str()))
}

/// The first expected frame that does not follow the ones before it in
/// `labels` (a subsequence, in order); `None`: all of them do.
fn missing_in_order<'a>(expected: &'a [String], labels: &[String]) -> Option<&'a str> {
    let mut rest = labels.iter();
    expected.iter().find(|name| !rest.any(|label| ConnectionExpectation::names(name, label))).map(String::as_str)
}

/// Every connection's view and the labels of the frames it was sent, by
/// a moment: one still open as it stands, one closed as it was when it
/// closed.
#[derive(Default)]
struct ShownBy {
    views: ClientViews,
    closed: BTreeMap<u64, ClientView>,
    labels: BTreeMap<u64, Vec<String>>,
}

impl ShownBy {
    fn fold(history: &History, until_us: u64) -> Self {
        let mut shown = Self::default();
        let crossings = history.iter().enumerate().take_while(|(_, crossing)| crossing.at_us <= until_us);
        for (index, crossing) in crossings {
            shown.step(index, &crossing.what);
        }
        shown
    }

    fn step(&mut self, index: usize, crossing: &Boundary) {
        let open = &self.views.open;
        match crossing {
            Boundary::Disconnect { connection } => {
                self.closed.extend(open.get_key_value(connection).map(|(id, view)| (*id, view.clone())))
            }
            Boundary::Killed => self.closed.extend(open.iter().map(|(id, view)| (*id, view.clone()))),
            _ => {}
        }
        self.views.step(index, crossing);
        if let Boundary::Frame { connection, frame } = crossing {
            let label = frame_label(frame).filter(|_| self.views.open.contains_key(connection));
            self.labels.entry(*connection).or_default().extend(label);
        }
    }

    /// The id of client `client`'s `nth` connection (`None`: its last), if
    /// it had opened.
    fn connection_of(&self, client: u32, nth: Option<u64>) -> Option<u64> {
        let base = connection_base(client);
        let opened = self.views.open.keys().chain(self.closed.keys()).copied();
        let mine: Vec<u64> = opened.filter(|id| (base + 1..base + 1_000).contains(id)).collect();
        match nth {
            Some(nth) => mine.contains(&(base + nth)).then_some(base + nth),
            None => mine.into_iter().max(),
        }
    }

    fn of(&self, id: u64) -> (&ClientView, &[String]) {
        let view = self.views.open.get(&id).or_else(|| self.closed.get(&id)).expect("an opened connection has a view");
        (view, self.labels.get(&id).map_or(&[], Vec::as_slice))
    }
}
