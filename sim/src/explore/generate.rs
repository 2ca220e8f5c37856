//! proptest strategies for whole cases. Swarm testing: each case first draws
//! which fault kinds are on at all, then how many of each, so some cases are
//! calm and some are storms, and rare combinations still come up.

use proptest::prelude::*;
use turnsim_engine::ToolKind;

use super::case::{BoundaryPoint, Case, Entry, EvictWhen, FaultCase, Latency, ToolCase};

fn tool_kind() -> impl Strategy<Value = ToolKind> {
    prop_oneof![
        4 => Just(ToolKind::Client),
        2 => Just(ToolKind::Server),
        1 => Just(ToolKind::Human),
        1 => Just(ToolKind::Approval),
    ]
}

fn latency() -> impl Strategy<Value = Latency> {
    prop_oneof![4 => Just(Latency::Fast), 3 => Just(Latency::Slow), 1 => Just(Latency::Human)]
}

fn tool() -> impl Strategy<Value = ToolCase> {
    (
        tool_kind(),
        0u8..24,
        any::<bool>(),
        latency(),
        prop::bool::weighted(0.25),
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.05),
        prop::bool::weighted(0.8),
    )
        .prop_map(
            |(kind, gaps_before, finalized_mid_stream, latency, errored, auto_continue, never_answers, approve)| {
                // An errored result opts out of continuing, as clients send it.
                let auto_continue = auto_continue && !errored;
                let latency = if kind == ToolKind::Human { Latency::Human } else { latency };
                ToolCase {
                    kind,
                    gaps_before,
                    finalized_mid_stream,
                    latency,
                    errored,
                    auto_continue,
                    never_answers,
                    approve,
                }
            },
        )
}

fn evict_when(tools: usize) -> impl Strategy<Value = EvictWhen> {
    prop_oneof![
        (0u64..3_000).prop_map(EvictWhen::AtMs),
        (0..tools.max(1), 0u64..60).prop_map(|(index, delay_ms)| EvictWhen::AfterResult { index, delay_ms }),
        Just(EvictWhen::At(BoundaryPoint::AlarmStored)),
        Just(EvictWhen::At(BoundaryPoint::UserMessageStored)),
        Just(EvictWhen::At(BoundaryPoint::SecondModelCall)),
    ]
}

/// One fault of a kind the swarm switched on.
fn fault_of(kind: u8, tools: usize) -> BoxedStrategy<FaultCase> {
    match kind {
        0 => (5u8..100).prop_map(|percent| FaultCase::Stall { percent }).boxed(),
        1 => (5u8..100).prop_map(|percent| FaultCase::Truncate { percent }).boxed(),
        2 => (5u8..100).prop_map(|percent| FaultCase::Cut { percent }).boxed(),
        3 => prop_oneof![Just(429u16), Just(503u16)].prop_map(|status| FaultCase::Http { status }).boxed(),
        // One eviction in four keeps the clients' connections (a hibernation).
        4 => (evict_when(tools), 0u64..500, prop::bool::weighted(0.25))
            .prop_map(|(when, restart_after_ms, memory_only)| FaultCase::Evict { when, restart_after_ms, memory_only })
            .boxed(),
        5 => (0u64..2_000, 20u64..500)
            .prop_map(|(at_ms, reconnect_after_ms)| FaultCase::Disconnect { at_ms, reconnect_after_ms })
            .boxed(),
        // Mostly one refused commit, as `crash-points --store-errors`
        // sweeps; sometimes an outage of several commits in a row.
        6 => (1u32..24, prop_oneof![3 => Just(1u32), 1 => 2u32..7])
            .prop_map(|(commit, times)| FaultCase::StoreError { commit, times })
            .boxed(),
        7 => (1u32..24, 0u64..500)
            .prop_map(|(commit, restart_after_ms)| FaultCase::CrashAtCommit { commit, restart_after_ms })
            .boxed(),
        // The host's other services: the chat surface refusing posts (a
        // reply is one to a few posts) or answering them late, the
        // recovery hook throwing.
        8 => prop_oneof![
            3 => (1u32..4, 1u32..4).prop_map(|(post, times)| FaultCase::PostRefused { post, times }),
            2 => (1u32..4, 1u32..3, 100u64..3_000)
                .prop_map(|(post, times, after_ms)| FaultCase::PostSlow { post, times, after_ms }),
            1 => Just(FaultCase::HookThrows),
        ]
        .boxed(),
        // Slow, racy links to the client and the caller.
        9 => (20u64..400, any::<bool>(), 0u8..60, any::<bool>())
            .prop_map(|(delay_max_ms, reorder, duplicate_percent, resume)| FaultCase::SlowLinks {
                delay_max_ms,
                reorder,
                duplicate_percent,
                resume,
            })
            .boxed(),
        // Another user message while the story runs, by any way in.
        _ => (0u64..3_000, entry()).prop_map(|(at_ms, via)| FaultCase::Message { at_ms, via }).boxed(),
    }
}

/// Kind of [`fault_of`]: a later user message (not the host's doing, so
/// in every swarm).
const MESSAGE: u8 = 10;

/// The swarm: which of the fault kinds are on (seven: the model's, the
/// evictions, disconnects and later messages; or eleven with the host's:
/// the store's two, the chat surface's and the hook's, the links), then up
/// to two of each.
fn faults(tools: usize, store_faults: bool) -> impl Strategy<Value = Vec<FaultCase>> {
    let kinds: Vec<u8> = if store_faults { (0..=MESSAGE).collect() } else { vec![0, 1, 2, 3, 4, 5, MESSAGE] };
    prop::collection::vec(prop::bool::weighted(0.3), kinds.len()).prop_flat_map(move |on| {
        let kinds: Vec<u8> = kinds.iter().zip(&on).filter(|(_, on)| **on).map(|(kind, _)| *kind).collect();
        let per_kind: Vec<BoxedStrategy<Vec<FaultCase>>> =
            kinds.into_iter().map(|kind| prop::collection::vec(fault_of(kind, tools), 1..=2).boxed()).collect();
        per_kind.prop_map(|groups| groups.into_iter().flatten().collect::<Vec<_>>())
    })
}

fn entry() -> impl Strategy<Value = Entry> {
    prop_oneof![2 => Just(Entry::Connection), 1 => Just(Entry::Chat), 1 => Just(Entry::Messenger)]
}

pub fn case(store_faults: bool) -> impl Strategy<Value = Case> {
    let shape = (
        any::<u64>().no_shrink(),
        entry(),
        prop::collection::vec(tool(), 1..=4),
        0u8..24,
        any::<bool>(),
        any::<bool>(),
    );
    shape.prop_flat_map(move |(sim_seed, entry, tools, tail_gaps, watchdog, buggify)| {
        let count = tools.len();
        faults(count, store_faults).prop_map(move |faults| Case {
            sim_seed,
            entry,
            tools: tools.clone(),
            tail_gaps,
            watchdog,
            buggify,
            // From the fixed seed, not a drawn value: a drawn one would
            // change every case an earlier sweep found.
            tools_after_step: sim_seed % 2 == 1,
            faults,
        })
    })
}
