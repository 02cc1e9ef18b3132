export * from './client.js';
export * from './errors.js';
export * from './interrupt.js';
