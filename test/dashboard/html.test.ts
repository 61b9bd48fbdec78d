// The dashboard's HTML helper (src/dashboard/html.ts): every value escaped; a string between tags
// isolated in <bdi>; inside a tag, a <textarea> or an open attribute quote only escaped (a form
// posts back what it was given); inside <title> isolated by FSI ... PDI.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { html, showBidiControls } from '../../src/dashboard/html.ts';

const RLO = '\u202E';

describe('dashboard html', () => {
  it('isolates a string between tags in <bdi>, escaped', () => {
    assert.equal(html`<td>${`a${RLO}b<i>`}</td>`.value, `<td><bdi>a${RLO}b&lt;i&gt;</bdi></td>`);
    assert.equal(html`<h3>${'Eve'} &lt;${'eve@example.com'}&gt;</h3>`.value, '<h3><bdi>Eve</bdi> &lt;<bdi>eve@example.com</bdi>&gt;</h3>');
    assert.equal(html`Checked ${'today'}.`.value, 'Checked <bdi>today</bdi>.', 'a fragment without a tag is text');
    assert.equal(html`<p>${''}${0}${null}</p>`.value, '<p>0</p>', 'nothing for empty strings; numbers as they are');
  });

  it('only escapes a value inside a tag, a textarea or an open attribute quote', () => {
    assert.equal(html`<input name="${'a b'}" value="${`x${RLO}"y`}">`.value, `<input name="a b" value="x${RLO}&quot;y">`);
    assert.equal(html`<a href="/t/${'s'}?p=${'q'}" aria-label="Remove ${'x'}">${'x'}</a>`.value, '<a href="/t/s?p=q" aria-label="Remove x"><bdi>x</bdi></a>');
    assert.equal(html`<textarea id="t" name="html">${'<b>'}</textarea><p>${'after'}</p>`.value, '<textarea id="t" name="html">&lt;b&gt;</textarea><p><bdi>after</bdi></p>');
    assert.equal(html` aria-describedby="err-${'subject'}"`.value, ' aria-describedby="err-subject"', 'a fragment inside an attribute');
    assert.equal(html`<title>${'Message x'} · Posthorn</title>`.value, '<title>\u2068Message x\u2069 · Posthorn</title>');
    const inner = html` data-x="${'v'}"`;
    assert.equal(html`<div${inner}>${['a', html`<b>${'c'}</b>`]}</div>`.value, '<div data-x="v"><bdi>a</bdi><b><bdi>c</bdi></b></div>');
  });

  it('shows the bidirectional controls of a name as code points', () => {
    assert.equal(showBidiControls(`invoice${RLO}fdp.exe`), 'invoice[U+202E]fdp.exe');
    assert.equal(showBidiControls('a\u2066b\u200Fc\u061C'), 'a[U+2066]b[U+200F]c[U+061C]');
    assert.equal(showBidiControls('plain.pdf'), 'plain.pdf');
  });
});
