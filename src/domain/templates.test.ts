import { describe, expect, it } from 'vitest';
import { compileExportTemplate, compileTemplate, renderExportTemplate, renderTemplate, TemplateError } from './templates.ts';

const limits = { fuel: 50_000, recursionLimit: 64 };
const render = (source: string, scope: Record<string, unknown> = {}) => renderTemplate(source, scope, limits);

function failure(fn: () => unknown): TemplateError {
  try {
    fn();
  } catch (err) {
    if (err instanceof TemplateError) return err;
    throw err;
  }
  throw new Error('expected a TemplateError');
}

const tricky = 'He said "hi", C:\\path\n\ttab — ünïcødé 😀 </script> & \'q\' \u2028 \u0001';

describe('tojson', () => {
  it('encodes strings with quotes, backslashes, control characters and unicode as valid JSON', () => {
    const out = render('{{ s | tojson }}', { s: tricky });
    expect(JSON.parse(out)).toBe(tricky);
    expect(out).not.toContain('&quot;');
    expect(out).not.toContain('&#');
  });

  it("escapes <, >, & and ' inside the JSON (as Jinja does), so it can sit in HTML", () => {
    expect(render('{{ s | tojson }}', { s: `<a href='x'>&</a>` })).toBe('"\\u003ca href=\\u0027x\\u0027\\u003e\\u0026\\u003c/a\\u003e"');
  });

  it('encodes nested objects, lists, numbers, booleans and null in document order', () => {
    const o = { z: 1, a: [1, 2.5, { b: null, c: true, 'k"ey': 'v' }], u: 'é' };
    const out = render('{{ o | tojson }}', { o });
    expect(out).toBe(JSON.stringify(o));
    expect(JSON.parse(out)).toEqual(o);
  });

  it('renders a missing value as null and honours indent (Jinja and Liquid call forms)', () => {
    expect(render('{{ missing | tojson }}')).toBe('null');
    expect(render('{{ o | tojson(indent=2) }}', { o: { a: [1] } })).toBe('{\n  "a": [\n    1\n  ]\n}');
    expect(render('{{ o | tojson: indent: 1 }}', { o: { a: 1 } })).toBe('{\n "a": 1\n}');
    expect(render('{{ o | tojson(1) }}', { o: { a: 1 } })).toBe('{\n "a": 1\n}');
  });

  it('builds a JSON document from a template', () => {
    const scope = { name: 'a "b"', tags: ['x', 'ÿ'], data: { n: 1, m: { deep: ['<'] } } };
    const out = render('{"name": {{ name | tojson }}, "tags": {{ tags | tojson }}, "data": {{ data | tojson }}}', scope);
    expect(JSON.parse(out)).toEqual(scope);
  });

  it('rejects a non-integer or negative indent', () => {
    expect(failure(() => render('{{ 1 | tojson(indent="x") }}')).message).toMatch(/indent must be an integer/);
    expect(failure(() => render('{{ 1 | tojson(indent=-1) }}')).message).toMatch(/indent must not be negative/);
  });
});

describe('default / d', () => {
  it('replaces only a missing value unless boolean is true (Jinja semantics)', () => {
    const scope = { n: null, e: '', z: 0, f: false, l: [], o: {}, v: 'v' };
    expect(render('{{ missing | default("x") }}', scope)).toBe('x');
    expect(render('[{{ missing | default }}]', scope)).toBe('[]');
    for (const name of ['n', 'e', 'z', 'f']) {
      expect(render(`[{{ ${name} | default("x") }}]`, scope)).not.toBe('[x]');
    }
    for (const name of ['n', 'e', 'z', 'f', 'l', 'o', 'missing']) {
      expect(render(`{{ ${name} | default("x", true) }}`, scope)).toBe('x');
      expect(render(`{{ ${name} | d("x", boolean=true) }}`, scope)).toBe('x');
      expect(render(`{{ ${name} | default: "x", boolean: true }}`, scope)).toBe('x');
    }
    expect(render('{{ v | default("x", true) }}', scope)).toBe('v');
    expect(render('{{ missing | default(v) }}', scope)).toBe('v');
    expect(render('{{ missing | default(default_value="k") }}', scope)).toBe('k');
  });

  it('keeps a present value, which later filters see', () => {
    expect(render('{{ missing | default(l) | tojson }}', { l: [1] })).toBe('[1]');
    expect(render('{{ l | default("x") | tojson }}', { l: [] })).toBe('[]');
  });
});

describe('length / count', () => {
  it('counts list items, string characters (code points) and object members', () => {
    expect(
      render('{{ l | length }} {{ s | length }} {{ o | count }} {{ missing | length }} {{ n | length }}', {
        l: [1, 2, 3],
        s: 'aü😀',
        o: { a: 1, b: 2 },
        n: null,
      }),
    ).toBe('3 3 2 0 0');
  });

  it('refuses a number', () => {
    expect(failure(() => render('{{ 5 | length }}')).message).toMatch(/length needs a list, string or object/);
  });
});

describe('lower / upper / trim', () => {
  it('convert case and strip whitespace or given characters', () => {
    expect(render('{{ s | lower }}|{{ s | upper }}', { s: 'AbÇ' })).toBe('abç|ABÇ');
    expect(render('[{{ s | trim }}]', { s: ' \t a b \n' })).toBe('[a b]');
    expect(render('[{{ s | trim("x/") }}]', { s: 'x/x-a/b-x/' })).toBe('[-a/b-]');
    expect(render('[{{ s | trim(chars="😀") }}]', { s: '😀a😀' })).toBe('[a]');
    expect(render('[{{ missing | upper }}]')).toBe('[]');
    expect(render('{{ n | upper }}', { n: 12 })).toBe('12');
  });
});

