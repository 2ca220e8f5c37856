//! The timeline of every committed scenario at seed 0, as an insta snapshot
//! under `snapshots/`. A change to the engine's behaviour shows up here as a
//! reviewable diff: `cargo insta review` (CI never writes snapshots).

use turnsim::trace::render_timeline;
use turnsim::world;
use turnsim_engine::RegressionSet;

use crate::common::{all_scenarios, workspace_root};

#[test]
fn scenario_timelines_at_seed_zero() {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(workspace_root().join("snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.bind(|| {
        for file in all_scenarios() {
            let seed = file.scenario.seed_start;
            let record = world::run(&file, seed, &RegressionSet::default());
            let stem = file.path.file_stem().expect("stem").to_string_lossy().to_string();
            let timeline = format!(
                "seed {seed}, {:?} after {} ms\n{}",
                record.end,
                record.sim_ms,
                render_timeline(&record.events)
            );
            insta::assert_snapshot!(stem, timeline);
        }
    });
}
