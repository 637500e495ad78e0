import { describe, expect, test } from "vitest";
import { h } from "./dom";

describe("h", () => {
  test("a trace string is text, never markup", () => {
    const hostile = "<img src=x onerror=alert(1)>";
    const cell = h("td", {}, hostile);
    document.body.appendChild(cell);
    expect(cell.textContent).toBe(hostile);
    expect(cell.querySelector("img")).toBeNull();
    expect(document.querySelectorAll("img").length).toBe(0);
    expect(cell.innerHTML).toBe("&lt;img src=x onerror=alert(1)&gt;");
  });

  test("attributes from data are set as properties, not parsed", () => {
    const element = h("span", { title: '"><script>x</script>', data: { value: "<b>" } }, "a", 1, null, false, "b");
    expect(element.title).toBe('"><script>x</script>');
    expect(element.dataset.value).toBe("<b>");
    expect(element.textContent).toBe("a1b");
    expect(element.children.length).toBe(0);
  });

  test("links may only point inside the app", () => {
    expect(h("a", { href: "#/runs/1" }).getAttribute("href")).toBe("#/runs/1");
    expect(() => h("a", { href: "javascript:alert(1)" })).toThrow(/inside the app/);
    expect(() => h("a", { href: "https://example.com" })).toThrow(/inside the app/);
  });

  test("an option's value may differ from its text", () => {
    const select = h("select", {}, h("option", { value: "0" }, "first <root>"), h("option", { value: "1" }, "second"));
    select.value = "1";
    expect(select.selectedOptions[0].textContent).toBe("second");
    expect((select.options[0] as HTMLOptionElement).value).toBe("0");
  });
});
