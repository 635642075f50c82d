// Certificates made with the openssl CLI into a folder: a CA, and leaf certificates it signs for
// given names (server and client use), valid or already expired. The secured local stack keeps
// its own under .stack/secrets/tls; a TLS test makes throwaway ones in a temporary folder.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface Pem {
  cert: string;
  key: string;
  certPath: string;
  keyPath: string;
}

/** openssl req: a new P-256 key, not encrypted. */
const NEW_EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export class Pki {
  readonly dir: string;
  // Unique per certificate across runs: a rotated certificate gets a serial of its own.
  private serial = Date.now();

  /** `dir`: where the files go (made 0700); none: a fresh temporary folder. */
  constructor(
    dir?: string,
    private readonly days = 2,
  ) {
    if (dir) {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      chmodSync(dir, 0o700);
      this.dir = dir;
    } else this.dir = mkdtempSync(path.join(tmpdir(), 'rods-pki-'));
  }

  /** The certificate and key already made under this name, if both are there. */
  existing(name: string): Pem | undefined {
    const p = path.join(this.dir, name);
    return existsSync(`${p}.crt`) && existsSync(`${p}.key`) ? this.pem(name) : undefined;
  }

  private openssl(args: string[]): void {
    execFileSync('openssl', args, { cwd: this.dir, stdio: ['ignore', 'ignore', 'pipe'] });
  }

  private pem(name: string): Pem {
    const certPath = path.join(this.dir, `${name}.crt`);
    const keyPath = path.join(this.dir, `${name}.key`);
    return { cert: readFileSync(certPath, 'utf8'), key: readFileSync(keyPath, 'utf8'), certPath, keyPath };
  }

  /** A self-signed CA. */
  ca(name: string): Pem {
    this.openssl([
      'req',
      '-x509',
      ...NEW_EC_KEY,
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.crt`,
      '-days',
      String(this.days),
      '-subj',
      `/CN=${name}`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]);
    chmodSync(path.join(this.dir, `${name}.key`), 0o600);
    return this.pem(name);
  }

  /**
   * A certificate signed by `ca` for the DNS names and IP addresses in `names` (server and client
   * use). `expired`: its validity ended yesterday.
   */
  leaf(name: string, ca: Pem, names: string[], opts: { expired?: boolean } = {}): Pem {
    const san = names.map((n) => (/^[\d.]+$|:/.test(n) ? `IP:${n}` : `DNS:${n}`)).join(',');
    writeFileSync(
      path.join(this.dir, `${name}.ext`),
      `subjectAltName=${san}\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n`,
    );
    this.openssl([
      'req',
      ...NEW_EC_KEY,
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.csr`,
      '-subj',
      `/CN=${names[0] ?? name}`,
    ]);
    if (opts.expired) {
      // OpenSSL 3.0's x509 has no start date: its `ca` command takes both ends.
      writeFileSync(path.join(this.dir, 'index.txt'), '');
      writeFileSync(
        path.join(this.dir, `${name}.cnf`),
        [
          '[ca]',
          'default_ca = d',
          '[d]',
          `database = index.txt`,
          `new_certs_dir = .`,
          `serial = ${name}.srl`,
          'default_md = sha256',
          'policy = p',
          'copy_extensions = none',
          'unique_subject = no',
          '[p]',
          'commonName = supplied',
        ].join('\n'),
      );
      writeFileSync(path.join(this.dir, `${name}.srl`), `${evenHex(this.serial++)}\n`);
      this.openssl([
        'ca',
        '-batch',
        '-config',
        `${name}.cnf`,
        '-cert',
        ca.certPath,
        '-keyfile',
        ca.keyPath,
        '-in',
        `${name}.csr`,
        '-out',
        `${name}.crt`,
        '-extfile',
        `${name}.ext`,
        '-notext',
        '-startdate',
        '20200101000000Z',
        '-enddate',
        yesterday(),
      ]);
    } else {
      this.openssl([
        'x509',
        '-req',
        '-in',
        `${name}.csr`,
        '-CA',
        ca.certPath,
        '-CAkey',
        ca.keyPath,
        '-set_serial',
        String(this.serial++),
        '-extfile',
        `${name}.ext`,
        '-out',
        `${name}.crt`,
        '-days',
        String(this.days),
      ]);
    }
    chmodSync(path.join(this.dir, `${name}.key`), 0o600);
    return this.pem(name);
  }

  cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A serial number as openssl's serial file takes it: hex digits, an even number of them. */
function evenHex(n: number): string {
  const h = n.toString(16);
  return h.length % 2 === 0 ? h : `0${h}`;
}

function yesterday(): string {
  const d = new Date(Date.now() - 86_400_000);
  return `${d.toISOString().slice(0, 19).replace(/[-:T]/g, '')}Z`;
}
