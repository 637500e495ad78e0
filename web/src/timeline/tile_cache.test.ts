import { expect, test } from "vitest";
import { TileCache } from "./tile_cache";

test("a missing tile is fetched once, then held; a coarser one stands in meanwhile", async () => {
  const asked: string[] = [];
  let arrivals = 0;
  const cache = new TileCache<string>(async (track, key, start, end, resolution) => {
    asked.push(`${track}:${key.level}:${key.index}:${start}-${end}@${resolution}`);
    return `tile ${key.level}/${key.index}`;
  }, () => (arrivals += 1));
  expect(cache.get(0, { level: 3, index: 0 })).toBeUndefined();
  expect(cache.get(0, { level: 3, index: 0 })).toBeUndefined(); // pending: not asked twice
  await Promise.resolve();
  await new Promise((done) => setTimeout(done, 0));
  expect(asked).toEqual(["0:3:0:0-8192@8"]);
  expect(arrivals).toBe(1);
  expect(cache.get(0, { level: 3, index: 0 })).toBe("tile 3/0");
  expect(cache.coarser(0, { level: 1, index: 3 })).toEqual({ tile: "tile 3/0", key: { level: 3, index: 0 } });
  expect(cache.coarser(0, { level: 1, index: 4 })).toBeUndefined();
});

test("failures are counted and retried on the next request", async () => {
  let calls = 0;
  const cache = new TileCache<string>(async () => {
    calls += 1;
    throw new Error("500");
  }, () => {});
  cache.get(1, { level: 0, index: 0 });
  await new Promise((done) => setTimeout(done, 0));
  expect(cache.failures).toBe(1);
  cache.get(1, { level: 0, index: 0 });
  await new Promise((done) => setTimeout(done, 0));
  expect(calls).toBe(2);
});
