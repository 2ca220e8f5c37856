//! The mock provider's answer to a request that ends in a half-streamed
//! tool call is the scenario's to choose (`provider.dangling_tool_call`).
//! Only an engine that continues from the partial call (the regression
//! `continue-mid-tool-input`) ever sends one.

use turnsim::runner::run_one;
use turnsim::trace::Event;
use turnsim_engine::{Regression, RegressionSet};

use crate::common::{inline, scenario};

/// How each model call of seed 0 ended, under the regression.
fn call_ends(provider: &str) -> Vec<String> {
    let mut file = scenario("recovery-mid-tool-input");
    let yaml = format!("name: dangling\nprovider: {{ dangling_tool_call: {provider} }}\n");
    file.scenario.provider = inline(&yaml).scenario.provider;
    let regressions = RegressionSet::of([Regression::ContinueMidToolInput]);
    let (record, _) = run_one(&file, 0, &regressions);
    record
        .events
        .iter()
        .filter_map(|traced| match &traced.event {
            Event::ModelChunk { call, chunk, .. } if chunk.starts_with("finish-step") => {
                Some(format!("#{call} {chunk}"))
            }
            Event::ModelEnd { call, how } if how.starts_with("http") => Some(format!("#{call} {how}")),
            _ => None,
        })
        .collect()
}

#[test]
fn each_answer_to_a_dangling_tool_call_is_the_one_the_scenario_chose() {
    let empty = call_ends("empty_finish");
    assert_eq!(empty.first().map(String::as_str), Some("#2 finish-step unknown out=0"), "{empty:?}");
    let rejected = call_ends("reject");
    assert_eq!(rejected.first().map(String::as_str), Some("#2 http 400"), "{rejected:?}");
    let scripted = call_ends("script");
    assert_eq!(scripted.first().map(String::as_str), Some("#2 finish-step tool-calls out=2"), "{scripted:?}");
}
