#!/usr/bin/env node
// The `rods` command. The project is TypeScript run through tsx's loader, so there is no
// build step between a checkout and a working CLI.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../entry/cli/main.ts');
await main(process.argv);
