// `npm run schemas:gen`: regenerates schemas/types.generated.ts from the current schemas.
import { relative } from 'node:path';
import { loadSchemaSources } from '../../platform/codec/schema-files.js';
import { writeGeneratedTypes } from '../../platform/codec/typegen.js';

const { current } = loadSchemaSources();
const file = writeGeneratedTypes(current);
console.log(`wrote ${relative(process.cwd(), file)} (${current.length} schemas)`);
