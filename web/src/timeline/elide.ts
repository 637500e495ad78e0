// Text cut to a width with an ellipsis ("encoder.lay…") instead of squeezed: the longest
// prefix that fits with "…" after it, found by binary search over a measuring function
// (the canvas's measureText in the app, a fixed width per character in tests). Pure.

export const ELLIPSIS = "…";

export function elide(text: string, maxWidth: number, measure: (text: string) => number): string {
  if (maxWidth <= 0 || !text) return "";
  if (measure(text) <= maxWidth) return text;
  if (measure(ELLIPSIS) > maxWidth) return "";
  let low = 0; // this many characters fit with the ellipsis
  let high = text.length - 1;
  while (low < high) {
    const middle = (low + high + 1) >> 1;
    if (measure(text.slice(0, middle) + ELLIPSIS) <= maxWidth) low = middle;
    else high = middle - 1;
  }
  return text.slice(0, low) + ELLIPSIS;
}

// A measure that remembers widths per font for the canvas: measureText is slow enough to
// matter at thousands of labels a frame, and labels repeat.
export class TextMeasure {
  private readonly widths = new Map<string, number>();
  private font = "";

  constructor(private readonly context: CanvasRenderingContext2D) {}

  measure = (text: string): number => {
    if (this.context.font !== this.font) {
      this.font = this.context.font;
      this.widths.clear();
    }
    let width = this.widths.get(text);
    if (width === undefined) {
      width = this.context.measureText(text).width;
      if (this.widths.size > 20000) this.widths.clear();
      this.widths.set(text, width);
    }
    return width;
  };
}
