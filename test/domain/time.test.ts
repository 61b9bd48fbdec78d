// The API's time formats (domain/time.ts) are written from the date's fields rather than sliced out
// of toISOString: they must equal the sliced form for every time, and fail the same way.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatApiTime, formatIsoTime } from '../../src/domain/time.ts';
import { prng } from '../helpers/prng.ts';

const sliced = (ms: number) => new Date(ms).toISOString().slice(0, 19).replace('T', ' ');
const isoSliced = (ms: number) => `${new Date(ms).toISOString().slice(0, -5)}Z`;

describe('API time formats', () => {
  it('equal the sliced toISOString for every year 0-9999, the edges and many seeded times', () => {
    const random = prng(20261124);
    const times = [0, -1, 1, 999, 1000, 59_999, 951_782_400_000 /* 2000-02-29 */, -62_167_219_200_000 /* year 0 */, -30_610_224_000_001, 253_402_300_799_999];
    for (let i = 0; i < 100_000; i++) times.push(Math.floor((random() * 2 - 1) * 62_167_219_200_000), Math.floor(random() * 4e12));
    for (const ms of times) {
      assert.equal(formatApiTime(ms), sliced(ms), String(ms));
      assert.equal(formatIsoTime(ms), isoSliced(ms), String(ms));
    }
  });

  it('write a six-digit year as toISOString does, and keep null and invalid times apart', () => {
    assert.equal(formatIsoTime(253_402_300_800_000), '+010000-01-01T00:00:00Z');
    assert.equal(formatApiTime(253_402_300_800_000), '+010000-01-01 00:00:00');
    assert.equal(formatIsoTime(-62_198_755_200_001), '-000002-12-31T23:59:59Z');
    assert.equal(formatApiTime(null), null);
    assert.equal(formatIsoTime(undefined), null);
    assert.throws(() => formatApiTime(Number.NaN), RangeError);
    assert.throws(() => formatIsoTime(8.64e15 + 1), RangeError);
  });
});
