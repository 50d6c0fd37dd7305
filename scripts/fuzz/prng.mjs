// A small seeded PRNG (sfc32, seeded through splitmix32) so that every mutant is reproducible from (seed, index)
// alone: mutant 1234 of a run can be rebuilt without generating the 1233 before it.

function splitmix32(state) {
  let z = (state + 0x9e3779b9) | 0;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return [(z ^ (z >>> 16)) >>> 0, z];
}

export class Rng {
  /** @param {number} seed @param {number} [stream] - e.g. the mutant's index */
  constructor(seed, stream = 0) {
    let s = (Math.imul(seed >>> 0, 0x27d4eb2d) ^ Math.imul(stream >>> 0, 0x165667b1)) | 0;
    const w = [];
    for (let i = 0; i < 4; i++) [w[i], s] = splitmix32(s);
    [this.a, this.b, this.c, this.d] = w;
    for (let i = 0; i < 12; i++) this.u32(); // let the state mix before first use
  }

  /** A uniform 32-bit unsigned integer. */
  u32() {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** A float in [0, 1). */
  next() {
    return this.u32() / 4294967296;
  }

  /** An integer in [lo, hi] (inclusive). */
  int(lo, hi) {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  /** True with probability p. */
  chance(p) {
    return this.next() < p;
  }

  /** One element of a non-empty array. */
  pick(items) {
    if (items.length === 0) throw new Error('Rng.pick: empty list');
    return items[Math.floor(this.next() * items.length)];
  }

  /** One element of [[weight, value], ...], chosen in proportion to the weights. */
  weighted(entries) {
    const total = entries.reduce((s, [w]) => s + w, 0);
    let x = this.next() * total;
    for (const [w, v] of entries) if ((x -= w) < 0) return v;
    return entries[entries.length - 1][1];
  }
}
