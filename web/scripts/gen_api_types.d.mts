// The type of scripts/gen_api_types.mjs's export, for src/api_types.test.ts.
export function generate(specText: string): Promise<string>;
