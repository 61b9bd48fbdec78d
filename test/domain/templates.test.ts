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

  it('the legacy renderer keeps messages accepted before the language exactly as they were', async () => {
    const { renderVariables } = await load();
    assert.equal(renderVariables('<p>{{ v }}</p>{{{v}}}', { v: '<b>' }, { kind: 'html', syntax: 'legacy' }), '<p><b></p>{<b>}');
  });

  it('names the variables a text uses, through blocks, not inside each', async () => {
    const { variableNamesIn } = await load();
    assert.deepEqual(variableNamesIn('{{#if vip}}{{a.b}}{{/if}}{{#each items}}{{n}}{{/each}}{{lookup x y}}{{[first name]}}'), ['vip', 'a', 'items', 'x', 'y', 'first name']);
  });
});
