import { expect, test } from "vitest";
import { parseTag } from "./runs";

test("a tag is key=value split at the first '=', or a key alone", () => {
  expect(parseTag("reviewed=yes")).toEqual(["reviewed", "yes"]);
  expect(parseTag(" ci ")).toEqual(["ci", ""]);
  expect(parseTag("expr=a=b")).toEqual(["expr", "a=b"]);
  expect(parseTag("k = v")).toEqual(["k", "v"]);
});
