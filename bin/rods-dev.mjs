#!/usr/bin/env node
// The development commands (dev/cli.ts), through tsx's loader as `rods` is: `npm run dev -- --help`.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../dev/cli.ts');
await main(process.argv);
