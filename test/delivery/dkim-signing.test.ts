// DKIM signatures on signing threads (src/delivery/dkim-signing.ts): the bytes are those of
// Nodemailer's signer on the event loop (RSA PKCS#1 v1.5 signatures are deterministic and
// Nodemailer's header carries no time), they verify against the public key (mailauth), and a thread
// that dies with signatures in flight costs nothing but time: they are signed on the event loop.
// Signing never throws past its caller: a message Nodemailer's signer would throw on (no empty line
// after its header section) and a key that cannot sign are rejected promises.
import assert from 'node:assert/strict';
import { createPrivateKey, generateKeyPairSync } from 'node:crypto';
import { describe, it } from 'node:test';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { DkimSigners, DkimSigningError, signOnEventLoop } from '../../src/delivery/dkim-signing.ts';
import type { DkimKey } from '../../src/delivery/dkim.ts';

const pair = generateKeyPairSync('rsa', { modulusLength: 2048 });
const key: DkimKey = { domainName: 'signed.test', keySelector: 's1', privateKey: createPrivateKey(pair.privateKey.export({ type: 'pkcs8', format: 'pem' })) };
const publicKey = (pair.publicKey.export({ type: 'spki', format: 'der' }) as Buffer).toString('base64');
const resolver = async (name: string, type: string) => {
  if (type === 'TXT' && name === 's1._domainkey.signed.test') return [[`v=DKIM1; k=rsa; p=${publicKey}`]];
  throw Object.assign(new Error(`no ${type} for ${name}`), { code: 'ENOTFOUND' });
};

const message = (n: number) =>
  Buffer.from(`From: News <news@signed.test>\r\nTo: r${n}@example.net\r\nSubject: Message ${n}\r\nMessage-ID: <m${n}@signed.test>\r\n\r\nHello ${n}.\r\n.a dot line\r\n`);

async function verifies(signed: Buffer): Promise<boolean> {
  const result = (await dkimVerify(signed, { resolver })) as { results: Array<{ status: { result: string } }> };
  return result.results.length === 1 && result.results[0].status.result === 'pass';
}

describe('DKIM signing threads', { timeout: 60_000 }, () => {
  it('sign on a thread with the bytes the event loop would, and they verify', async () => {
    const signers = new DkimSigners(2);
    try {
      const signed = await Promise.all([0, 1, 2, 3, 4].map((n) => signers.sign(message(n), key)));
      assert.equal((signers as unknown as { threads: unknown[] }).threads.length, 2, 'signed on two threads');
      for (const [n, bytes] of signed.entries()) {
        assert.deepEqual(bytes, await signOnEventLoop(message(n), key));
        assert.match(bytes.toString(), /^DKIM-Signature: v=1; a=rsa-sha256; c=relaxed\/relaxed; d=signed\.test;\r\n q=dns\/txt; s=s1;/);
        assert.ok(bytes.toString().endsWith(message(n).toString()));
        assert.ok(await verifies(bytes));
      }
    } finally {
      await signers.close();
    }
  });

  it('signs on the event loop what a thread held when it died, and starts a new thread after', async () => {
    const signers = new DkimSigners(1);
    try {
      const held = [0, 1, 2].map((n) => signers.sign(message(n), key));
      const threads = (signers as unknown as { threads: Array<{ worker: { terminate(): Promise<number> } }> }).threads;
      assert.equal(threads.length, 1);
      await threads[0].worker.terminate();
      const signed = await Promise.all(held);
      for (const [n, bytes] of signed.entries()) assert.deepEqual(bytes, await signOnEventLoop(message(n), key));
      const after = await signers.sign(message(9), key);
      assert.ok(await verifies(after));
      assert.equal(threads.length, 1, 'a new thread replaced the dead one');
    } finally {
      await signers.close();
    }
  });

  it('with no thread to spare, or once closed, signs on the event loop', async () => {
    const none = new DkimSigners(0);
    assert.ok(await verifies(await none.sign(message(1), key)));
    assert.equal((none as unknown as { threads: unknown[] }).threads.length, 0);
    const closed = new DkimSigners(1);
    await closed.close();
    assert.ok(await verifies(await closed.sign(message(2), key)));
    assert.equal((closed as unknown as { threads: unknown[] }).threads.length, 0);
  });

  it('rejects a message without an empty line after its header section (Nodemailer would throw uncaught), on a thread and on the event loop', async () => {
    const bare = Buffer.from('From: a@signed.test\r\nSubject: s\r\n');
    for (const threads of [0, 1]) {
      const signers = new DkimSigners(threads);
      try {
        await assert.rejects(signers.sign(bare, key), (error: unknown) => error instanceof DkimSigningError && /no empty line after its header section/.test(error.message));
        assert.ok(await verifies(await signers.sign(message(1), key)), 'and signs the next message');
      } finally {
        await signers.close();
      }
    }
    await assert.rejects(signOnEventLoop(bare, key), DkimSigningError);
    // An empty body after the empty line is a message like any other.
    assert.ok(await verifies(await signOnEventLoop(Buffer.from('From: a@signed.test\r\nSubject: s\r\n\r\n'), key)));
  });

  it('rejects, rather than sending unsigned, when the key cannot sign', async () => {
    const broken: DkimKey = { ...key, privateKey: 'not a key' as unknown as DkimKey['privateKey'] };
    for (const threads of [0, 1]) {
      const signers = new DkimSigners(threads);
      try {
        await assert.rejects(signers.sign(message(1), broken), (error: unknown) => error instanceof DkimSigningError && /did not sign/.test(error.message));
      } finally {
        await signers.close();
      }
    }
  });
});
