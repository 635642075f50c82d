// `rods worker` processes on a test's own task queue, killed with SIGKILL by the test (crash
// tests), and `rods ARGS` against that queue.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { ROOT } from './sources.js';

export function workerProcesses(taskQueue: string) {
  const running = new Set<ChildProcess>();
  const kill9 = (child: ChildProcess) =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGKILL');
    });
  return {
    running,
    start(): ChildProcess {
      const child = spawn(
        process.execPath,
        [
          path.join(ROOT, 'bin/rods.mjs'),
          'worker',
          '--task-queue',
          taskQueue,
          '--sink-dir',
          '.stack/test-sink',
        ],
        { cwd: ROOT, stdio: ['ignore', 'ignore', 'ignore'] },
      );
      running.add(child);
      child.once('exit', () => running.delete(child));
      return child;
    },
    kill9,
    killAll: async () => {
      for (const w of [...running]) await kill9(w);
    },
    /** `rods ARGS` with this task queue; rejects on a non-zero exit (with code and stdout). */
    rods: (args: string[]) =>
      promisify(execFile)(process.execPath, [path.join(ROOT, 'bin/rods.mjs'), ...args], {
        cwd: ROOT,
        env: { ...process.env, RODS_TASK_QUEUE: taskQueue },
        maxBuffer: 16 * 1024 * 1024,
      }),
  };
}
