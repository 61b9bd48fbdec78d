import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseAttachments, normalizeBase64 } from '../../src/domain/attachments.ts';
import { ApiError } from '../../src/domain/errors.ts';

describe('attachments', () => {
  it('accepts wrapped base64, missing padding, parameters and extra keys', () => {
    const wrapped = Buffer.from('x'.repeat(100)).toString('base64').replace(/(.{60})/g, '$1\n');
    const out = parseAttachments({
      'a.txt': { content_type: 'text/plain; charset=utf-8', content: wrapped, disposition: 'inline' },
      'b.bin': { content: 'QQ' },
    });
    assert.deepEqual(out[0], { filename: 'a.txt', contentType: 'text/plain; charset=utf-8', content: Buffer.from('x'.repeat(100)).toString('base64') });
    assert.deepEqual(out[1], { filename: 'b.bin', contentType: 'application/octet-stream', content: 'QQ==' });
    assert.equal(normalizeBase64(''), '');
  });

  it('refuses bad base64 and malformed attachments, naming the file', () => {
    const named = (name: string) => (e: ApiError) => e.status === 'call_error' && e.message.includes(`"${name}"`);
    assert.throws(() => parseAttachments({ 'bad.pdf': { content_type: 'application/pdf', content: 'not base64!' } }), named('bad.pdf'));
    assert.throws(() => parseAttachments({ 'odd.pdf': { content: 'QUJDR' } }), named('odd.pdf'));
    assert.throws(() => parseAttachments({ 'pad.pdf': { content: 'QQ=' } }), named('pad.pdf'));
    assert.throws(() => parseAttachments({ 'none.pdf': { content_type: 'application/pdf' } }), named('none.pdf'));
    assert.throws(() => parseAttachments({ 'num.pdf': { content: 42 } }), named('num.pdf'));
    assert.throws(() => parseAttachments({ 'type.pdf': { content_type: 'pdf', content: 'QQ==' } }), named('type.pdf'));
    assert.throws(() => parseAttachments({ 'inj.pdf': { content_type: 'text/plain\r\nX: y', content: 'QQ==' } }), named('inj.pdf'));
    assert.throws(() => parseAttachments({ 'str.pdf': 'QQ==' }), named('str.pdf'));
    assert.throws(() => parseAttachments(['x']), (e: ApiError) => e.status === 'call_error' && /attachments/.test(e.message));
  });
});

describe('attached messages (message/rfc822)', () => {
  it('are stored with CRLF line ends, as they go on the wire (a DKIM signature is made over those bytes)', () => {
    const lf = 'Subject: inner\nFrom: a@example.test\n\nline one\r\nline two\n';
    const [out] = parseAttachments({ 'fwd.eml': { content_type: 'message/rfc822', content: Buffer.from(lf).toString('base64') } });
    assert.equal(Buffer.from(out.content, 'base64').toString(), 'Subject: inner\r\nFrom: a@example.test\r\n\r\nline one\r\nline two\r\n');
    const crlf = Buffer.from('Subject: inner\r\n\r\nbody\r\n').toString('base64');
    assert.equal(parseAttachments({ 'ok.eml': { content_type: 'message/rfc822', content: crlf } })[0].content, crlf);
    // Other types are stored as given.
    const text = Buffer.from('a\nb\n').toString('base64');
    assert.equal(parseAttachments({ 'a.txt': { content_type: 'text/plain', content: text } })[0].content, text);
  });
});
