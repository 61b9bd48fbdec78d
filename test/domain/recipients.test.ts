import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiError } from '../../src/domain/errors.ts';
import { checkAddrSpec, collectRecipientEntries, parseMailbox, resolveRecipients, splitAddressList } from '../../src/domain/recipients.ts';

const addressOf = (text: string) => {
  const r = parseMailbox(text);
  return r.ok ? r.mailbox.address : null;
};

describe('addresses', () => {
  it('accepts ordinary, tagged, quoted and international addresses; lower-cases the domain only', () => {
    assert.equal(addressOf('a@b.co'), 'a@b.co');
    assert.equal(addressOf('First.Last+tag@Example.COM'), 'First.Last+tag@example.com');
    assert.equal(addressOf('"john doe"@example.com'), '"john doe"@example.com');
    assert.equal(addressOf("o'brien@example.ie"), "o'brien@example.ie");
    assert.equal(addressOf('ünïcode@exämple.de'), 'ünïcode@exämple.de');
    assert.equal(addressOf('user@Bücher.Example'), 'user@bücher.example');
    assert.equal(addressOf('x@a-b.c-d.example'), 'x@a-b.c-d.example');
  });

  it('refuses what is not an addr-spec, with a reason', () => {
    for (const bad of ['', 'plain', '@example.com', 'a@', 'a@localhost', 'a b@example.com', 'a..b@example.com', '.a@example.com', 'a.@example.com',
      'a@-example.com', 'a@example-.com', 'a@exa_mple.com', 'a@[127.0.0.1]', 'a@1.2.3.4', 'a@example.com.', 'a@@example.com', 'a(comment)@example.com',
      `${'x'.repeat(65)}@example.com`, `a@${'x'.repeat(64)}.com`, 'a@b.c\r\nBcc: evil@x.com']) {
      const r = checkAddrSpec(bad);
      assert.equal(r.ok, false, bad);
      if (!r.ok) assert.ok(r.reason.length > 0);
    }
  });

  it('reads display names, quoted or not, and refuses line breaks in them', () => {
    assert.deepEqual(parseMailbox('Ann Smith <ann@example.com>'), { ok: true, mailbox: { address: 'ann@example.com', name: 'Ann Smith' } });
    assert.deepEqual(parseMailbox('"Doe, John" <J@Example.com>'), { ok: true, mailbox: { address: 'J@example.com', name: 'Doe, John' } });
    assert.deepEqual(parseMailbox('<x@example.com>'), { ok: true, mailbox: { address: 'x@example.com', name: null } });
    assert.equal(parseMailbox('Evil\r\nBcc: x@y.com <a@example.com>').ok, false);
    assert.equal(parseMailbox('Ann <a@example.com> <b@example.com>').ok, false);
    assert.equal(parseMailbox('Ann a@example.com>').ok, false);
  });

  it('reads display names as RFC 5322 writes them: quoted strings with any character and escapes, comments, words', () => {
    const mailbox = (text: string) => {
      const r = parseMailbox(text);
      return r.ok ? [r.mailbox.name, r.mailbox.address] : r.reason;
    };
    // Angle brackets, specials and escapes inside a quoted string are part of the name.
    assert.deepEqual(mailbox('"Sales <EU>" <a@example.test>'), ['Sales <EU>', 'a@example.test']);
    assert.deepEqual(mailbox('"Team; Zo\u00eb" <m3@example.test>'), ['Team; Zo\u00eb', 'm3@example.test']);
    assert.deepEqual(mailbox('"J\u00fcrgen (Support)" <m4@example.test>'), ['J\u00fcrgen (Support)', 'm4@example.test']);
    assert.deepEqual(mailbox('"a\\"b\\\\c <d>" <x@example.com>'), ['a"b\\c <d>', 'x@example.com']);
    assert.deepEqual(mailbox('<"a>b"@example.com>'), [null, '"a>b"@example.com']);
    // Words joined by one space; comments dropped (nested, escaped), or naming a bare address.
    assert.deepEqual(mailbox('"Doe, J"  Jr. <a@example.com>'), ['Doe, J Jr.', 'a@example.com']);
    assert.deepEqual(mailbox('"Ann   Smith" <a@example.com>'), ['Ann Smith', 'a@example.com']);
    assert.deepEqual(mailbox('Ann (x (y, z) \\) w) Smith <a@example.com> (work)'), ['Ann Smith', 'a@example.com']);
    assert.deepEqual(mailbox('(only a comment) <a@example.com>'), [null, 'a@example.com']);
    assert.deepEqual(mailbox('a@example.com (Ann Smith)'), ['Ann Smith', 'a@example.com']);
    assert.deepEqual(mailbox('Team: Sales; <a@example.com>'), ['Team: Sales;', 'a@example.com']);
    // What is not one mailbox.
    assert.equal(mailbox('"Ann <a@example.com>'), 'a quoted string (") is not closed');
    assert.equal(mailbox('Ann (note <a@example.com>'), 'a comment "(" is not closed');
    assert.equal(mailbox('Ann <a@example.com> Smith'), 'it has text after the address in angle brackets');
    assert.equal(mailbox('Ann <a@example.com'), 'its angle brackets do not enclose one address');
    assert.equal(mailbox('team: a@example.com;'), 'the part before @ has characters that need quoting');
  });

  it('splits lists at commas outside quotes, comments and angle brackets', () => {
    assert.deepEqual(splitAddressList('a@b.co, "Doe, J" <d@e.fr>,  ,c@d.io,'), ['a@b.co', '"Doe, J" <d@e.fr>', 'c@d.io']);
    assert.deepEqual(splitAddressList('Odd <we,ird@x.com>'), ['Odd <we,ird@x.com>']);
    assert.deepEqual(splitAddressList('Ann (Smith, J) <a@b.co>, "x\\", y" <c@d.co>, e@f.co'), ['Ann (Smith, J) <a@b.co>', '"x\\", y" <c@d.co>', 'e@f.co']);
  });
});

