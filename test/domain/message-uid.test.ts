import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiError } from '../../src/domain/errors.ts';
import { canonicalJson, deriveUid, messageIdFor, messageIdLocalPart, readGivenUid, readMsgId, uniqueIdFor } from '../../src/domain/message-uid.ts';

describe('message uid', () => {
  it('reads strings and numbers; "" and null are none; other types are call_error', () => {
    assert.equal(readGivenUid('abc'), 'abc');
    assert.equal(readGivenUid(42), '42');
    assert.equal(readGivenUid(''), null);
    assert.equal(readGivenUid(null), null);
    assert.equal(readGivenUid(undefined), null);
    assert.throws(() => readGivenUid(true), (e: ApiError) => e.status === 'call_error' && /uid/.test(e.message));
    assert.throws(() => readGivenUid({ a: 1 }), (e: ApiError) => e.status === 'call_error');
    assert.throws(() => readGivenUid('x'.repeat(256)), (e: ApiError) => e.status === 'call_error' && /255/.test(e.message));
  });

  it('derives the same uid for the same arguments whatever the key order and nulls', () => {
    assert.equal(canonicalJson({ b: [1, { d: null, c: 'x' }], a: 'é' }), '{"a":"é","b":[1,{"c":"x"}]}');
    const one = deriveUid({ recipients: 'a@b.co', content: { 'text/plain': 'x', 'text/html': null } });
    assert.match(one, /^[0-9a-f]{64}$/);
    assert.equal(deriveUid({ content: { 'text/plain': 'x' }, recipients: 'a@b.co' }), one);
    assert.notEqual(deriveUid({ recipients: 'a@b.co', content: 'y' }), one);
    assert.notEqual(deriveUid({ recipients: 'a@b.co', content: { 'text/plain': 'x' } }, 'o@b.co'), one);
    assert.equal(deriveUid({ recipients: 'a@b.co', content: { 'text/plain': 'x' } }, 'o@b.co'), deriveUid({ recipients: 'a@b.co', content: { 'text/plain': 'x' }, recipient_override: 'o@b.co' }));
    let deep: any = 1;
    for (let i = 0; i < 200; i++) deep = [deep];
    assert.throws(() => deriveUid({ pad: deep }), (e: ApiError) => e.status === 'call_error' && /nested/.test(e.message));
  });

  it('keeps unique_id as given and makes the Message-ID a valid, reversible dot-atom', () => {
    assert.equal(uniqueIdFor('welcome:2026-01-01.7', 'mx.test'), 'welcome:2026-01-01.7@mx.test');
    assert.equal(messageIdFor('abc.def-1', 'mx.test'), '<abc.def-1@mx.test>');
    assert.equal(messageIdLocalPart('welcome:2026-01-01.7'), 'welcome%3A2026-01-01.7');
    assert.equal(messageIdLocalPart('a b<c>@"d"'), 'a%20b%3Cc%3E%40%22d%22');
    assert.equal(messageIdLocalPart('50%'), '50%25');
    assert.equal(messageIdLocalPart('.a..b.'), '%2Ea.%2Eb%2E');
    assert.equal(messageIdLocalPart('é'), '%C3%A9');
    assert.notEqual(messageIdLocalPart('a:b'), messageIdLocalPart('a%3Ab'));
    assert.match(messageIdLocalPart(':'.repeat(100)), /^sha256\.[0-9a-f]{64}$/);
    const atom = /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+(\.[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+)*$/;
    for (const uid of ['x', 'a:b', ' ', '..', 'ü.ö', 'a\r\nb', '<>', '1.5']) assert.match(messageIdLocalPart(uid), atom, uid);
  });

  it('reads a msg-id out of a Message-ID value, white space and comments around it; null when the value holds none', () => {
    assert.equal(readMsgId('<a@b>'), '<a@b>');
    assert.equal(readMsgId('  <order-77.x@shop.example>\t'), '<order-77.x@shop.example>');
    assert.equal(readMsgId('(sent by app) <k@h> (the app)'), '<k@h>');
    assert.equal(readMsgId('<a@b@c>'), '<a@b@c>');
    assert.equal(readMsgId('<1234@[10.0.0.1]>'), '<1234@[10.0.0.1]>');
    for (const none of ['', ' ', 'not-an-id', 'a@b', '<>', '<ab>', '<@b>', '<a@>', '<a b@c>', '<a@b> <c@d>', '<a@b> x', '<a@b', '(open <a@b>', '<a@b> ((nested))', '<<a@b>>']) {
      assert.equal(readMsgId(none), null, JSON.stringify(none));
    }
    // Linear on a value of any length (a header line is as long as the sender makes it).
    const started = process.hrtime.bigint();
    for (const long of ['<' + '@'.repeat(200_000) + '>', '('.repeat(200_000), ' '.repeat(200_000) + 'x', '<a@b>' + ' ()'.repeat(100_000) + 'x']) assert.equal(readMsgId(long), null);
    assert.ok(process.hrtime.bigint() - started < 2_000_000_000n);
  });
});