describe('join', () => {
  it('joins with an empty separator by default, or the given one', () => {
    const scope = { xs: ['a', 'b', 'c'] };
    expect(render('{{ xs | join }}', scope)).toBe('abc');
    expect(render('{{ xs | join(", ") }}', scope)).toBe('a, b, c');
    expect(render('{{ xs | join(d="|") }}', scope)).toBe('a|b|c');
    expect(render('{{ xs | join: "-" }}', scope)).toBe('a-b-c');
  });

  it('joins an attribute of each item, characters of a string and keys of an object', () => {
    const people = [{ name: 'A', p: { q: 1 } }, { name: 'B', p: { q: 2 } }, { other: 1 }];
    expect(render('{{ people | join(", ", attribute="name") }}', { people })).toBe('A, B, ');
    expect(render('{{ people | join("+", attribute="p.q") }}', { people })).toBe('1+2+');
    expect(render('{{ s | join("-") }}', { s: 'ab😀' })).toBe('a-b-😀');
    expect(render('{{ o | join(",") }}', { o: { x: 1, y: 2 } })).toBe('x,y');
    expect(render('{{ l | join(",") }}', { l: [1, null, true, { a: 1 }] })).toBe('1,,true,{"a":1}');
  });

  it('chains with other filters, also inside assign', () => {
    expect(render('{% assign y = xs | join("-") | upper %}{{ y }}', { xs: ['a', 'b'] })).toBe('A-B');
    expect(render('{{ xs | join(",") | replace(",", ";") | tojson }}', { xs: ['a', 'b'] })).toBe('"a;b"');
  });
});

describe('replace', () => {
  it('replaces every occurrence, or the first count (Python semantics)', () => {
    expect(render('{{ "aaa" | replace("a", "b") }}')).toBe('bbb');
    expect(render('{{ "aaa" | replace("a", "bb", 2) }}')).toBe('bbbba');
    expect(render('{{ "aaa" | replace(old="a", new="", count=1) }}')).toBe('aa');
    expect(render('{{ "ab" | replace("", "-") }}')).toBe('-a-b-');
    expect(render('{{ "ab" | replace("", "-", 1) }}')).toBe('-ab');
    expect(render('{{ "a.b" | replace: ".", "/" }}')).toBe('a/b');
  });
});

describe('filter calls are checked when the template is compiled', () => {
  it.each([
    ['{{ x | join(foo=1) }}', /filter join has no argument foo/],
    ['{{ x | replace("a") }}', /filter replace needs the argument new/],
    ['{{ x | join(d="a", "b") }}', /positional argument follows a keyword argument/],
    ['{{ x | join("a", "b", "c") }}', /filter join takes at most 2 arguments/],
    ['{{ x | join("a", d="b") }}', /filter join got argument d twice/],
    ['{{ x | lower(1) }}', /filter lower takes at most 0 arguments/],
    ['{{ x | join("a" }}', /template syntax error: expected "," or "\)"/],
    ['{{ x | join( }}', /template syntax error/],
    ['{{ x | nope(1) }}', /undefined filter: nope/],
  ])('%s', (source, message) => {
    expect(failure(() => compileTemplate(source, limits)).message).toMatch(message);
    expect(failure(() => compileExportTemplate(source, limits)).message).toMatch(message);
  });

  it('leaves the Liquid filters and the Liquid call form as they were', () => {
    expect(render('{{ s | upcase | append: "!" | json }}', { s: 'a"b' })).toBe('"A\\"B!"');
    expect(render('{{ xs | size }}', { xs: [1, 2] })).toBe('2');
  });
});

describe('work limits stay in force for the Jinja filters', () => {
  it('fuel counts their nodes', () => {
    const source = '{% for i in (1..100) %}{{ s | tojson | upper | replace("A", "B") | trim }}{% endfor %}';
    expect(render(source, { s: 'a' })).toHaveLength(300);
    expect(failure(() => renderTemplate(source, { s: 'a' }, { fuel: 50, recursionLimit: 64 })).message).toMatch(/ran out of fuel/);
  });

  it('their output counts against the render memory bound', () => {
    const big = 'x'.repeat(1_048_576);
    const source = '{% for i in (1..5) %}{{ s | tojson }}{% endfor %}';
    expect(failure(() => render(source, { s: big })).message).toMatch(/too much memory/);
    expect(failure(() => render('{{ s | replace("x", "yyyyyyyyyy") }}', { s: big })).message).toMatch(/too much memory/);
    expect(failure(() => render('{% for i in (1..5) %}{{ l | join(s) }}{% endfor %}', { s: big, l: [1, 2] })).message).toMatch(
      /too much memory/,
    );
    const exportTpl = compileExportTemplate('{% for i in (1..5) %}{{ s | upper }}{% endfor %}', limits).templates;
    expect(failure(() => renderExportTemplate(exportTpl, { s: big }, new Map(), limits, 2 * 1_048_576)).message).toMatch(/too much memory/);
  });

  it('export templates and their fragments have the same filters', () => {
    const main = compileExportTemplate("{% render 'row', item: items[0] %}", limits).templates;
    const row = compileExportTemplate('{{ item.name | default("?") | tojson }}/{{ item | length }}', limits).templates;
    expect(renderExportTemplate(main, { items: [{ name: 'é"' }] }, new Map([['row', row]]), limits, 1_048_576)).toBe('"é\\""/1');
  });
});