describe('recipient forms', () => {
  const texts = (v: any) => collectRecipientEntries(v).map((e) => e.text);

  it('reads a string, a list string, arrays nested to any reasonable depth, and objects', () => {
    assert.deepEqual(texts('a@b.co'), ['a@b.co']);
    assert.deepEqual(texts('a@b.co, Name <c@d.co>'), ['a@b.co', 'Name <c@d.co>']);
    assert.deepEqual(texts(['a@b.co', ['c@d.co', ['e@f.co, g@h.co']], null]), ['a@b.co', 'c@d.co', 'e@f.co', 'g@h.co']);
    // Another item that is not an address is refused naming its place (docs/api/send-message.md, "Recipients").
    assert.throws(() => collectRecipientEntries(['a@b.co', ['c@d.co', 7]]), (e: ApiError) => e.status === 'call_error' && /"arguments\.recipients\[1\]\[1\]" must be an address/.test(e.message));
    const entries = collectRecipientEntries({ 'a@b.co': { name: 'Ann', n: 3, ok: true, gone: null }, 'Bo <c@d.co>': {}, 'e@f.co': null });
    assert.deepEqual(entries, [
      { text: 'a@b.co', variables: { name: 'Ann', n: 3, ok: true } },
      { text: 'Bo <c@d.co>', variables: {} },
      { text: 'e@f.co', variables: null },
    ]);
  });

  it('names the field when a recipient has the wrong type', () => {
    assert.throws(() => collectRecipientEntries(['a@b.co', 42]), (e: ApiError) => e.status === 'call_error' && /recipients\[1\]/.test(e.message));
    // A map value that is not an object is a recipient without variables (docs/api/send-message.md).
    assert.deepEqual(collectRecipientEntries({ 'a@b.co': 'Ann', 'c@d.co': 1, 'e@f.co': true }).map((e) => e.variables), [null, null, null]);
    assert.throws(() => collectRecipientEntries(true), (e: ApiError) => e.status === 'call_error');
    let deep: any = 'a@b.co';
    for (let i = 0; i < 100; i++) deep = [deep];
    assert.throws(() => collectRecipientEntries(deep), (e: ApiError) => e.status === 'call_error' && /nested/.test(e.message));
  });

  it('keeps the first of duplicate addresses (case-insensitively) and refuses an invalid one with 412', () => {
    const r = resolveRecipients(collectRecipientEntries({ 'Ann <a@b.co>': { x: '1' }, 'A@B.CO': { x: '2' }, 'c@d.co': null }));
    assert.deepEqual(r, [
      { address: 'a@b.co', name: 'Ann', variables: { x: '1' } },
      { address: 'c@d.co', name: null, variables: null },
    ]);
    assert.throws(() => resolveRecipients(collectRecipientEntries('ok@b.co, broken@')), (e: ApiError) => e.status === 'precondition_failed' && /"broken@"/.test(e.message));
  });
});
