// Throwaway certificates for TLS tests: the stack's own maker (infra/stack/pki.ts) in a
// temporary folder, valid for two days.
export { type Pem, Pki as TestPki } from '../../../infra/stack/pki.js';
