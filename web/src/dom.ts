// Builds the page's DOM. Every string, and so every string that came from a trace (span
// names, args, commands), becomes a Text node: nothing is ever parsed as HTML, so a span
// named "<img src=x onerror=alert(1)>" shows as those characters. Links may only point
// inside the app ("#/...").

export type Child = Node | string | number | null | undefined | false;

export interface Props {
  class?: string;
  title?: string;
  href?: string;
  id?: string;
  type?: string;
  value?: string;
  placeholder?: string;
  checked?: boolean;
  disabled?: boolean;
  data?: Record<string, string | number>;
  style?: Partial<CSSStyleDeclaration>;
  on?: Partial<{ [K in keyof HTMLElementEventMap]: (event: HTMLElementEventMap[K]) => void }>;
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  if (props.class) element.className = props.class;
  if (props.title !== undefined) element.title = props.title;
  if (props.id) element.id = props.id;
  if (props.href !== undefined) {
    if (!props.href.startsWith("#")) throw new Error(`links stay inside the app: ${props.href}`);
    element.setAttribute("href", props.href);
  }
  if (element instanceof HTMLInputElement) {
    if (props.type) element.type = props.type;
    if (props.value !== undefined) element.value = props.value;
    if (props.placeholder) element.placeholder = props.placeholder;
    if (props.checked !== undefined) element.checked = props.checked;
  }
  if (element instanceof HTMLOptionElement && props.value !== undefined) element.value = props.value;
  if (props.disabled !== undefined && "disabled" in element)
    (element as HTMLButtonElement).disabled = props.disabled;
  if (props.data) for (const [key, value] of Object.entries(props.data)) element.dataset[key] = String(value);
  if (props.style) Object.assign(element.style, props.style);
  if (props.on)
    for (const [name, handler] of Object.entries(props.on))
      element.addEventListener(name, handler as EventListener);
  append(element, ...children);
  return element;
}

export function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
}

export function clear(element: Element): void {
  while (element.firstChild) element.removeChild(element.firstChild);
}
