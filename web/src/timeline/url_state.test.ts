import { describe, expect, it } from "vitest";
import { decodeUrlState, defaultUrlState, encodeUrlState, type TimelineUrlState } from "./url_state";

describe("timeline URL state", () => {
  it("comes back exactly from its encoding", () => {
    const state: TimelineUrlState = {
      window: [1700000000123456789 / 1000, 1700000000223456789 / 1000].map(Math.round) as [number, number],
      scroll: 140,
      slice: 42,
      search: "encoder layer",
      match: 3,
      range: [1000, 250000],
      area: [3, 0, 12],
      pinned: ["t:3", "c:0"],
      collapsed: ["p:11", "g:11:lanes:5", "t:7"],
      trackFilter: "worker",
      flows: false,
      instants: false,
      critical: true,
    };
    const query = encodeUrlState(state);
    const search = new URLSearchParams(query).toString();
    const parsed: Record<string, string> = {};
    for (const [key, value] of new URLSearchParams(search)) parsed[key] = value;
    expect(decodeUrlState(parsed)).toEqual(state);
  });

  it("leaves defaults out of the URL", () => {
    expect(encodeUrlState(defaultUrlState())).toEqual({});
    expect(decodeUrlState({})).toEqual(defaultUrlState());
  });

  it("ignores a match without a search and a reversed window", () => {
    const state = decodeUrlState({ match: "2", start: "10", end: "5" });
    expect(state.match).toBeNull();
    expect(state.window).toBeNull();
  });

  it("keeps an area's tracks only with a range, and drops ids that are not", () => {
    expect(decodeUrlState({ area: "1,2" }).area).toBeNull();
    expect(decodeUrlState({ rs: "1", re: "2", area: "4,x,-1,7" }).area).toEqual([4, 7]);
    expect(decodeUrlState({ rs: "1", re: "2", area: "" }).area).toBeNull();
  });

  it("orders a range given backwards", () => {
    expect(decodeUrlState({ rs: "90", re: "10" }).range).toEqual([10, 90]);
  });
});
