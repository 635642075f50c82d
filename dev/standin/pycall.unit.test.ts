import { describe, expect, it } from 'vitest';
import { formatCall, PyParseError, parseCall, pyString, toPlain } from './pycall.js';

describe('call strings as data', () => {
  it('parses keyword and positional literal arguments of every kind', () => {
    const c = parseCall(
      "f('a', -3, x=1.5e3, y=[1, 'b', None], z={'k': (True, False)}, w=\"it's\", v='tab\\there', u=+2)",
    );
    expect(c.name).toBe('f');
    expect(c.args.map(toPlain)).toEqual(['a', -3]);
    expect(Object.fromEntries(c.kwargs.map(([k, v]) => [k, toPlain(v)]))).toEqual({
      x: 1500,
      y: [1, 'b', null],
      z: { k: [true, false] },
      w: "it's",
      v: 'tab\there',
      u: 2,
    });
  });

  it('round-trips through the printer (same values, Python syntax)', () => {
    for (const s of [
      "cd(folder='document')",
      "mv(source='final_report.pdf',destination='temp')",
      "post_tweet(content='Ready!', tags=['#a', '#b'], mentions=[])",
      "edit_ticket(ticket_id=654321, updates={'priority': 2})",
      'fillFuelTank(fuelAmount=10.0)',
      "echo(content=\"line one\\nline 'two'\", file_name='a.txt')",
      'f((1,), ())',
    ]) {
      const once = parseCall(s);
      const printed = formatCall(once);
      expect(parseCall(printed)).toEqual(once);
    }
    expect(formatCall(parseCall('fillFuelTank(fuelAmount=10.0)'))).toBe('fillFuelTank(fuelAmount=10.0)');
    expect(formatCall(parseCall('f((1,))'))).toBe('f((1,))');
  });

  it('writes strings as repr() does', () => {
    expect(pyString('plain')).toBe("'plain'");
    expect(pyString("it's")).toBe('"it\'s"');
    expect(pyString('both \' and "')).toBe("'both \\' and \"'");
    expect(pyString('a\\b\n')).toBe("'a\\\\b\\n'");
  });

  it('refuses anything that is not one call with literal arguments', () => {
    for (const bad of [
      'os.system("x")',
      'f(g())',
      'f(x)',
      'f(__file__)',
      'f(1 + 2)',
      'f(lambda: 1)',
      'f(*a)',
      'f(a=1, a=2)',
      'f(a=1, 2)',
      'f(1); g()',
      "f('unterminated)",
      'f(1)(2)',
    ]) {
      expect(() => parseCall(bad), bad).toThrow(PyParseError);
    }
  });
});
