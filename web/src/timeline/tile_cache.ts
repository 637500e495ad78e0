// Tiles of the timeline fetched from the server and kept for redraws: a frame draws only
// what is already here (never waits for the network), asking for what is missing; until a
// tile arrives, the same time is drawn from a coarser tile already held. Bounded: the
// least recently used tiles go beyond MAX_TILES.

import { tileRange, type TileKey } from "./viewport";

export const MAX_TILES = 2000;

export type TileFetcher<T> = (track: number, key: TileKey, start: number, end: number, resolution: number) => Promise<T>;

export class TileCache<T> {
  private readonly tiles = new Map<string, T>();
  private readonly pending = new Set<string>();
  failures = 0;

  constructor(
    private readonly fetcher: TileFetcher<T>,
    private readonly onArrival: () => void,
  ) {}

  private static id(track: number, key: TileKey): string {
    return `${track}:${key.level}:${key.index}`;
  }

  // The tile if held (marking it recently used); else starts fetching it.
  get(track: number, key: TileKey): T | undefined {
    const id = TileCache.id(track, key);
    const tile = this.tiles.get(id);
    if (tile !== undefined) {
      this.tiles.delete(id);
      this.tiles.set(id, tile);
      return tile;
    }
    this.request(track, key);
    return undefined;
  }

  // A held tile at a coarser level covering the same time, for drawing meanwhile.
  coarser(track: number, key: TileKey, maxLevels = 12): { tile: T; key: TileKey } | undefined {
    for (let up = 1; up <= maxLevels; up += 1) {
      const coarserKey = { level: key.level + up, index: Math.floor(key.index / 2 ** up) };
      const tile = this.tiles.get(TileCache.id(track, coarserKey));
      if (tile !== undefined) return { tile, key: coarserKey };
    }
    return undefined;
  }

  // Keeps a tile fetched by someone else (the page's whole-trace tiles of task lanes).
  put(track: number, key: TileKey, tile: T): void {
    this.tiles.set(TileCache.id(track, key), tile);
  }

  pendingCount(): number {
    return this.pending.size;
  }

  size(): number {
    return this.tiles.size;
  }

  private request(track: number, key: TileKey): void {
    const id = TileCache.id(track, key);
    if (this.pending.has(id)) return;
    this.pending.add(id);
    const [start, end] = tileRange(key.level, key.index);
    this.fetcher(track, key, start, end, 2 ** key.level)
      .then((tile) => {
        this.tiles.set(id, tile);
        while (this.tiles.size > MAX_TILES) this.tiles.delete(this.tiles.keys().next().value as string);
      })
      .catch(() => {
        this.failures += 1;
      })
      .finally(() => {
        this.pending.delete(id);
        this.onArrival();
      });
  }
}
