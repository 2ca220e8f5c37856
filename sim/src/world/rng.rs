//! Seeded randomness for the world: one root seed, child generators derived
//! by label, so adding a draw in one part of the world does not shift the
//! draws of another.

use std::sync::{Arc, Mutex};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::scenario::RangeMs;

/// A child generator shared by the tasks of one part of the world.
#[derive(Clone)]
pub struct SharedRng(Arc<Mutex<ChaCha8Rng>>);

impl SharedRng {
    pub fn derive(seed: u64, label: &str) -> Self {
        Self(Arc::new(Mutex::new(ChaCha8Rng::seed_from_u64(child_seed(seed, label)))))
    }

    pub fn sample(&self, range: RangeMs) -> u64 {
        range.sample(&mut self.0.lock().expect("rng lock"))
    }

    /// True with probability `probability` (0 to 1).
    pub fn chance(&self, probability: f64) -> bool {
        use rand::Rng;
        self.0.lock().expect("rng lock").gen_bool(probability.clamp(0.0, 1.0))
    }
}

/// splitmix64 over the seed and an FNV-1a hash of the label.
pub fn child_seed(seed: u64, label: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in label.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut mixed = seed ^ hash;
    mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    mixed ^ (mixed >> 31)
}
