//! BUGGIFY for the engine's fault points: per run, each site is switched on
//! or off by the seed; a site that is on fires on some of its visits, also by
//! the seed. Every firing is traced, so a replay shows where the engine was
//! pushed off its happy path.

use std::collections::BTreeMap;

use turnsim_engine::{FaultPoints, FaultSite, ALL_FAULT_SITES};

use super::rng::SharedRng;
use crate::scenario::RangeMs;
use crate::trace::{Event, Trace};

/// Chance (percent) that a site is on for a run, and that an on site fires.
const SITE_ON_PERCENT: u64 = 50;
const FIRE_PERCENT: u64 = 25;

pub struct SimFaultPoints {
    active: BTreeMap<FaultSite, bool>,
    rng: SharedRng,
    trace: Trace,
}

impl SimFaultPoints {
    /// `enabled: false` gives a world with every site off.
    pub fn new(enabled: bool, rng: SharedRng, trace: Trace) -> Self {
        let percent = RangeMs { min: 0, max: 99 };
        let active: BTreeMap<FaultSite, bool> =
            ALL_FAULT_SITES.into_iter().map(|site| (site, enabled && rng.sample(percent) < SITE_ON_PERCENT)).collect();
        if enabled {
            // Say up front which sites this seed switched on.
            let on: Vec<&str> = active.iter().filter(|(_, on)| **on).map(|(site, _)| site.name()).collect();
            let sites = if on.is_empty() { "none".to_string() } else { on.join(", ") };
            trace.record(Event::Action { what: format!("buggify sites on: {sites}") });
        }
        Self { active, rng, trace }
    }

    /// The sites switched on for this run: no other site ever fires.
    pub fn sites_on(&self) -> Vec<FaultSite> {
        self.active.iter().filter(|(_, on)| **on).map(|(site, _)| *site).collect()
    }
}

impl FaultPoints for SimFaultPoints {
    fn fire(&self, site: FaultSite) -> bool {
        if self.trace.engine_dead() {
            return false;
        }
        if !self.active.get(&site).copied().unwrap_or(false) {
            return false;
        }
        let fires = self.rng.sample(RangeMs { min: 0, max: 99 }) < FIRE_PERCENT;
        if fires {
            self.trace.record(Event::Action { what: format!("buggify {}", site.name()) });
        }
        fires
    }
}
