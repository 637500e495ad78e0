// The timeline's mouse and keyboard, as in Perfetto:
//   wheel: scroll the tracks up and down; ctrl+wheel (or a pinch): zoom around the mouse;
//   shift+wheel, a sideways wheel or a drag: pan; W/S: zoom in/out; A/D: pan (held keys keep
//   going, at a pace set by time, not by key repeats);
//   click: select the slice under the mouse (or name an instant's marker); shift+drag: mark
//   an area, the time range dragged over (its exact duration is shown on the ruler) on the
//   tracks whose rows the drag crossed (from the ruler down: every track), as in Perfetto;
//   in the label column: a click on a process's or group's header folds or unfolds it, on a
//   track's triangle folds it to its top depth, on the pin pins it to the top (or unpins).
// Moving the mouse over the tracks shows the time line and the counters' values there.

import { isFoldable } from "./drawing";
import { DEPTH_HEIGHT, LABEL_WIDTH, PIN_BUTTON } from "./layout";
import type { TimelineView } from "./timeline_view";

export class TimelineInput {
  private readonly keysDown = new Set<string>();
  private lastKeyFrame = 0;

  constructor(private readonly view: TimelineView) {
    this.listen();
  }

  private listen(): void {
    const view = this.view;
    const canvas = view.canvas;
    canvas.addEventListener(
      "wheel",
      (event) => {
        event.preventDefault();
        // A pixel delta, whatever the wheel's mode (lines: about 16 pixels each).
        const scale = event.deltaMode === 1 ? 16 : event.deltaMode === 2 ? view.height : 1;
        const deltaX = event.deltaX * scale;
        const deltaY = event.deltaY * scale;
        if (event.ctrlKey || event.metaKey) {
          view.zoom(Math.exp(deltaY * 0.002), Math.max(0, event.offsetX - LABEL_WIDTH));
        } else if (event.shiftKey) {
          view.pan(deltaY || deltaX);
        } else if (Math.abs(deltaX) > Math.abs(deltaY)) {
          view.pan(deltaX);
        } else {
          view.scrollTo(view.scroll + deltaY);
        }
      },
      { passive: false },
    );
    let dragFrom: { x: number; y: number; lastX: number; range: boolean; labels: boolean } | null = null;
    canvas.addEventListener("mousedown", (event) => {
      canvas.focus();
      const labels = event.offsetX < LABEL_WIDTH;
      dragFrom = { x: event.offsetX, y: event.offsetY, lastX: event.offsetX, range: event.shiftKey && !labels, labels };
      if (dragFrom.range) {
        const time = view.viewport.timeAt(event.offsetX - LABEL_WIDTH);
        view.range = [time, time];
        const tracks = view.tracksBetween(event.offsetY, event.offsetY);
        view.areaTracks = tracks ? new Set(tracks) : null;
      }
    });
    canvas.addEventListener("mousemove", (event) => {
      if (!dragFrom) {
        view.setHover({ x: event.offsetX, y: event.offsetY });
        return;
      }
      if (dragFrom.labels) return;
      if (dragFrom.range && view.range) {
        view.range = [view.range[0], view.viewport.timeAt(event.offsetX - LABEL_WIDTH)];
        const tracks = view.tracksBetween(dragFrom.y, event.offsetY);
        view.areaTracks = tracks ? new Set(tracks) : null;
        view.requestFrame();
        return;
      }
      view.pan(dragFrom.lastX - event.offsetX);
      dragFrom.lastX = event.offsetX;
    });
    canvas.addEventListener("mouseleave", () => view.setHover(null));
    canvas.addEventListener("mouseup", (event) => {
      if (!dragFrom) return;
      const moved = Math.abs(event.offsetX - dragFrom.x) + Math.abs(event.offsetY - dragFrom.y);
      if (moved < 4 && dragFrom.labels) this.clickLabel(event.offsetX, event.offsetY);
      else if (moved < 4 && !dragFrom.range) this.clickTracks(event.offsetX, event.offsetY);
      if (dragFrom.range && view.range) {
        view.canvas.dataset.range = String(view.rangeDuration() ?? "");
        const [start, end] = view.absoluteRange()!;
        const tracks = view.tracksBetween(dragFrom.y, event.offsetY);
        view.areaTracks = tracks ? new Set(tracks) : null;
        view.canvas.dataset.area = tracks ? tracks.join(",") : "all";
        view.events.onRange(start, end, tracks);
      }
      dragFrom = null;
    });
    canvas.addEventListener("keydown", (event) => {
      const key = event.key.toLowerCase();
      if (!["w", "a", "s", "d"].includes(key) || event.ctrlKey || event.metaKey || event.altKey) return;
      event.preventDefault();
      if (!this.keysDown.has(key)) {
        this.keysDown.add(key);
        this.lastKeyFrame = 0;
        this.applyKey(key, 1);
      }
    });
    canvas.addEventListener("keyup", (event) => {
      this.keysDown.delete(event.key.toLowerCase());
    });
    canvas.addEventListener("blur", () => this.keysDown.clear());
  }

  private clickLabel(x: number, y: number): void {
    const view = this.view;
    const row = view.rowAt(y);
    if (!row) return;
    if (row.kind === "process" || row.kind === "group") {
      view.toggleCollapsed(row.key);
      return;
    }
    if (row.kind !== "packed" && x >= PIN_BUTTON.from - 2 && x <= PIN_BUTTON.to + 2) {
      view.togglePinned(row.key);
      return;
    }
    if (isFoldable(row)) view.toggleCollapsed(row.key);
  }

  private clickTracks(x: number, y: number): void {
    const view = this.view;
    const instant = view.instantHits.find((hit) => Math.abs(hit.x - x) <= 5 && Math.abs(hit.y - y) <= 6);
    if (instant) {
      view.events.onInstant?.(instant);
      return;
    }
    const hits = view.sliceHits;
    for (let i = hits.length - 1; i >= 0; i -= 1) {
      const hit = hits[i];
      if (x >= hit.x && x <= hit.x + hit.width && y >= hit.y && y <= hit.y + DEPTH_HEIGHT) {
        view.select(hit.row);
        view.events.onSelect(hit.row);
        return;
      }
    }
  }

  private applyKey(key: string, steps: number): void {
    const view = this.view;
    if (key === "w") view.zoom(Math.pow(0.8, steps));
    if (key === "s") view.zoom(Math.pow(1.25, steps));
    if (key === "a") view.pan(-view.viewport.width * 0.1 * steps);
    if (key === "d") view.pan(view.viewport.width * 0.1 * steps);
  }

  // Keys held down keep zooming or panning, at a pace set by time, not by key repeats.
  applyHeldKeys(now: number): void {
    if (this.keysDown.size === 0) return;
    if (this.lastKeyFrame !== 0) {
      const steps = Math.min(3, (now - this.lastKeyFrame) / 60);
      for (const key of this.keysDown) this.applyKey(key, steps);
    }
    this.lastKeyFrame = now;
    this.view.requestFrame();
  }
}
