import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiError } from '../../src/domain/errors.ts';
import { checkLayoutChain, inlineCss, mergeLevels, type ContentLevel, type TemplateLevel } from '../../src/domain/templates.ts';

const level = (p: Partial<ContentLevel>): ContentLevel => ({ subject: null, from: null, text: null, html: null, css: null, ...p });
const tpl = (slug: string, parentSlug: string | null, p: Partial<ContentLevel> = {}): TemplateLevel => ({ slug, parentSlug, ...level(p) });

describe('layout merge', () => {
  it('wraps each level into its parent at {{*}}, at every level, keeping variables', () => {
    const merged = mergeLevels([
      level({ text: 'Hi {{name}}', html: '<p>Hi {{name}}</p>' }),
      level({ subject: 'Child {{x}}', text: '[{{*}}]', html: '<div>{{ * }}</div>' }),
      level({ subject: 'Parent', from: 'p@b.co', text: 'top {{*}} bottom', html: '<body>{{*}}</body>' }),
    ]);
    assert.deepEqual(merged, { subject: 'Child {{x}}', from: 'p@b.co', text: 'top [Hi {{name}}] bottom', html: '<body><div><p>Hi {{name}}</p></div></body>' });
  });

  it('inner content wins where a level has no {{*}}; a missing inner part leaves the slot empty', () => {
    assert.equal(mergeLevels([level({ text: 'mine' }), level({ text: 'theirs' })]).text, 'mine');
    assert.equal(mergeLevels([level({}), level({ text: 'theirs' })]).text, 'theirs');
    assert.equal(mergeLevels([level({ text: 'only text' }), level({ html: '<b>{{*}}</b>' })]).html, '<b></b>');
    assert.equal(mergeLevels([level({ text: '$& $1 $$' }), level({ text: 'a{{*}}b' })]).text, 'a$& $1 $$b');
    assert.equal(mergeLevels([level({ text: 'layout used alone: {{*}}.' })]).text, 'layout used alone: .');
  });

  it('inlines CSS of every level, outermost first, before </head> or at the start', () => {
    const merged = mergeLevels([level({ html: '<p>x</p>', css: 'p{color:red}' }), level({ html: '<html><head></head><body>{{*}}</body></html>', css: 'body{margin:0}' })]);
    assert.ok(merged.html!.indexOf('body{margin:0}') < merged.html!.indexOf('p{color:red}'));
    assert.match(merged.html!, /<\/style><\/head>/);
    assert.equal(inlineCss('<p>x</p>', 'p{}'), '<style type="text/css">\np{}\n</style><p>x</p>');
    assert.equal(inlineCss('<style>p{}</style>', 'p{}'), '<style>p{}</style>');
  });

  it('checks the chain: loops, missing parents and excess length are 412', () => {
    assert.equal(checkLayoutChain('a', [tpl('a', 'b'), tpl('b', null)]).length, 2);
    const is412 = (p: RegExp) => (e: ApiError) => e.status === 'precondition_failed' && p.test(e.message);
    assert.throws(() => checkLayoutChain('a', []), is412(/does not exist/));
    assert.throws(() => checkLayoutChain('a', [tpl('a', 'b')]), is412(/layout b .*does not exist/));
    assert.throws(() => checkLayoutChain('a', [tpl('a', 'b'), tpl('b', 'a'), tpl('a', 'b'), tpl('b', 'a')]), is412(/loop/));
    const long = Array.from({ length: 8 }, (_, i) => tpl(`t${i}`, `t${i + 1}`));
    assert.throws(() => checkLayoutChain('t0', long), is412(/longer than 8/));
  });
});

describe('variable names', () => {
  it('finds the {{variables}} a text uses, with the renderer\'s own syntax', async () => {
    const { variableNamesIn } = await import('../../src/domain/variable-values.ts');
    assert.deepEqual(variableNamesIn('Hi {{ name }}, {{*}} {{company}}{{name}}'), ['name', 'company', 'name']);
    assert.deepEqual(variableNamesIn('no variables'), []);
    assert.deepEqual(variableNamesIn(null), []);
  });
});

