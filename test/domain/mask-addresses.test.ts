// Addresses in a peer's free text reduced to their domain for the log (docs/operations.md, "Logs").
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { maskAddresses } from '../../src/domain/mask-addresses.ts';

it('keeps the domain of every address in a text and nothing of the person', () => {
  assert.equal(maskAddresses('5.1.1 <reject-bob@fail.test>: Recipient address rejected'), '5.1.1 <***@fail.test>: Recipient address rejected');
  assert.equal(maskAddresses('550 user Bob.Smith+tag@Example.COM unknown; also ann@[192.0.2.1].'), '550 user ***@Example.COM unknown; also ***@[192.0.2.1].');
  assert.equal(maskAddresses('mailbox josé@exämple.de is full'), 'mailbox ***@exämple.de is full');
  assert.equal(maskAddresses('4.7.1 Try again later (see https://x.test/help)'), '4.7.1 Try again later (see https://x.test/help)');
});
