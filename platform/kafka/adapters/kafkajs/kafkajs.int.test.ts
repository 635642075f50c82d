// The kafkajs adapter against the real local broker: the port's contract (platform/kafka/contract.ts).
import { describeKafkaPort } from '../../../../test/support/kafka/contract.js';
import { kafkajsClient } from './index.js';

describeKafkaPort('kafkajs', kafkajsClient);
