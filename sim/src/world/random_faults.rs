//! `random:` faults, made concrete per seed before the run: each kind is
//! drawn with its probability and placed by the seed (a model call and a
//! chunk, or a time), then applied like a scripted fault. The draws are
//! traced at time zero, so a replay says which faults this seed got.

use super::rng::SharedRng;
use crate::scenario::{
    apply_script_fault, Action, ActionKind, ChunkPoint, Disconnect, EvictFault, Fault, HttpFault, Op, RandomFaults,
    RangeMs, ScenarioFile, When,
};

/// The scenario this seed runs, and a line per drawn fault.
pub fn materialise(file: &ScenarioFile, seed: u64) -> (ScenarioFile, Vec<String>) {
    let random: Vec<RandomFaults> = file
        .scenario
        .faults
        .iter()
        .filter_map(|fault| match fault {
            Fault::Random(random) => Some(random.clone()),
            _ => None,
        })
        .collect();
    if random.is_empty() {
        return (file.clone(), Vec::new());
    }
    let rng = SharedRng::derive(seed, "random-faults");
    let mut concrete = file.clone();
    let mut drawn = Vec::new();
    for faults in &random {
        draw(&rng, faults, &mut concrete, &mut drawn);
    }
    (concrete, drawn)
}

fn happens(rng: &SharedRng, probability: f64) -> bool {
    let roll = rng.sample(RangeMs { min: 0, max: 9_999 }) as f64 / 10_000.0;
    roll < probability
}

fn draw(rng: &SharedRng, faults: &RandomFaults, file: &mut ScenarioFile, drawn: &mut Vec<String>) {
    let script_kinds = [
        ("stall", faults.stall),
        ("cut", faults.cut),
        ("truncate", faults.truncate),
        ("http_error", faults.http_error),
    ];
    for (kind, probability) in script_kinds {
        if happens(rng, probability) {
            let fault = script_fault(rng, kind, &file.calls);
            if apply_script_fault(&fault, &mut file.calls).is_ok() {
                drawn.push(format!("random {kind}: {}", describe(&fault)));
                file.scenario.faults.push(fault);
            }
        }
    }
    let window = RangeMs { min: 0, max: faults.window_ms };
    if happens(rng, faults.evict) {
        let at = rng.sample(window);
        let restart = rng.sample(RangeMs { min: 0, max: 500 });
        drawn.push(format!("random evict: at {at} ms, restart after {restart} ms"));
        let evict = EvictFault {
            when: When::AtMs(RangeMs::exact(at)),
            restart_after_ms: RangeMs::exact(restart),
            at_once: false,
            memory_only: false,
            optional: true,
        };
        file.scenario.faults.push(Fault::Evict(evict));
    }
    if happens(rng, faults.disconnect) {
        let at = rng.sample(window);
        drawn.push(format!("random disconnect: at {at} ms"));
        let disconnect = ActionKind::Disconnect(Disconnect {
            reconnect_after_ms: RangeMs { min: 50, max: 500 },
            reconnect: true,
            client: 1,
        });
        file.scenario.actions.push(Action { when: When::AtMs(RangeMs::exact(at)), kind: disconnect });
    }
}

/// A point in one of the scripted calls (or the call after them).
fn script_fault(rng: &SharedRng, kind: &str, calls: &[Vec<Op>]) -> Fault {
    let call = rng.sample(RangeMs { min: 1, max: calls.len().max(1) as u64 }) as u32;
    let chunks = calls.get(call as usize - 1).map_or(4, |ops| ops.iter().filter(|op| op.is_chunk()).count() as u64);
    let after_chunk = rng.sample(RangeMs { min: 0, max: chunks.saturating_sub(1) }) as u32;
    // Drawn blind: the run may end before it.
    let point = ChunkPoint { call, after_chunk, optional: true };
    match kind {
        "stall" => Fault::Stall(point),
        "cut" => Fault::Cut(point),
        "truncate" => Fault::Truncate(point),
        _ => Fault::HttpError(HttpFault {
            call,
            after_chunk,
            status: if after_chunk.is_multiple_of(2) { 429 } else { 503 },
            optional: true,
        }),
    }
}

fn describe(fault: &Fault) -> String {
    match fault {
        Fault::Stall(point) | Fault::Cut(point) | Fault::Truncate(point) => {
            format!("call {} after chunk {}", point.call, point.after_chunk)
        }
        Fault::HttpError(http) => {
            format!("call {} after chunk {}, status {}", http.call, http.after_chunk, http.status)
        }
        _ => String::new(),
    }
}
