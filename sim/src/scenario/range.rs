//! A duration that is either exact or a range the seed samples.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `40` (exactly 40 ms) or `[100, 400]` (uniform in 100..=400 ms, per seed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawRange", into = "RawRange")]
pub struct RangeMs {
    pub min: u64,
    pub max: u64,
}

#[derive(Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
enum RawRange {
    Exact(u64),
    Between([u64; 2]),
}

impl TryFrom<RawRange> for RangeMs {
    type Error = String;

    fn try_from(raw: RawRange) -> Result<Self, Self::Error> {
        match raw {
            RawRange::Exact(ms) => Ok(Self::exact(ms)),
            RawRange::Between([min, max]) if min <= max => Ok(Self { min, max }),
            RawRange::Between([min, max]) => Err(format!("range [{min}, {max}] has its minimum above its maximum")),
        }
    }
}

impl From<RangeMs> for RawRange {
    fn from(range: RangeMs) -> Self {
        if range.min == range.max {
            Self::Exact(range.min)
        } else {
            Self::Between([range.min, range.max])
        }
    }
}

impl RangeMs {
    pub const ZERO: Self = Self { min: 0, max: 0 };

    pub const fn exact(ms: u64) -> Self {
        Self { min: ms, max: ms }
    }

    pub fn is_zero(&self) -> bool {
        *self == Self::ZERO
    }

    pub fn sample(&self, rng: &mut ChaCha8Rng) -> u64 {
        if self.min == self.max {
            self.min
        } else {
            rng.gen_range(self.min..=self.max)
        }
    }
}

impl Default for RangeMs {
    fn default() -> Self {
        Self::ZERO
    }
}

super::schema_as!(RangeMs, RawRange);
