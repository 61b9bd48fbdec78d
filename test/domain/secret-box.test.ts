import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SecretBox } from '../../src/domain/secret-box.ts';

describe('SecretBox', () => {
  it('seals and opens; a sealed value is neither the plaintext nor stable across seals', () => {
    const box = new SecretBox('deployment secret');
    const a = box.seal('imap-password');
    assert.notEqual(a, box.seal('imap-password'));
    assert.doesNotMatch(a, /imap-password/);
    assert.equal(box.open(a), 'imap-password');
    assert.throws(() => new SecretBox('another secret').open(a));
  });

  it('derives one key per purpose: the same in every process sharing the secret, different per purpose and per secret', () => {
    const one = new SecretBox('deployment secret');
    const two = new SecretBox('deployment secret');
    assert.equal(one.deriveKey('posthorn verp tag key v1'), two.deriveKey('posthorn verp tag key v1'));
    assert.notEqual(one.deriveKey('posthorn verp tag key v1'), one.deriveKey('posthorn tracking key v1'));
    assert.notEqual(one.deriveKey('posthorn verp tag key v1'), new SecretBox('other').deriveKey('posthorn verp tag key v1'));
    assert.doesNotMatch(one.deriveKey('x'), /deployment secret/);
  });
});
