// `npm run build:dashboard`: the dashboard page (src/) into dist/ (ignored), which the gateway
// serves at /dashboard/ (entry/gateway/dashboard.ts).
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/dashboard/',
  logLevel: 'warn',
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    // No inline modulepreload polyfill: the page's policy allows its own script files only.
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 400,
  },
});
