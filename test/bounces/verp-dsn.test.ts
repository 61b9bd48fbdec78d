// Pure parts: VERP addresses and their tags, DSN fields and the verdicts drawn from them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { returnPathFor, transmissionIdFromReturnPath } from '../../src/domain/verp.ts';
import { bounceFromText, classifyDeliveryStatus, parseDeliveryStatus } from '../../src/domain/dsn.ts';

describe('VERP return paths', () => {
  const domain = 'bounces.example.net';
  const key = 'k1';

  it('round-trips with a tag, and refuses what does not carry the right one', () => {
    const address = returnPathFor(domain, 12345, key);
    assert.match(address, /^bounce-12345-[0-9a-f]{16}@bounces\.example\.net$/);
    assert.equal(transmissionIdFromReturnPath(address, domain, key), 12345);
    assert.equal(transmissionIdFromReturnPath(`<${address.toUpperCase()}>`, 'Bounces.Example.NET', key), 12345);
    assert.equal(transmissionIdFromReturnPath(address, domain, 'k2'), null, 'another key');
    assert.equal(transmissionIdFromReturnPath(address.replace('12345', '12346'), domain, key), null, 'another id, same tag');
    assert.equal(transmissionIdFromReturnPath(address, 'other.example', key), null, 'another domain');
    assert.equal(transmissionIdFromReturnPath(returnPathFor(domain, 12345), domain, key), null, 'untagged');
    assert.equal(transmissionIdFromReturnPath(address.replace(/-[0-9a-f]+@/, '-abc@'), domain, key), null, 'short tag');
    for (const junk of ['', '@', 'bounce-@x', 'bounce-0-aa@bounces.example.net', 'bounce-99999999999999999-aa@bounces.example.net', 'x@y@bounces.example.net']) {
      assert.equal(transmissionIdFromReturnPath(junk, domain, key), null, junk);
    }
  });

  it('keeps the 2-argument form as an untagged round trip', () => {
    assert.equal(returnPathFor(domain, 7), 'bounce-7@bounces.example.net');
    assert.equal(transmissionIdFromReturnPath('bounce-7@bounces.example.net', domain), 7);
    assert.equal(transmissionIdFromReturnPath(returnPathFor(domain, 7, key), domain), null);
  });
});

describe('delivery status notifications', () => {
  const report = [
    'Reporting-MTA: dns; mx.example.net',
    'X-Postfix-Queue-ID: 123',
    '',
    'Final-Recipient: rfc822; a@example.com',
    'Action: delivered',
    'Status: 2.0.0',
    '',
    'Final-Recipient: RFC822; b@example.com',
    'Original-Recipient: rfc822;B@example.com',
    'action: Failed',
    'Status: 5.7.1 (delivery not authorized)',
    'Diagnostic-Code: smtp; 554 5.7.1 <b@example.com>: Relay access',
    '  denied',
    '',
  ].join('\r\n');

  it('reads per-message and per-recipient fields, folded lines and types', () => {
    const parsed = parseDeliveryStatus(report);
    assert.equal(parsed.reportingMta, 'mx.example.net');
    assert.equal(parsed.recipients.length, 2);
    assert.deepEqual(parsed.recipients[1], {
      finalRecipient: 'b@example.com',
      originalRecipient: 'B@example.com',
      action: 'failed',
      status: '5.7.1',
      diagnosticCode: '554 5.7.1 <b@example.com>: Relay access denied',
      remoteMta: null,
    });
  });

  it('takes the most severe recipient and names the SMTP code', () => {
    const v = classifyDeliveryStatus(parseDeliveryStatus(report));
    assert.equal(v.outcome, 'failed');
    assert.equal(v.severity, 'hard');
    assert.equal(v.resultCode, 'SMTP_554');
    assert.equal(v.reportedRecipient, 'b@example.com');
  });

  it('distinguishes failed 4.x.x (soft), delayed, and success notices', () => {
    const one = (fields: string) => classifyDeliveryStatus(parseDeliveryStatus(`Reporting-MTA: dns; x\n\nFinal-Recipient: rfc822; a@b.c\n${fields}\n`));
    assert.deepEqual([one('Action: failed\nStatus: 4.4.7').outcome, one('Action: failed\nStatus: 4.4.7').severity, one('Action: failed\nStatus: 4.4.7').resultCode], ['failed', 'soft', 'DSN_4.4.7']);
    assert.deepEqual([one('Action: delayed\nStatus: 4.2.2').outcome, one('Action: delayed\nStatus: 4.2.2').severity], ['delayed', 'soft']);
    assert.equal(one('Action: relayed\nStatus: 2.0.0').outcome, 'ignore');
    assert.equal(one('Action: failed\nDiagnostic-Code: smtp; 550 no').severity, 'hard', 'class from the SMTP code when Status is absent');
    assert.equal(classifyDeliveryStatus(parseDeliveryStatus('')).outcome, 'ignore');
    // A Status that is no RFC 3463 code: the report is not read as a failure.
    assert.equal(one('Action: failed\nStatus: 9.9.9.9.9').outcome, 'ignore');
    assert.equal(one('Action: failed\nStatus: banana').outcome, 'ignore');
  });

  it('reads plain-text bounces conservatively', () => {
    const base = { from: 'MAILER-DAEMON@x', autoSubmitted: null };
    assert.equal(bounceFromText({ ...base, subject: 'Mail delivery failed', text: 'SMTP error: 550 5.1.1 user unknown' }).resultCode, 'SMTP_550');
    assert.equal(bounceFromText({ ...base, subject: 'failure notice', text: 'no codes at all' }).outcome, 'ignore');
    assert.equal(bounceFromText({ ...base, subject: 'Delivery delayed', text: '451 4.4.1 no answer' }).outcome, 'delayed');
    assert.equal(bounceFromText({ from: 'person@example.com', autoSubmitted: null, subject: 'Re: hello', text: 'error 550 5.1.1 in my code' }).outcome, 'ignore');
    assert.equal(bounceFromText({ ...base, autoSubmitted: 'auto-replied', subject: 'Undeliverable: hello', text: '550 5.1.1 x' }).outcome, 'failed');
    assert.equal(bounceFromText({ from: 'ann@example.com', autoSubmitted: 'auto-replied', subject: 'Automatic reply: hello', text: '550 5.1.1 x' }).outcome, 'ignore');
  });
});
