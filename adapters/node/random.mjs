// Seeded randomness: the generator behind `Math.random`,
// `crypto.getRandomValues`, `crypto.randomUUID` and `crypto.randomBytes`
// once the sandbox is installed. xoshiro128** seeded through splitmix64 from
// the generation's seed (`generationSeed`: the run's seed and the
// generation's number), so the same seed gives the same draws, and a
// different seed or a later generation different ones.

const MASK64 = (1n << 64n) - 1n;
const GOLDEN_GAMMA = 0x9e3779b97f4a7c15n;

/** splitmix64's finaliser: a well-mixed 64-bit word from any 64-bit word. */
function mix64(value) {
  let z = BigInt.asUintN(64, value);
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
  return z ^ (z >> 31n);
}

/**
 * The seed of generation `generation`'s generator in a run seeded `seed`:
 * the run's seed for generation 1, a seed mixed from both for every later
 * one, so a restarted engine does not redraw its predecessor's bits (and
 * ids), as a real restart would not. `turnsim engine` and the Python SDK
 * derive the same numbers (tests/fixtures/generation-seeds.json).
 */
export function generationSeed(seed, generation) {
  const runSeed = BigInt.asUintN(64, BigInt(seed));
  if (generation <= 1) return runSeed;
  return mix64(runSeed + BigInt(generation) * GOLDEN_GAMMA);
}

/** splitmix64: spreads one 64-bit seed into well-mixed words. */
function* splitmix64(seed) {
  let state = BigInt.asUintN(64, seed);
  for (;;) {
    state = (state + 0x9e3779b97f4a7c15n) & MASK64;
    let z = state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
    yield z ^ (z >> 31n);
  }
}

export class SeededRandom {
  /** @param {bigint | number | string} seed */
  constructor(seed = 0n) {
    this.reseed(seed);
  }

  reseed(seed) {
    const words = splitmix64(BigInt(seed));
    const a = words.next().value;
    const b = words.next().value;
    this._s = new Uint32Array([Number(a & 0xffffffffn), Number(a >> 32n), Number(b & 0xffffffffn), Number(b >> 32n)]);
  }

  /** The next 32-bit unsigned word. */
  nextUint32() {
    const s = this._s;
    const result = Math.imul(rotl(Math.imul(s[1], 5), 7), 9) >>> 0;
    const t = s[1] << 9;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return result;
  }

  /** A double in [0, 1) with 53 random bits, as `Math.random` gives. */
  nextFloat() {
    const high = this.nextUint32() >>> 5;
    const low = this.nextUint32() >>> 6;
    return (high * 67108864 + low) / 9007199254740992;
  }

  /** Fills any integer typed array (or DataView-able buffer view) with random bytes. */
  fill(view) {
    const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
    for (let i = 0; i < bytes.length; i += 4) {
      let word = this.nextUint32();
      for (let j = i; j < Math.min(i + 4, bytes.length); j++) {
        bytes[j] = word & 0xff;
        word >>>= 8;
      }
    }
    return view;
  }

  /** An RFC 4122 version-4 UUID from the generator. */
  uuid() {
    const bytes = this.fill(new Uint8Array(16));
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    const hex = Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }
}

function rotl(x, k) {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