describe('the template language (docs/templates.md)', () => {
  const load = () => import('../../src/domain/variables.ts');

  it('keeps {{name}} substitution: trimmed names, missing and null as empty, numbers and booleans as text', async () => {
    const { renderVariables } = await load();
    assert.equal(renderVariables('Hi {{ name }}, {{missing}}{{nil}} {{n}} {{t}} {{f}}', { name: 'Ann', nil: null, n: 0, t: true, f: false }), 'Hi Ann,  0 true false');
    // Names that are not Handlebars paths are still looked up literally, as before.
    assert.equal(renderVariables('{{first name}}|{{e@mail}}|{{user.name}}|{{true}}', { 'first name': 'F', 'e@mail': 'E', 'user.name': 'U', true: 'T' }), 'F|E|U|T');
    // A {{*}} left over is text, as before; \{{ is a literal "{{".
    assert.equal(renderVariables('a {{*}} b \\{{name}}', { name: 'x' }), 'a {{*}} b {{name}}');
  });

  it('escapes values in HTML parts only; {{{triple}}} inserts trusted HTML', async () => {
    const { renderVariables } = await load();
    const vars = { v: `<b>"Tom" & 'Jerry'</b>` };
    assert.equal(renderVariables('<p>{{v}}</p>', vars, { kind: 'html' }), '<p>&lt;b&gt;&quot;Tom&quot; &amp; &#x27;Jerry&#x27;&lt;/b&gt;</p>');
    assert.equal(renderVariables('<p>{{{v}}}</p>', vars, { kind: 'html' }), `<p><b>"Tom" & 'Jerry'</b></p>`);
    assert.equal(renderVariables('{{v}}', vars, { kind: 'text' }), vars.v);
    assert.equal(renderVariables('{{v}}', vars, { kind: 'header' }), vars.v);
  });

  it('has conditionals and loops over lists', async () => {
    const { renderVariables } = await load();
    const tpl = '{{#if vip}}VIP {{else}}Hi {{/if}}{{name}}:{{#each items}} {{@index}}.{{title}}x{{qty}}{{#if @last}}.{{/if}}{{/each}}{{#unless items}} nothing{{/unless}}';
    assert.equal(renderVariables(tpl, { vip: true, name: 'Ann', items: [{ title: 'Pen', qty: 2 }, { title: 'Ink', qty: 1 }] }), 'VIP Ann: 0.Penx2 1.Inkx1.');
    assert.equal(renderVariables(tpl, { vip: false, name: 'Bob', items: [] }), 'Hi Bob: nothing');
    assert.equal(renderVariables('{{#with user}}{{first}} {{last}}{{/with}} {{user.first}}', { user: { first: 'A', last: 'B' } }), 'A B A');
    assert.equal(renderVariables('{{#each tags}}[{{this}}]{{/each}}', { tags: ['<x>', 'y'] }, { kind: 'html' }), '[&lt;x&gt;][y]');
  });

  it('reports the variables substituted without a value, not the conditions', async () => {
    const { renderVariables } = await load();
    const missing: string[] = [];
    renderVariables('{{a}} {{b}} {{#if c}}{{d}}{{/if}}{{#each list}}{{e}}{{/each}}', { a: 'x', list: [{}] }, { onMissing: (n) => missing.push(n) });
    assert.deepEqual(missing, ['b', 'e']);
  });

  it('refuses what it cannot render: syntax errors, partials, unknown helpers; no logs', async () => {
    const { findTemplateSyntaxError, renderVariables } = await load();
    assert.equal(findTemplateSyntaxError('Hi {{name}} {{#if x}}y{{/if}}'), null);
    assert.equal(findTemplateSyntaxError(null), null);
    assert.match(findTemplateSyntaxError('{{#if x}}unclosed')!, /Parse error|Expecting/);
    assert.match(findTemplateSyntaxError('{{#each}}{{/each}}')!, /.+/);
    assert.match(findTemplateSyntaxError('{{> header}}')!, /partials/);
    assert.match(findTemplateSyntaxError('{{uppercase name}}') ?? 'literal', /literal/); // a legacy two-word name
    assert.match(findTemplateSyntaxError('{{#uppercase name}}x{{/uppercase}}')!, /unknown helper "uppercase"/);
    assert.match(findTemplateSyntaxError('{{lookup (concat a b) c}}')!, /unknown helper/);
    // Handlebars' log helper is not one of ours: a template cannot write to the service's logs.
    assert.match(findTemplateSyntaxError('{{log "x"}}')!, /unknown helper "log"/);
    assert.match(findTemplateSyntaxError('{{#if}}x{{/if}}')!, /takes one argument/);
    // No prototype access through templates.
    assert.equal(renderVariables('{{constructor.name}}{{__proto__}}', {}), '');
  });

  it("refuses Handlebars' own machinery, helpers used against their form and raw blocks, in plain words", async () => {
    const { findTemplateSyntaxError, renderVariables } = await load();
    const refused: Array<[string, RegExp]> = [
      ['{{helperMissing}}', /Handlebars' own machinery/],
      ['{{#blockHelperMissing}}x{{/blockHelperMissing}}', /Handlebars' own machinery/],
      ['{{lookup}}', /\{\{lookup\}\} takes 2 arguments, got 0/],
      ['{{#lookup a "b"}}x{{/lookup}}', /is not a block/],
      ['{{if}}', /\{\{if\}\} is a block: write \{\{#if value\}\}/],
      ['{{if a}}', /is a block/],
      ['{{each items}}', /is a block/],
      ['{{unless a}}', /is a block/],
      ['{{with}}', /is a block/],
      // A raw block hands its content to a helper that does not exist: the content would vanish.
      ['a{{{{raw}}}} {{x}} {{{{/raw}}}}b', /raw blocks .* not supported/],
      // Names of Object.prototype are variables like any other, not helpers with an arity.
      ['{{#toString}}x{{/toString}}', /^$/],
    ];
    for (const [text, expected] of refused) {
      const problem = findTemplateSyntaxError(text) ?? '';
      assert.match(problem, expected, text);
      assert.doesNotMatch(problem, /Cannot read|undefined|is not a function|\[native code\]/, text);
    }
    // What stays valid: the helpers as made, a variable named like a helper through this., an escape.
    for (const text of ['{{lookup a "b"}}', '{{#if a}}x{{/if}}', '{{this.lookup}}', '\\{{x}}', '{{toString}}', '{{constructor}}']) {
      assert.equal(findTemplateSyntaxError(text), null, text);
    }
    assert.equal(renderVariables('{{this.lookup}} \\{{x}}', { lookup: 'L' }), 'L {{x}}');
  });

  it('a read of an inherited property renders nothing and writes nothing to the console', async () => {
    const { renderVariables } = await load();
    const written: unknown[] = [];
    const saved = { error: console.error, warn: console.warn, log: console.log, info: console.info };
    console.error = console.warn = console.log = console.info = (...args: unknown[]) => written.push(args);
    try {
      assert.equal(renderVariables('[{{toString}}{{hasOwnProperty}}{{valueOf}}{{a.toString}}]', { a: {} }), '[]');
    } finally {
      Object.assign(console, saved);
    }
    assert.deepEqual(written, []);
  });

  it('the legacy renderer keeps messages accepted before the language exactly as they were', async () => {
    const { renderVariables } = await load();
    assert.equal(renderVariables('<p>{{ v }}</p>{{{v}}}', { v: '<b>' }, { kind: 'html', syntax: 'legacy' }), '<p><b></p>{<b>}');
  });

  it('names the variables a text uses, through blocks, not inside each', async () => {
    const { variableNamesIn } = await load();
    assert.deepEqual(variableNamesIn('{{#if vip}}{{a.b}}{{/if}}{{#each items}}{{n}}{{/each}}{{lookup x y}}{{[first name]}}'), ['vip', 'a', 'items', 'x', 'y', 'first name']);
  });
});

describe('the bounds of rendering and merging (docs/templates.md, "Limits")', () => {
  const load = () => import('../../src/domain/variables.ts');
  const MiB = 1024 * 1024;

  it('a rendered part is at most RENDER_LIMITS.partChars: every chunk counts once, text, values, items, blocks\' contents', async () => {
    const { renderVariables, RENDER_LIMITS, RenderLimitError } = await load();
    assert.equal(RENDER_LIMITS.partChars, 5 * MiB);
    // Text, an escaped value, a raw value, a value inside {{#if}}, two items of {{#each}}, a {{#with}}: 1+5+5+1+2+1 characters around `big`.
    const text = 'x{{e}}{{{r}}}{{#if c}}y{{/if}}{{#each l}}{{this}}{{/each}}{{#with w}}{{z}}{{/with}}{{big}}';
    const values = (bigChars: number) => ({ e: '<a&b>', r: '<a&b>', c: true, l: ['1', 2], w: { z: '!' }, big: 'b'.repeat(bigChars) });
    const fixed = 1 + '&lt;a&amp;b&gt;'.length + 5 + 1 + 2 + 1;
    const exact = renderVariables(text, values(RENDER_LIMITS.partChars - fixed), { kind: 'html' });
    assert.equal(exact.length, RENDER_LIMITS.partChars, 'exactly at the bound renders (a block\'s result is not counted twice)');
    assert.throws(
      () => renderVariables(text, values(RENDER_LIMITS.partChars - fixed + 1), { kind: 'html' }),
      (e: Error) => e instanceof RenderLimitError && /^it renders to more than the 5,242,880 characters \(5 MiB\) one part may be \(docs\/templates\.md, "Limits"\)$/.test(e.message),
    );
  });

  it('stops as it goes: a large value in a long loop fails at the chunk that passes the bound', async () => {
    const { renderVariables, RenderLimitError } = await load();
    // 10,000 turns of an escaped 1 MiB value would be 10 GiB escaped, one MiB at a time; the sixth turn passes 5 MiB.
    const big = '<'.repeat(MiB);
    const turns = Array.from({ length: 10_000 }, (_, i) => i);
    const tooLarge = (e: Error) => e instanceof RenderLimitError && /^it renders to more than the 5,242,880 characters/.test(e.message);
    const started = process.hrtime.bigint();
    assert.throws(() => renderVariables('{{#each turns}}{{../big}}{{/each}}', { turns, big }, { kind: 'html' }), tooLarge);
    // The same without escaping, and substituted many times without a loop.
    assert.throws(() => renderVariables('{{#each turns}}{{../big}}{{/each}}', { turns, big }, { kind: 'text' }), tooLarge);
    assert.throws(() => renderVariables('{{big}}'.repeat(10_000), { big }), tooLarge);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    assert.ok(ms < 20_000, `stopped early (${ms} ms)`);
  });

  it('a render takes at most RENDER_LIMITS.steps: loops within loops stop early, even when they append nothing', async () => {
    const { renderVariables, RENDER_LIMITS, RenderLimitError } = await load();
    assert.equal(RENDER_LIMITS.steps, 1_000_000);
    const a = Array.from({ length: 300 }, (_, i) => i);
    const steps = (e: Error) => e instanceof RenderLimitError && /^it takes more than 1,000,000 steps to render \(loops within loops\?\), the most one part may take/.test(e.message);
    // n³ = 27,000,000 turns, 27 MB of output: stopped at the millionth step.
    assert.throws(() => renderVariables('{{#each a}}{{#each ../a}}{{#each ../../a}}x{{/each}}{{/each}}{{/each}}', { a }), steps);
    // Nothing appended inside, and a mustache-style section ({{#a}}), which loops the same way.
    assert.throws(() => renderVariables('{{#each a}}{{#each ../a}}{{#each ../../a}}{{/each}}{{/each}}{{/each}}', { a }), steps);
    assert.throws(() => renderVariables('{{#a}}{{#../a}}{{#../../a}}{{/../../a}}{{/../a}}{{/a}}', { a }), steps);
    // Over an object's keys too; a body of many appends that renders nothing still counts each one.
    const o = Object.fromEntries(a.map((i) => [`k${i}`, i]));
    assert.throws(() => renderVariables('{{#each o}}{{#each ../o}}{{#each ../../o}}{{/each}}{{/each}}{{/each}}', { o }), steps);
    assert.throws(() => renderVariables(`{{#each big}}${'{{none}}'.repeat(200)}{{/each}}`, { big: Array.from({ length: 10_000 }, () => 0) }), steps);
    // What real mail does fits: 10,000 order lines of several values each.
    const lines = Array.from({ length: 10_000 }, (_, i) => ({ title: `Item ${i}`, qty: i, price: '1.00' }));
    const receipt = renderVariables('{{#each lines}}<tr><td>{{title}}</td><td>{{qty}}</td><td>{{price}}</td>{{#if @last}}.{{/if}}</tr>{{/each}}', { lines }, { kind: 'html' });
    assert.match(receipt, /^<tr><td>Item 0<\/td><td>0<\/td><td>1\.00<\/td><\/tr>[\s\S]*Item 9999<\/td><td>9999<\/td><td>1\.00<\/td>\.<\/tr>$/);
  });

  it('each render starts with the whole budget; a value that cannot be printed is still what it was', async () => {
    const { renderVariables, RenderLimitError, TemplateRenderError } = await load();
    const a = Array.from({ length: 300 }, (_, i) => i);
    assert.throws(() => renderVariables('{{#each a}}{{#each ../a}}{{#each ../../a}}x{{/each}}{{/each}}{{/each}}', { a }), (e: Error) => e instanceof RenderLimitError);
    assert.equal(renderVariables('{{#each a}}{{#each ../a}}x{{/each}}{{/each}}', { a }).length, 90_000);
    assert.throws(
      () => renderVariables('You ordered {{item}}.', { item: { toString: 'x' } }),
      (e: Error) => e instanceof TemplateRenderError && !(e instanceof RenderLimitError) && e.message === 'Cannot convert object to primitive value',
    );
    // Each value becomes text on its own: two numbers side by side are two numbers, not their sum.
    assert.equal(renderVariables('{{a}}{{b}}', { a: 1, b: 2 }), '12');
  });

  it('the legacy renderer is bounded the same way', async () => {
    const { renderVariables, RenderLimitError } = await load();
    assert.equal(renderVariables('{{a}}'.repeat(5), { a: 'x'.repeat(MiB) }, { syntax: 'legacy' }).length, 5 * MiB);
    assert.throws(
      () => renderVariables('{{a}}'.repeat(10_000), { a: 'x'.repeat(MiB) }, { syntax: 'legacy' }),
      (e: Error) => e instanceof RenderLimitError && /^it renders to more than the 5,242,880 characters/.test(e.message),
    );
  });

  it('a part that holds {{ and is already longer than the bound is found before it is rendered', async () => {
    const { findPartSizeProblem, RENDER_LIMITS } = await load();
    assert.equal(findPartSizeProblem(`{{name}}${'x'.repeat(RENDER_LIMITS.partChars - 8)}`), null);
    assert.match(findPartSizeProblem(`{{name}}${'x'.repeat(RENDER_LIMITS.partChars)}`)!, /^it is 5,242,888 characters, more than the 5,242,880 characters \(5 MiB\) one part may be/);
    // Without {{ it is not rendered at all: sent as given.
    assert.equal(findPartSizeProblem('x'.repeat(RENDER_LIMITS.partChars + 1)), null);
    assert.equal(findPartSizeProblem(null), null);
  });

  it('layouts may not make a part larger than the bound: the size is computed before the merge, 412 naming the part and the layout', async () => {
    const { RENDER_LIMITS } = await load();
    const { MergedPartTooLargeError } = await import('../../src/domain/templates.ts');
    const slots = '{{*}}'.repeat(100);
    const chain = [tpl('lay_c', 'lay_b', { text: slots }), tpl('lay_b', 'lay_a', { text: slots }), tpl('lay_a', null, { text: slots, html: `<div>${slots}</div>` })];
    for (const chars of [100, 200, 1000]) {
      assert.throws(
        () => mergeLevels([level({ text: 'x'.repeat(chars) }), ...chain]),
        (e: ApiError) =>
          e instanceof MergedPartTooLargeError &&
          e.status === 'precondition_failed' &&
          e.part === 'text' &&
          new RegExp(`^The text part cannot be merged into template "lay_${chars === 1000 ? 'b' : 'a'}": it would be ${(chars * (chars === 1000 ? 10_000 : 1_000_000)).toLocaleString('en-US')} characters, more than the 5,242,880 characters \\(5 MiB\\) one part may be`).test(e.message),
      );
    }
    // The HTML part likewise, named as such.
    assert.throws(() => mergeLevels([level({ html: 'x'.repeat(600) }), tpl('a', 'b', { html: slots }), tpl('b', null, { html: slots })]), (e: InstanceType<typeof MergedPartTooLargeError>) => e.part === 'html' && /^The HTML part cannot be merged into template "b"/.test(e.message));
    // Exactly at the bound merges.
    const half = RENDER_LIMITS.partChars / 2;
    assert.equal(mergeLevels([level({ text: 'x'.repeat(half) }), level({ text: '{{*}}{{ * }}' })]).text!.length, RENDER_LIMITS.partChars);
    assert.throws(() => mergeLevels([level({ text: 'x'.repeat(half + 1) }), level({ text: '{{*}}{{ * }}' })]), (e: Error) => e instanceof MergedPartTooLargeError);
  });
});
