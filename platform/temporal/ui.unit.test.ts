import { describe, expect, it } from 'vitest';
import { devServerArgs } from '../../infra/stack/temporal.js';
import { temporalHttpPort, temporalUiPort, temporalUiUrl } from './ui.js';

describe('Temporal Web UI settings', () => {
  it('puts the UI beside a loopback frontend (8233 for 7233), configurable or off', () => {
    expect(temporalUiPort(7233, {})).toBe(8233);
    expect(temporalUiPort(7233, { RODS_TEMPORAL_UI_PORT: '9999' })).toBe(9999);
    expect(temporalUiPort(7233, { RODS_TEMPORAL_UI_PORT: '0' })).toBeNull();
    expect(temporalUiPort(7233, { RODS_TEMPORAL_UI_PORT: 'off' })).toBeNull();
    expect(() => temporalUiPort(7233, { RODS_TEMPORAL_UI_PORT: 'x' })).toThrow(/RODS_TEMPORAL_UI_PORT/);
    expect(temporalUiUrl('127.0.0.1:7233', {})).toBe('http://127.0.0.1:8233');
    expect(temporalUiUrl('127.0.0.1:7233', { RODS_TEMPORAL_UI_PORT: 'off' })).toBeNull();
    // A remote server's UI is only known when configured.
    expect(temporalUiUrl('temporal.internal:7233', {})).toBeNull();
    expect(temporalUiUrl('temporal.internal:7233', { RODS_TEMPORAL_UI_URL: 'https://ui.example/' })).toBe(
      'https://ui.example',
    );
    expect(temporalHttpPort(7233, {})).toBe(10233);
  });

  it('starts the dev server with the UI on loopback unless disabled, never on the HTTP port', () => {
    const args = devServerArgs({ host: '127.0.0.1', port: 7233, namespace: 'default', env: {} });
    const at = (flag: string) => args[args.indexOf(flag) + 1];
    expect(args).not.toContain('--headless');
    expect(at('--ui-ip')).toBe('127.0.0.1');
    expect(at('--ui-port')).toBe('8233');
    expect(at('--http-port')).toBe('10233');
    expect(args).not.toContain('--db-filename');
    const headless = devServerArgs({
      host: '127.0.0.1',
      port: 7233,
      namespace: 'default',
      dbFile: '/x/temporal.db',
      env: { RODS_TEMPORAL_UI_PORT: '0' },
    });
    expect(headless).toContain('--headless');
    expect(headless).not.toContain('--ui-port');
    expect(headless[headless.indexOf('--db-filename') + 1]).toBe('/x/temporal.db');
  });
});
