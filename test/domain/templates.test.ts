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
