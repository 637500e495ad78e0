/// <reference types="vite/client" />
// src/api_types.ts is what `npm run gen-types` makes of docs/ui-openapi.json now: a
// change of the OpenAPI file without generating the types again fails here.
import { expect, test } from "vitest";
import { generate } from "../scripts/gen_api_types.mjs";
import generated from "./api_types.ts?raw";
import spec from "../../docs/ui-openapi.json?raw";

test("api_types.ts is generated from the current docs/ui-openapi.json", async () => {
  expect(generated, "run `npm run gen-types` in web/").toBe(await generate(spec));
});

test("the pages' main answers have schemas, not bare objects", () => {
  const schemas = JSON.parse(spec).components.schemas as Record<string, unknown>;
  for (const name of ["RunsAnswer", "RunEntry", "RunDetail", "SummaryRow", "MergedTree", "TreeNode", "TimelineLayout", "TileAnswer"])
    expect(schemas[name], name).toBeDefined();
});
