/**
 * xterm.js styles itself two ways the console's CSP (`style-src 'self'`, no
 * 'unsafe-inline') refuses: `<style>` elements it creates and fills (its theme,
 * cell sizes, scrollbar), and `setAttribute("style", …)` on cells with 24-bit
 * colours. Both have a CSSOM twin that CSP leaves alone, since it is script
 * acting on styles rather than inline markup: constructed stylesheets
 * (`document.adoptedStyleSheets`) and `element.style.cssText`. This routes the
 * first two through the second two: a "style element" is an inert
 * `<template>` whose text fills a constructed sheet (an empty `<style>` alone
 * is already reported), and a style attribute becomes cssText. Nothing else in
 * the console makes style elements or style attributes (CSP forbids them).
 */
let installed = false;

export function routeStylesThroughCssom(doc: Document = document): void {
  if (installed) return;
  installed = true;
  const create = doc.createElement.bind(doc) as (tag: string, options?: ElementCreationOptions) => HTMLElement;
  doc.createElement = function (tag: string, options?: ElementCreationOptions) {
    if (tag.toLowerCase() !== "style") return create(tag, options);
    const element = create("template");
    element.dataset.style = "";
    const sheet = new CSSStyleSheet();
    let text = "";
    doc.adoptedStyleSheets = [...doc.adoptedStyleSheets, sheet];
    Object.defineProperty(element, "textContent", {
      get: () => text,
      set: (value: string | null) => {
        text = value ?? "";
        sheet.replaceSync(text);
      },
    });
    const remove = element.remove.bind(element);
    element.remove = () => {
      doc.adoptedStyleSheets = doc.adoptedStyleSheets.filter((s) => s !== sheet);
      remove();
    };
    return element;
  } as typeof doc.createElement;
  const setAttribute = Element.prototype.setAttribute;
  Element.prototype.setAttribute = function (this: Element, name: string, value: string) {
    if (name.toLowerCase() === "style" && this instanceof HTMLElement) {
      this.style.cssText = value;
      return;
    }
    setAttribute.call(this, name, value);
  };
}
