//! A duration that is either exact or a range the seed samples.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `40` (exactly 40 ms) or `[100, 400]` (uniform in 100..=400 ms, per seed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(into = "RawRange")]
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

/// Read by hand so a wrong value is told in the author's words
/// ("milliseconds or [min, max]"), at the value.
impl<'de> Deserialize<'de> for RangeMs {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::{Error, SeqAccess, Visitor};
        struct RangeVisitor;
        impl<'de> Visitor<'de> for RangeVisitor {
            type Value = RangeMs;

            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("milliseconds (a whole number, e.g. 100) or [min, max] (e.g. [50, 200])")
            }

            fn visit_u64<E: Error>(self, ms: u64) -> Result<RangeMs, E> {
                Ok(RangeMs::exact(ms))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RangeMs, A::Error> {
                let min: u64 = seq.next_element()?.ok_or_else(|| A::Error::invalid_length(0, &self))?;
                let max: u64 = seq.next_element()?.ok_or_else(|| A::Error::invalid_length(1, &self))?;
                if seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    return Err(A::Error::invalid_length(3, &self));
                }
                RangeMs::try_from(RawRange::Between([min, max])).map_err(A::Error::custom)
            }
        }
        deserializer.deserialize_any(RangeVisitor)
    }
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
