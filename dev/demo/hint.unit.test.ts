import { describe, expect, it } from 'vitest';
import { dashboardHint } from './run.js';

describe('the demo dashboard hint', () => {
  it('gives the URL, where the token is, and a URL that carries it in the fragment only', () => {
    const h = dashboardHint({
      url: 'http://127.0.0.1:7500/dashboard/#campaign=demo-1',
      tokenFile: '/r/dashboard.token',
    });
    expect(h).toContain('dashboard: http://127.0.0.1:7500/dashboard/#campaign=demo-1');
    expect(h).toContain('token (read-only): /r/dashboard.token');
    expect(h).toContain('"http://127.0.0.1:7500/dashboard/#token=$(cat /r/dashboard.token)&campaign=demo-1"');
  });
});
