import { describe, expect, it } from 'vitest';
import { UsageError } from './errors.js';
import { intOption, minutesOption, portOption, positiveInt } from './options.js';

describe('integer options', () => {
  it('accepts integers in range and names the flag and the range otherwise', () => {
    expect(intOption('--task-cache')('0')).toBe(0);
    expect(intOption('--port', 0, 65535)('65535')).toBe(65535);
    expect(positiveInt('--steps')('3')).toBe(3);
    const refused: [() => number, string][] = [
      [() => intOption('--task-cache')('-1'), '--task-cache must be a non-negative integer, got "-1"'],
      [
        () => intOption('--port', 0, 65535)('65536'),
        '--port must be an integer from 0 to 65535, got "65536"',
      ],
      [() => positiveInt('--steps')('2.5'), '--steps must be a positive integer, got "2.5"'],
      [() => intOption('--seeds', 2)('1'), '--seeds must be an integer of at least 2, got "1"'],
      [() => intOption('--n')('1e20'), '--n must be a non-negative integer, got "1e20"'],
      [() => intOption('--n')('abc'), '--n must be a non-negative integer, got "abc"'],
    ];
    for (const [parse, message] of refused) {
      expect(parse).toThrow(UsageError);
      expect(parse).toThrow(message);
    }
  });
});

describe('port and minutes options', () => {
  it('takes ports 0..65535 and minutes >= 0, fractions included', () => {
    expect(portOption('--metrics-port')('9464')).toBe(9464);
    expect(() => portOption('--metrics-port')('70000')).toThrow(
      '--metrics-port must be an integer from 0 to 65535, got "70000"',
    );
    expect(minutesOption('--anchor-minutes')('0.5')).toBe(0.5);
    expect(minutesOption('--anchor-minutes')('0')).toBe(0);
    for (const bad of ['-1', 'soon', '', 'Infinity'])
      expect(() => minutesOption('--anchor-minutes')(bad)).toThrow(UsageError);
  });
});
