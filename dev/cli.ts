// `npm run dev -- <command>`: the development entry point, apart from the shipped `rods` CLI. It
// carries what runs the product against stand-ins: the demo campaign, the SIMULATED trainer and
// its policy experiment, and the stand-in generator (the local stack has its own commands, `npm run
// stack:up|down|status`).
import { Command } from 'commander';
import { run } from '../entry/cli/main.js';
import { register as demoCommand } from './commands/demo.js';
import { register as experimentCommand } from './commands/experiment.js';
import { register as simulateTrainerCommand } from './commands/simulate-trainer.js';
import { register as standinCommand } from './commands/standin.js';

export function devProgram(): Command {
  const p = new Command('rods-dev')
    .description(
      'Development commands for rods: the demo campaign, the SIMULATED trainer and its policy experiment, and the stand-in generator (none of them is part of the shipped `rods` CLI).',
    )
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  for (const reg of [demoCommand, simulateTrainerCommand, experimentCommand, standinCommand]) reg(p);
  return p;
}

export const main = (argv: string[]) => run(devProgram(), argv);
