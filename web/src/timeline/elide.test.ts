import { describe, expect, it } from "vitest";
import { elide } from "./elide";

const monospace = (text: string) => text.length * 7;

describe("eliding labels", () => {
  it("keeps what fits and cuts the rest with an ellipsis", () => {
    expect(elide("encoder.layer.3", 200, monospace)).toBe("encoder.layer.3");
    expect(elide("encoder.layer.3", 70, monospace)).toBe("encoder.l…");
    expect(monospace(elide("encoder.layer.3", 70, monospace))).toBeLessThanOrEqual(70);
    expect(elide("encoder.layer.3", 69, monospace)).toBe("encoder.…");
  });

  it("gives nothing where not even the ellipsis fits", () => {
    expect(elide("encoder", 5, monospace)).toBe("");
    expect(elide("encoder", 7, monospace)).toBe("…");
    expect(elide("", 100, monospace)).toBe("");
  });
});
