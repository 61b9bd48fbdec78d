// The subject a message is listed and searched by (domain/send-request.ts subjectsAsSent): the
// subject each copy is sent with, rendered as delivery renders it, stored per copy only where it
// differs from the message's (docs/templates.md, "Where variables are rendered").
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_SUBJECT_RENDERED_CHARS, subjectsAsSent, type MessageCopy } from '../../src/domain/send-request.ts';
import type { VariableValues } from '../../src/domain/variable-values.ts';

const copy = (address: string, variables: VariableValues | null): MessageCopy => ({ address, name: null, variables });

describe('subjectsAsSent', () => {
  it('keeps a subject without {{ as it is, and no subject at all', () => {
    const subject = 'Plain {subject}';
    assert.deepEqual(subjectsAsSent(subject, { a: 1 }, [copy('a@x.test', { a: 2 })]), { message: subject, copies: null });
    assert.deepEqual(subjectsAsSent(null, {}, [copy('a@x.test', null)]), { message: null, copies: null });
  });

  it('renders the global variables into one subject when no copy has its own, as a header (nothing escaped)', () => {
    const copies = [copy('a@x.test', null), copy('b@x.test', {}), copy('c@x.test', null)];
    assert.deepEqual(subjectsAsSent('Order {{order}} & {{#if vip}}VIP{{else}}you{{/if}} {{missing}}<', { order: '<42>' }, copies), { message: 'Order <42> & you <', copies: null });
  });

  it("gives the message the first copy's subject, and each other copy its own only where it differs", () => {
    const shared = { name: 'Ann' };
    const copies = [copy('ann@x.test', shared), copy('bob@x.test', { name: 'Bob' }), copy('ann2@x.test', { name: 'Ann' }), copy('none@x.test', null), copy('other@x.test', { unused: true }), copy('cc@x.test', shared)];
    assert.deepEqual(subjectsAsSent('Hi {{name}}', { name: 'all' }, copies), { message: 'Hi Ann', copies: [null, 'Hi Bob', null, 'Hi all', 'Hi all', null] });
    // The first copy without variables of its own: the message's subject is the global one.
    assert.deepEqual(subjectsAsSent('Hi {{name}}', { name: 'all' }, [copy('a@x.test', null), copy('b@x.test', { name: 'Bea' })]), { message: 'Hi all', copies: [null, 'Hi Bea'] });
  });

  it('renders only what costs about its length: no block that may repeat, nothing longer than a bound written or rendered', () => {
    const many = Array.from({ length: 100_000 }, (_, i) => i);
    const copies = [copy('a@x.test', { name: 'Ann' }), copy('b@x.test', { name: 'Bob' })];
    // Blocks that repeat for each item (nested, the cost would be the product of the lists).
    for (const subject of ['{{#each many}}{{#each ../many}}x{{/each}}{{/each}} {{name}}', '{{#many}}{{#../many}}x{{/../many}}{{/many}} {{name}}', '{{#if name}}x{{else each many}}y{{/if}}']) {
      const started = performance.now();
      assert.deepEqual(subjectsAsSent(subject, { many }, copies), { message: subject, copies: null }, subject);
      assert.ok(performance.now() - started < 1000, subject);
    }
    // Blocks that render once are rendered.
    assert.deepEqual(subjectsAsSent('{{#if vip}}VIP {{/if}}{{#with user}}{{first}}{{/with}}', { vip: true, user: { first: 'Ann' } }, copies), { message: 'VIP Ann', copies: null });
    // A long subject, or one a repeated value makes long, is listed as written.
    const long = `${'x'.repeat(MAX_SUBJECT_RENDERED_CHARS)} {{name}}`;
    assert.deepEqual(subjectsAsSent(long, {}, copies), { message: long, copies: null });
    const repeated = '{{big}}'.repeat(100);
    assert.deepEqual(subjectsAsSent(repeated, { big: 'y'.repeat(1_000_000) }, copies), { message: repeated, copies: null });
    assert.deepEqual(subjectsAsSent('{{big}}', { big: 'y'.repeat(MAX_SUBJECT_RENDERED_CHARS) }, copies), { message: 'y'.repeat(MAX_SUBJECT_RENDERED_CHARS), copies: null });
  });

  it('keeps the subject as accepted for a copy that delivery fails for its values', () => {
    const copies = [
      copy('ok@x.test', { item: 'a pen' }),
      // Not printable by the template language (RENDER_FAILED at delivery)...
      copy('bad@x.test', { item: { toString: 'x' } }),
      // ...and a line break brought in by a nested value (INVALID_HEADER at delivery).
      copy('broken@x.test', { item: ['line\r\nBcc: x@y.test'] }),
    ];
    assert.deepEqual(subjectsAsSent('You ordered {{item}}', {}, copies), { message: 'You ordered a pen', copies: [null, 'You ordered {{item}}', 'You ordered {{item}}'] });
    assert.deepEqual(subjectsAsSent('You ordered {{item}}', {}, copies.slice(1, 2)), { message: 'You ordered {{item}}', copies: null });
  });
});
