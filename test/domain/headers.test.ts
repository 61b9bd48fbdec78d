import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiError } from '../../src/domain/errors.ts';
import { parseHeaders } from '../../src/domain/headers.ts';

const callError = (pattern: RegExp) => (e: ApiError) => e.status === 'call_error' && pattern.test(e.message);

describe('headers', () => {
  it('recognises every spelling of the known headers', () => {
    for (const [from, subject, replyTo, cc] of [
      ['from', 'subject', 'reply-to', 'cc'],
      ['From', 'Subject', 'Reply-To', 'CC'],
      ['FROM', 'SUBJECT', 'reply_to', 'Cc'],
    ]) {
      const h = parseHeaders({ [from]: 'a@b.co', [subject]: 'Hi', [replyTo]: 'r@b.co', [cc]: 'c@b.co', bcc: ['d@b.co', 'e@b.co'] });
      assert.deepEqual(h, { from: 'a@b.co', subject: 'Hi', replyTo: 'r@b.co', cc: 'c@b.co', bcc: 'd@b.co, e@b.co', custom: {} });
    }
  });

  it('keeps custom headers as named, stringifies scalars, skips nulls and composition headers', () => {
    const h = parseHeaders({ 'X-Campaign': 'spring', 'X-Priority': 1, 'X-Flag': true, 'X-None': null, mime_version: '1.0', charset: 'UTF-8', 'Content-Type': 'text/plain', Date: 'x' });
    assert.deepEqual(h.custom, { 'X-Campaign': 'spring', 'X-Priority': '1', 'X-Flag': 'true' });
  });

  it('refuses a value with a line break, naming the header (header injection)', () => {
    assert.throws(() => parseHeaders({ Subject: 'Hi\r\nBcc: victim@x.com' }), callError(/"Subject".*line break/));
    assert.throws(() => parseHeaders({ 'X-Thing': 'a\nb' }), callError(/"X-Thing"/));
    assert.throws(() => parseHeaders({ from: 'a@b.co\r' }), callError(/"from"/));
    assert.throws(() => parseHeaders({ cc: ['a@b.co', 'b@c.co\nX: y'] }), callError(/"cc"/));
  });

  it('refuses invalid names, duplicates in another case, wrong types and owned headers', () => {
    assert.throws(() => parseHeaders({ 'Bad Name': 'x' }), callError(/"Bad Name" is not a valid header name/));
    assert.throws(() => parseHeaders({ 'X:Y': 'x' }), callError(/not a valid header name/));
    assert.throws(() => parseHeaders({ 'Ünï': 'x' }), callError(/not a valid header name/));
    assert.throws(() => parseHeaders({ subject: 'a', Subject: 'b' }), callError(/given twice/));
    assert.throws(() => parseHeaders({ reply_to: 'a@b.co', 'Reply-To': 'b@b.co' }), callError(/given twice/));
    assert.throws(() => parseHeaders({ Subject: ['a'] }), callError(/"Subject" must be a string/));
    assert.throws(() => parseHeaders({ 'X-A': { b: 1 } }), callError(/"X-A"/));
    assert.throws(() => parseHeaders({ To: 'a@b.co' }), callError(/recipients/));
    assert.throws(() => parseHeaders({ 'Message-ID': '<x@y>' }), callError(/uid/));
    assert.throws(() => parseHeaders('From: a@b.co'), callError(/arguments.headers/));
  });
});
