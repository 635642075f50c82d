// Every workflow the rods worker runs (the bundle entry point).
export { campaignWorkflow } from './campaign.js';
export { evaluationWorkflow } from './evaluation.js';
export { ingestionWorkflow } from './ingestion.js';
export { synthesisWorkflow } from './synthesis.js';
