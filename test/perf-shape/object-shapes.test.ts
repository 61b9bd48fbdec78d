// Objects built once per request or per delivery share one hidden class (domain/objects.ts): on
// Node 20 an object made by `{ ...base, newKey }` gets a class of its own every time, and every
// reader of such objects then takes its slow path. V8 answers whether two objects share a class
// only with --allow-natives-syntax, so the checks run in a child process with that flag.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';

const src = (file: string) => new URL(`../../src/${file}`, import.meta.url).href;

// Each check builds two objects from different values and prints whether they share a class.
const CHILD = `
const { buildEventPayload } = await import(${JSON.stringify(src('domain/events.ts'))});
const { withFields } = await import(${JSON.stringify(src('domain/objects.ts'))});
const { mergeVariables } = await import(${JSON.stringify(src('domain/variables.ts'))});
const { resolveRecipients } = await import(${JSON.stringify(src('domain/recipients.ts'))});
const subject = (n) => ({ transmissionId: n, messageId: n, messageUid: 'u' + n, uniqueId: 'q' + n, projectUid: 'p', recipient: 'r' + n + '@example.com' });
const outcome = (n) => ({ kind: n ? 'retry' : 'delivered', deliveredTo: 'r@example.com', status: n ? 'retry' : 'completed', outcome: n ? 'deferred' : 'sent', resultCode: String(250 + n), resultMessage: 'ok ' + n, host: 'mx' + n, attempts: n + 1, createdAt: 1e12 + n, nextAttemptAt: n ? 2e12 : null });
// Each built many times first: V8 shares the class of the first few spread objects and stops
// once the code is warm, which is where a service spends its time.
const builders = {
  'a delivery event payload': (n) => buildEventPayload(subject(n), outcome(n % 2), 1.7e12 + n),
  'withFields': (n) => withFields({ id: n, name: 'x' + n }, { extra: n }),
  'merged variables': (n) => mergeVariables({ a: 'g' + n, c: 'c' }, { b: 'r' + n }),
  'a resolved recipient': (n) => resolveRecipients([{ text: 'one' + n + '@example.com', variables: { v: String(n) } }])[0],
};
const out = {};
for (const [name, build] of Object.entries(builders)) {
  for (let n = 0; n < 5000; n++) build(n);
  out[name] = %HaveSameMap(build(1), build(3));
}
process.stdout.write(JSON.stringify(out));
`;

describe('hot-path objects share their hidden class', () => {
  it('event payloads, withFields, merged variables and recipients', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--allow-natives-syntax', '--import', 'tsx', '--input-type=module', '-e', CHILD], { timeout: 30_000 });
    const shared = JSON.parse(stdout) as Record<string, boolean>;
    assert.deepEqual(Object.keys(shared).length, 4);
    for (const [name, same] of Object.entries(shared)) assert.equal(same, true, `${name}: two objects of one shape have different hidden classes`);
  });
});
